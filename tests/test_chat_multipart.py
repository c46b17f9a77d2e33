"""`POST /api/chat` (and `/api/chat/stream`) with the files in the same request (issue 28,
scripts): multipart/form-data with the message's fields and `file` parts, the limits,
checks and errors of `POST /api/uploads`, and nothing half-done when refused."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from conftest import Client, MakeClient, set_quota, signed_in
from fake_llm import FakeLLM, fake_llm_fixture  # noqa: F401

from skald.api.app import create_app
from skald.core.runtime import Runtime

Post = Callable[..., Awaitable[httpx.Response]]
REPORT = b"%PDF-1.4 the quarterly report: MARKER-7731\n"


async def _script(make_client: MakeClient, member: Client) -> Post:
    """A script of `member`: a fresh client with one of their API tokens (scope `chat`),
    no session; its POST sends the token."""
    r = await member.call("POST", "/api/tokens", json={"name": "script", "scopes": ["chat"]})
    assert r.status_code == 201, r.text
    headers = {"Authorization": f"Bearer {r.json()['token']}"}
    script = await make_client()

    async def post(path: str, **kwargs: Any) -> httpx.Response:
        return await script.http.post(path, headers=headers, **kwargs)

    return post


def _uploads(runtime: Runtime, user_id: str) -> Path:
    return runtime.core.layout.home(user_id) / "uploads"


def _files_under(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _small_uploads(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, mb: int = 1) -> None:
    small = msgspec.structs.replace(runtime.config.assistant, upload_max_mb=mb)
    monkeypatch.setattr(runtime, "config", msgspec.structs.replace(runtime.config, assistant=small))


async def test_a_token_sends_a_message_with_two_files_in_one_request(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    llm.script("model-a", ["Both read."])
    ada = await signed_in(make_client, "ada")
    post = await _script(make_client, ada)
    r = await post(
        "/api/chat",
        data={"text": "Summarise these"},
        files=[
            ("file", ("report.pdf", REPORT, "application/pdf")),
            ("file", ("notes.txt", b"milk, eggs\n", "text/plain")),
        ],
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "done" and out["reply"] == "Both read.", out
    cid = out["conversation_id"]
    folder = _uploads(runtime, household["ada"]) / cid
    assert (folder / "report.pdf").read_bytes() == REPORT
    assert (folder / "notes.txt").read_bytes() == b"milk, eggs\n"
    # The message carries both, as if uploaded first and named in `attachments`.
    history = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    [sent] = [i for i in history if i["role"] == "user"]
    assert sent["text"] == "Summarise these"
    assert [a["name"] for a in sent["attachments"]] == ["report.pdf", "notes.txt"]
    # The model is told where they are (the agent reads them with its file tools).
    assert f"uploads/{cid}/report.pdf" in json.dumps(llm.bodies()[-1])


async def test_a_session_continues_its_conversation_with_a_file_and_streams_the_answer(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    llm.script("model-a", ["First.", "Got the list."])
    ada = await signed_in(make_client, "ada")
    first = (await ada.call("POST", "/api/chat", json={"text": "hello"})).json()
    cid = first["conversation_id"]
    r = await ada.call(
        "POST",
        "/api/chat/stream",
        data={"conversation_id": cid, "text": "Here is the list"},
        files={"file": ("list.md", b"- bread\n", "text/markdown")},
    )
    assert r.status_code == 200, r.text
    done = json.loads(r.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert done["status"] == "done" and done["conversation_id"] == cid, done
    assert (_uploads(runtime, household["ada"]) / cid / "list.md").read_bytes() == b"- bread\n"
    # The session still needs its CSRF token for a form, as for JSON.
    r = await ada.http.post("/api/chat", data={"text": "x"}, files={"file": ("a.txt", b"a")})
    assert r.status_code == 403
    assert _files_under(_uploads(runtime, household["ada"])) == [f"{cid}/list.md"]


async def test_an_oversized_part_is_413_and_nothing_is_kept_nor_sent(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm.script("model-a", ["Hi."])
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/chat", json={"text": "hello"})).json()["conversation_id"]
    asked = len(llm.bodies())
    _small_uploads(runtime, monkeypatch)
    r = await ada.call(
        "POST",
        "/api/chat",
        data={"conversation_id": cid, "text": "two files"},
        files=[
            ("file", ("small.txt", b"fits\n", "text/plain")),  # stored, then removed again
            ("file", ("big.bin", os.urandom(1024 * 1024 + 200_000), "application/octet-stream")),
        ],
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text
    assert "1 MiB" in r.json()["error"]["message"]
    folder = _uploads(runtime, household["ada"]) / cid
    assert _files_under(folder) == [] and not [p for p in folder.iterdir()]  # no temp file
    history = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    assert [i["text"] for i in history if i["role"] == "user"] == ["hello"]
    assert len(llm.bodies()) == asked
    # The same request within the limit goes through (nothing left over: no "small (2)").
    r = await ada.call(
        "POST",
        "/api/chat",
        data={"conversation_id": cid, "text": "now"},
        files={"file": ("small.txt", b"fits\n", "text/plain")},
    )
    assert r.status_code == 200, r.text
    assert _files_under(folder) == ["small.txt"]


async def test_two_files_that_fit_the_quota_together_are_taken_and_counted_once(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    """The reader's check counts the bytes received so far, stored files included: a
    file must not also be counted again once stored (a form near the quota was refused
    early)."""
    llm.script("model-a", ["Got them."])
    await set_quota(runtime, "member", 1)
    ada = await signed_in(make_client, "ada")
    uid = household["ada"]
    before = await asyncio.to_thread(runtime.storage.scan, uid)
    part = int((1024 * 1024 - before) * 0.45)  # two fit in her room; counted twice, not
    r = await ada.call(
        "POST",
        "/api/chat",
        data={"text": "two files"},
        files=[
            ("file", ("a.bin", os.urandom(part), "application/octet-stream")),
            ("file", ("b.bin", os.urandom(part), "application/octet-stream")),
        ],
    )
    assert r.status_code == 200, r.text
    assert runtime.storage.cached_usage(uid) == before + 2 * part


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        # A file name with a path: only its last part is kept (tested below); a field
        # name with one is an unknown field, refused.
        ({"data": {"text": "x"}, "files": {"../../etc/passwd": ("a.txt", b"a")}}, "files go in"),
        ({"data": {"text": "x", "../x": "y"}}, "unknown field"),
        ({"data": {"text": "x", "text ": "y"}}, "unknown field"),
        ({"data": {}, "files": {"file": ("a.txt", b"a")}}, "'text' is required"),
        ({"data": {"text": "x", "attachments": "/etc/passwd"}}, "not an upload"),
        ({"data": {"text": "x", "conversation_id": "c" * 65}}, "at most 64"),
    ],
)
async def test_a_bad_form_is_a_clear_400_and_leaves_no_file(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    llm: FakeLLM,
    parts: dict[str, Any],
    says: str,
) -> None:
    llm.script("model-a", ["must not be asked"])
    ada = await signed_in(make_client, "ada")
    post = await _script(make_client, ada)
    if "files" not in parts:
        parts = {**parts, "files": {"file": ("note.txt", b"n")}}
    r = await post("/api/chat", **parts)
    assert r.status_code == 400, r.text
    assert says in r.json()["error"]["message"], r.text
    assert _files_under(_uploads(runtime, household["ada"])) == []
    assert llm.remaining("model-a") == 1


async def test_a_file_name_with_a_path_lands_in_the_conversations_uploads_only(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    llm.script("model-a", ["ok"])
    ada = await signed_in(make_client, "ada")
    post = await _script(make_client, ada)
    r = await post(
        "/api/chat",
        data={"text": "x"},
        files={"file": ("../../../../mum/secret.txt", b"planted", "text/plain")},
    )
    assert r.status_code == 200, r.text
    cid = r.json()["conversation_id"]
    assert _files_under(_uploads(runtime, household["ada"])) == [f"{cid}/secret.txt"]
    homes = runtime.core.layout.homes_dir
    planted = [p for p in homes.rglob("*") if p.is_file() and p.read_bytes() == b"planted"]
    assert planted == [_uploads(runtime, household["ada"]) / cid / "secret.txt"]


async def test_a_members_token_cannot_post_files_into_another_members_conversation(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    llm.script("model-a", ["Hi Ada."])
    ada = await signed_in(make_client, "ada")
    hers = (await ada.call("POST", "/api/chat", json={"text": "hello"})).json()["conversation_id"]
    tim = await signed_in(make_client, "tim")
    post = await _script(make_client, tim)
    for path in ("/api/chat", "/api/chat/stream"):
        r = await post(
            path,
            data={"conversation_id": hers, "text": "I am in"},
            files={"file": ("evil.txt", b"evil", "text/plain")},
        )
        assert r.status_code == 404, (path, r.text)
    for who in ("ada", "tim"):
        assert _files_under(_uploads(runtime, household[who])) == [], who
    history = (await ada.call("GET", f"/api/conversations/{hers}/messages")).json()
    assert [i["text"] for i in history if i["role"] == "user"] == ["hello"]


async def test_the_openapi_document_says_the_chat_routes_take_json_or_a_form_with_files(
    runtime: Runtime,
) -> None:
    doc = create_app(runtime).openapi_schema.to_schema()
    for path in ("/api/chat", "/api/chat/stream"):
        body = doc["paths"][path]["post"]["requestBody"]["content"]
        assert set(body) == {"application/json", "multipart/form-data"}, path
        form = body["multipart/form-data"]["schema"]
        assert form["properties"]["file"]["items"]["format"] == "binary"
        assert body["application/json"]["schema"]["required"] == ["text"]
        assert "413" in doc["paths"][path]["post"]["responses"]
