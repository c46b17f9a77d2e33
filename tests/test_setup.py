"""First setup and provider discovery: the household's instance settings (time zone in
the prompt, only an administrator changes them), the Overview's checklist fed by the
doctor's own checks, Test connection and the models list of a real HTTP provider (the
fake one), the capabilities guessed from model families, and "test this provider"."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import MakeClient, signed_in
from fake_llm import FakeLLM

from skald.core.runtime import Runtime
from skald.llm.discovery import guess_model
from skald.ops.checks_host import check_docker, check_image
from skald.ops.checks_setup import SETUP_CHECKS, check_backup, check_models
from skald.ops.doctor import CHECKS


def test_capabilities_are_guessed_from_known_model_families() -> None:
    assert guess_model("gpt-4o-mini").capabilities == ["tools", "vision"]
    assert "reasoning" in guess_model("o3-mini").capabilities
    assert guess_model("claude-3-5-haiku-latest").capabilities == ["tools", "vision"]
    assert "reasoning" in guess_model("claude-sonnet-4-20250514").capabilities
    assert guess_model("llava:13b").capabilities == ["tools", "vision"]
    assert guess_model("qwen3:8b").capabilities == ["tools", "reasoning"]
    assert guess_model("deepseek-r1:7b").capabilities == ["tools", "reasoning"]
    assert guess_model("text-embedding-3-small").capabilities == []
    unknown = guess_model("my-own-finetune", context_window=8192)
    assert unknown.capabilities == ["tools"] and unknown.context_window == 8192


def test_the_checklist_runs_the_doctors_own_docker_and_image_checks() -> None:
    # One set of checks: the Overview does not keep its own copy of the doctor's.
    assert check_docker in CHECKS and check_image in CHECKS
    assert [check_models, check_docker, check_image, check_backup] == SETUP_CHECKS


async def test_only_an_administrator_changes_the_instance_settings_and_the_prompt_uses_its_time_zone(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    member = await signed_in(make_client, "ada")
    r = await member.call("GET", "/api/instance")
    assert r.status_code == 200 and r.json()["timezone_chosen"] is False
    r = await member.call("PATCH", "/api/instance", json={"timezone": "Europe/Rome"})
    assert r.status_code == 403
    r = await admin.call("PATCH", "/api/instance", json={"timezone": "Mars/Olympus"})
    assert r.status_code == 400 and "time zone" in r.json()["error"]["message"]
    r = await admin.call(
        "PATCH",
        "/api/instance",
        json={"household_name": "The Rossis", "timezone": "Europe/Rome", "language": "it"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["timezone"] == "Europe/Rome" and r.json()["timezone_chosen"] is True
    # Kept across a restart of the settings (read back from the registry).
    assert (await runtime.instance.load()).household_name == "The Rossis"
    # A member added now has no language of their own: the household's, live.
    r = await admin.call(
        "POST",
        "/api/users",
        json={"username": "nonna", "password": "a long password here", "role": "member"},
    )
    assert r.status_code == 201 and r.json()["user"]["locale"] == "", r.text

    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake_llm.base_url_openai, None
    )
    await runtime.llm.add_model(provider.id, "m", "m", "average", ["tools"], 1, True)
    fake_llm.script("m", ["Buongiorno."])
    reply = await member.call("POST", "/api/chat", json={"text": "che ore sono?"})
    assert reply.json()["reply"] == "Buongiorno."
    system = json.dumps(fake_llm.bodies()[-1]["messages"][0])
    assert "Europe/Rome timezone" in system and "The Rossis" in system


async def test_the_checklist_empties_as_a_model_and_a_backup_arrive(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    member = await signed_in(make_client, "ada")
    assert (await member.call("GET", "/api/setup/checklist")).status_code == 403
    first = (await admin.call("GET", "/api/setup/checklist")).json()
    names = [i["name"] for i in first["items"]]
    assert "models" in names and "backup" in names and first["chat_ready"] is False
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake_llm.base_url_openai, None
    )
    await runtime.llm.add_model(provider.id, "m", "m", "average", ["tools"], 1, True)
    second = (await admin.call("GET", "/api/setup/checklist")).json()
    assert "models" not in [i["name"] for i in second["items"]] and second["chat_ready"]
    backups = runtime.core.layout.backups_dir
    backups.mkdir(parents=True, exist_ok=True)
    (backups / "skald-backup-20261201-000000.tar").write_bytes(b"x")
    third = (await admin.call("GET", "/api/setup/checklist")).json()
    assert "backup" not in [i["name"] for i in third["items"]]


async def test_test_connection_lists_the_providers_models_with_guesses_and_says_what_went_wrong(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    with FakeLLM(api_key="sk-right") as fake:
        fake.listed = {
            "gpt-4o-mini": {},
            "qwen3:8b": {"context_length": 40960},
            # OpenRouter's shape: what the list says wins over the family's guess.
            "acme/house-model": {
                "context_length": 32768,
                "top_provider": {"max_completion_tokens": 4096},
                "architecture": {"input_modalities": ["text", "image"]},
            },
        }
        r = await admin.call(
            "POST",
            "/api/llm/check",
            json={
                "kind": "openai_compatible",
                "base_url": fake.base_url_openai,
                "api_key": "sk-right",
            },
        )
        out = r.json()
        assert r.status_code == 200 and out["ok"], out
        by_id = {m["id"]: m["guess"] for m in out["models"]}
        assert by_id["gpt-4o-mini"]["capabilities"] == ["tools", "vision"]
        assert by_id["acme/house-model"] == {
            "capabilities": ["tools", "vision"],
            "context_window": 32768,
            "max_output_tokens": 4096,
        }
        assert by_id["qwen3:8b"] == {
            "capabilities": ["tools", "reasoning"],
            "context_window": 40960,
            "max_output_tokens": None,
        }
        wrong = (
            await admin.call(
                "POST",
                "/api/llm/check",
                json={
                    "kind": "openai_compatible",
                    "base_url": fake.base_url_openai,
                    "api_key": "sk-wrong",
                },
            )
        ).json()
        assert wrong["ok"] is False and "refused the key" in wrong["message"]
        assert "sk-wrong" not in json.dumps(wrong)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = (
        await admin.call(
            "POST",
            "/api/llm/check",
            json={"kind": "ollama", "base_url": f"http://127.0.0.1:{port}/v1"},
        )
    ).json()
    assert gone["ok"] is False and "Nothing answers" in gone["message"]
    r = await admin.call("POST", "/api/llm/check", json={"kind": "openai_compatible"})
    assert r.status_code == 400
    kinds = (await admin.call("GET", "/api/llm/kinds")).json()["details"]
    names = [k["name"] for k in kinds]
    assert names[:2] == ["OpenAI", "Anthropic"] and names[-1] == "Other OpenAI-compatible server"
    assert next(k for k in kinds if k["id"] == "openai_compatible")["base_url"] is None
    assert next(k for k in kinds if k["id"] == "ollama")["base_url"].startswith("http://127.0.0.1")


class _BareList(BaseHTTPRequestHandler):
    """A server whose `GET /v1/models` is a bare JSON array (some local servers)."""

    def do_GET(self) -> None:
        body = json.dumps([{"id": "house-7b", "context_length": 8192}]).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_test_connection_and_the_models_list_read_a_providers_list_the_same_way(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BareList)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        admin = await signed_in(make_client, "mum")
        r = await admin.call("POST", "/api/llm/check", json={"kind": "ollama", "base_url": base})
        assert r.status_code == 200 and r.json()["ok"], r.text
        assert [(m["id"], m["guess"]["context_window"]) for m in r.json()["models"]] == [
            ("house-7b", 8192)
        ]
        provider = await runtime.llm.add_provider("House", "ollama", base, None)
        listed = await runtime.llm.provider_models(provider.id)
        assert [(m.id, m.context_window) for m in listed] == [("house-7b", 8192)]
    finally:
        server.shutdown()
        server.server_close()


async def test_test_this_provider_makes_a_tiny_real_request(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake_llm.base_url_openai, "sk-x"
    )
    await runtime.llm.add_model(provider.id, "tiny", "Tiny", "average", ["tools"], 1, True)
    fake_llm.script("tiny", ["OK", 500])
    r = await admin.call("POST", f"/api/llm/providers/{provider.id}/test", json={})
    out = r.json()
    assert r.status_code == 200 and out["ok"] and out["reply"] == "OK", out
    body = fake_llm.bodies()[-1]
    assert body["model"] == "tiny" and body["max_tokens"] == 16
    failed = (await admin.call("POST", f"/api/llm/providers/{provider.id}/test", json={})).json()
    assert failed["ok"] is False and "did not answer" in failed["message"]
    r = await admin.call("POST", "/api/llm/providers/nope/test", json={})
    assert r.status_code == 404
    member = await signed_in(make_client, "ada")
    assert (
        await member.call("POST", f"/api/llm/providers/{provider.id}/test", json={})
    ).status_code == 403


async def test_a_key_http_cannot_carry_is_a_plain_answer_not_a_server_error(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    url = fake_llm.base_url_openai
    # As the fuzzer sent them: accented letters, and JSON escapes of lone surrogates.
    for key in ("\\u00e9t\\u00e9", "\\uda50\\udf0dB\\u009b"):
        body = f'{{"kind": "openai_compatible", "base_url": "{url}", "api_key": "{key}"}}'
        r = await admin.call(
            "POST",
            "/api/llm/check",
            content=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["ok"] is False and "cannot be sent" in r.json()["message"]
