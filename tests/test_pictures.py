"""`generate_image` through the whole chat: the fake chat model asks for a picture, the
approval rules gate it as a paid call, the image model (an HTTP double on 127.0.0.1
speaking the real `/v1/images/generations` wire format) draws it, and it lands in the
requester's own uploads, nowhere else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Client, MakeClient, set_quota, signed_in, wait_idle
from fake_llm import Call, FakeLLM, Text
from voice_engines import Engines, tiny_png

from skald.core.runtime import Runtime


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    running = Engines().start()
    yield running
    running.stop()


async def _setup(make_client: MakeClient, fake: FakeLLM, engines: Engines) -> str:
    """A chat model on the fake and an image model on the engines; the image model's id."""
    admin = await signed_in(make_client, "mum")
    ids = []
    for name, base, wire, kind in (
        ("Chat", fake.base_url_openai, "model-a", "chat"),
        ("Pictures", engines.base_url, "dall-e-3", "image"),
    ):
        r = await admin.call(
            "POST",
            "/api/llm/providers",
            json={"name": name, "kind": "openai_compatible", "base_url": base},
        )
        assert r.status_code == 201, r.text
        r = await admin.call(
            "POST",
            "/api/llm/models",
            json={"provider_id": r.json()["id"], "model": wire, "name": wire, "kind": kind},
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return str(ids[1])


async def _chat(client: Client, text: str) -> dict[str, Any]:
    r = await client.call("POST", "/api/chat", json={"text": text})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


async def _approve(client: Client, cid: str) -> str:
    """Approve the call waiting in the conversation; its id."""
    items = (await client.call("GET", f"/api/conversations/{cid}/messages")).json()
    call = next(c for i in items for c in i["tool_calls"] if c["status"] == "awaiting_approval")
    assert call["name"] == "generate_image"
    r = await client.call("POST", f"/api/approvals/{call['id']}", json={"decision": "approve"})
    assert r.status_code == 204, r.text
    return str(call["id"])


async def test_a_drawn_picture_is_approved_like_a_paid_call_and_lands_in_the_requesters_uploads(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    engines: Engines,
) -> None:
    image_model = await _setup(make_client, fake_llm, engines)
    draw = Call("generate_image", {"prompt": "a red square", "size": "256x256"})
    fake_llm.script("model-a", [[draw], Text("Here is your picture.")])
    ada = await signed_in(make_client, "ada")

    out = await _chat(ada, "Draw me a red square")
    # Seeded rule: a request the provider may bill waits for a person.
    assert out["status"] == "awaiting_approval", out
    assert engines.requests == []
    cid = out["conversation_id"]
    call_id = await _approve(ada, cid)
    await wait_idle(ada, cid)
    name = f"picture-{call_id}.png"

    (sent,) = engines.requests
    assert sent["path"] == "/v1/images/generations"
    assert (sent["model"], sent["prompt"], sent["size"], sent["response_format"]) == (
        "dall-e-3",
        "a red square",
        "256x256",
        "b64_json",
    )
    url = f"/api/pictures/{cid}/{name}"
    r = await ada.call("GET", url)
    assert r.status_code == 200, r.text
    assert r.content == tiny_png() and r.headers["content-type"] == "image/png"
    ada_home = runtime.core.layout.home(household["ada"])
    assert (ada_home / "uploads" / cid / name).read_bytes() == tiny_png()
    # Another member cannot reach it, and nothing was written into their home.
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("GET", url)).status_code == 404
    mum_home = runtime.core.layout.home(household["mum"])
    assert not list(mum_home.glob("uploads/**/picture-*"))
    # One usage row for the picture, the requester's.
    rows = [r for r in await runtime.llm.store.requests() if r.model_id == image_model]
    assert [(r.user_id, r.status) for r in rows] == [(household["ada"], "finished")]
    # The model was told where the picture is.
    tool_said = fake_llm.bodies("openai")[-1]["messages"][-1]  # type: ignore[index]
    assert f"uploads/{cid}/{name}" in str(tool_said["content"])


async def test_a_picture_past_the_storage_quota_is_not_saved(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    engines: Engines,
) -> None:
    await _setup(make_client, fake_llm, engines)
    draw = Call("generate_image", {"prompt": "a red square"})
    fake_llm.script("model-a", [[draw], Text("No room.")])
    ada = await signed_in(make_client, "ada")
    out = await _chat(ada, "Draw me a red square")
    cid = out["conversation_id"]
    # While the call waits for its approval, the member's storage fills up.
    await set_quota(runtime, "member", 1)
    ada_home = runtime.core.layout.home(household["ada"])
    ada_home.mkdir(parents=True, exist_ok=True)
    (ada_home / "filler.bin").write_bytes(b"\1" * (1024 * 1024))  # the whole MiB, on disk
    (await runtime.budget(household["ada"])).wrote(1024 * 1024)
    call_id = await _approve(ada, cid)
    await wait_idle(ada, cid)
    assert not (ada_home / "uploads" / cid / f"picture-{call_id}.png").exists()
    tool_said = fake_llm.bodies("openai")[-1]["messages"][-1]  # type: ignore[index]
    assert (
        "quota" in str(tool_said["content"]).lower()
        or "storage" in str(tool_said["content"]).lower()
    )
