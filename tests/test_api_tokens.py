"""API tokens: shown once, stored as keyed hashes, revoked at once, scoped to their
routes, never more than their member, never past an encrypted member's lock."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import threading
import time

from conftest import Client, MakeClient, add_models, member_quota, signed_in
from fake_llm import FakeLLM, Gate, Text, fake_llm_fixture  # noqa: F401
from test_chat_basics import PNG

from skald.core.runtime import Runtime
from skald.features.tokens.service import MAX_TOKENS_PER_MEMBER, TokenService


async def _token(client: Client, *scopes: str, **extra: object) -> str:
    body = {"name": "script", "scopes": list(scopes or ("chat",)), **extra}
    r = await client.call("POST", "/api/tokens", json=body)
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _as(make_client: MakeClient, token: str, method: str, path: str, **kw: object):  # type: ignore[no-untyped-def]
    anonymous = await make_client()
    return await anonymous.http.request(method, path, headers=_bearer(token), **kw)  # type: ignore[arg-type]


async def test_a_token_is_shown_once_and_listed_by_name_and_scopes_only(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    r = await ada.call(
        "POST", "/api/tokens", json={"name": "  Home   Assistant ", "scopes": ["openai", "chat"]}
    )
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    assert token.startswith("skald_") and r.json()["info"]["name"] == "Home Assistant"
    assert r.json()["info"]["scopes"] == ["chat", "openai"]
    listed = (await ada.call("GET", "/api/tokens")).json()
    assert [t["name"] for t in listed] == ["Home Assistant"]
    assert token not in str(listed) and token[len("skald_") + 13 :] not in str(listed)
    me = await _as(make_client, token, "GET", "/api/auth/me")
    assert me.status_code == 200 and me.json()["username"] == "ada"
    assert (await ada.call("GET", "/api/tokens")).json()[0]["last_used_at"] is not None


async def test_bad_token_requests_are_clear_400s(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    for body in (
        {"name": "x", "scopes": ["admin"]},
        {"name": "x", "scopes": []},
        {"name": " ", "scopes": ["chat"]},
        {"name": "x", "scopes": ["chat"], "expires_at": time.time() - 5},
    ):
        r = await ada.call("POST", "/api/tokens", json=body)
        assert r.status_code == 400, (body, r.text)


async def test_tokens_are_not_in_the_database_in_clear_nor_in_the_logs(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, logged: io.StringIO
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 200
    assert (await _as(make_client, token + "x", "GET", "/api/conversations")).status_code == 401
    # The right id with another secret of the right shape is refused too.
    forged = token[: len("skald_") + 13] + "A" * 43
    assert (await _as(make_client, forged, "GET", "/api/conversations")).status_code == 401
    secret = token[len("skald_") + 13 :]  # the secret may hold "_" itself
    folder = runtime.core.layout.database_dir
    stored = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    assert secret.encode() not in stored and token.encode() not in stored
    assert secret not in logged.getvalue()
    assert "api token created" in logged.getvalue()


async def test_a_revoked_token_is_refused_at_the_next_request(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 200
    token_id = (await ada.call("GET", "/api/tokens")).json()[0]["id"]
    assert (await ada.call("DELETE", f"/api/tokens/{token_id}")).status_code == 204
    r = await _as(make_client, token, "GET", "/api/conversations")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    # Another member cannot revoke hers (not found, as if it did not exist).
    other = await _token(ada, "chat")
    other_id = next(t["id"] for t in (await ada.call("GET", "/api/tokens")).json())
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("DELETE", f"/api/tokens/{other_id}")).status_code == 404
    assert (await _as(make_client, other, "GET", "/api/conversations")).status_code == 200


async def test_an_expired_token_is_401(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat", expires_at=time.time() + 60)
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 200
    service = runtime.server.state(TokenService)
    service.clock = lambda: time.time() + 61
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 401


async def test_a_token_reaches_only_its_scopes_routes_and_never_administration(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    chat = await _token(mum, "chat")
    everything = await _token(mum, "chat", "files:read", "files:write", "openai")
    assert (await _as(make_client, chat, "GET", "/api/conversations")).status_code == 200
    r = await _as(make_client, chat, "GET", "/api/files/dir")
    assert r.status_code == 403 and r.json()["error"]["code"] == "token_scope"
    assert (await _as(make_client, everything, "GET", "/api/files/dir")).status_code == 200
    for method, path in (
        ("GET", "/api/users"),
        ("GET", "/api/admin/tokens"),
        ("GET", "/api/llm/providers"),
        ("POST", "/api/tokens"),
        ("GET", "/api/tokens"),
        ("GET", "/api/inbox"),
        ("POST", "/api/auth/logout-all"),
        ("PATCH", "/api/auth/me"),
    ):
        r = await _as(make_client, everything, method, path, json={})
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "token_route"


async def test_a_token_needs_no_csrf_token_but_a_cookie_still_does(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    r = await _as(make_client, token, "POST", "/api/conversations", json={"title": "script"})
    assert r.status_code == 201
    # The session alone, without its CSRF header, is refused as before.
    r = await ada.http.post("/api/conversations", json={})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf"
    # A cookie with a broken Authorization header is not a way around anything.
    r = await ada.http.post("/api/conversations", json={}, headers={"Authorization": "Basic eA=="})
    assert r.status_code == 401


async def test_an_encrypted_member_signed_out_gets_423_until_she_opts_in(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    assert (await ada.call("POST", "/api/auth/logout")).status_code == 204
    r = await _as(make_client, token, "GET", "/api/conversations")
    assert r.status_code == 423
    assert r.json()["error"]["message"].startswith("sign in on the web first")
    ada = await signed_in(make_client, "ada")
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 200
    r = await ada.call("PUT", "/api/schedule/keep-key", json={"enabled": True})
    assert r.status_code == 200, r.text
    assert (await ada.call("POST", "/api/auth/logout")).status_code == 204
    assert (await _as(make_client, token, "GET", "/api/conversations")).status_code == 200


async def test_each_token_has_its_own_rate_limit(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    first, second = await _token(ada, "chat"), await _token(ada, "chat")
    runtime.server.state(TokenService).limits.per_minute = 3
    codes = [
        (await _as(make_client, first, "GET", "/api/conversations")).status_code for _ in range(4)
    ]
    assert codes == [200, 200, 200, 429]
    r = await _as(make_client, first, "GET", "/api/conversations")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert (await _as(make_client, second, "GET", "/api/conversations")).status_code == 200
    # Under `/v1` the same refusal is OpenAI's rate limit (retried after `Retry-After`).
    third = await _token(ada, "openai")
    codes = [(await _as(make_client, third, "GET", "/v1/models")).status_code for _ in range(3)]
    r = await _as(make_client, third, "GET", "/v1/models")
    assert codes == [200, 200, 200] and r.status_code == 429, r.text
    assert r.json()["error"]["type"] == "rate_limit_exceeded", r.text
    assert int(r.headers["retry-after"]) >= 1 and "x-should-retry" not in r.headers


async def test_parallel_requests_cannot_take_a_member_past_fifty_tokens(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    body = {"name": "script", "scopes": ["chat"]}
    answers = await asyncio.gather(
        *(ada.call("POST", "/api/tokens", json=body) for _ in range(MAX_TOKENS_PER_MEMBER + 10))
    )
    assert sorted(r.status_code for r in answers) == [201] * MAX_TOKENS_PER_MEMBER + [400] * 10
    refused = next(r for r in answers if r.status_code == 400)
    assert "revoke one you no longer use" in refused.json()["error"]["message"]
    assert len((await ada.call("GET", "/api/tokens")).json()) == MAX_TOKENS_PER_MEMBER


async def test_administrators_see_counts_per_member_never_tokens(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    await _token(ada, "openai")
    mum = await signed_in(make_client, "mum")
    r = await mum.call("GET", "/api/admin/tokens")
    assert r.json() == [{"user_id": household["ada"], "username": "ada", "tokens": 2}]
    assert token not in r.text and "script" not in r.text
    assert (await mum.call("GET", "/api/tokens")).json() == []
    assert (await ada.call("GET", "/api/admin/tokens")).status_code == 403


async def test_a_picture_in_an_openai_message_reaches_a_vision_model_as_in_the_web_chat(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "sees", capabilities=("tools", "vision"))
    fake_llm.script("sees", ["A tiny picture."])
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "openai")
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    body = {
        "model": "skald",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
    }
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "A tiny picture."
    assert "image_url" in json.dumps(fake_llm.bodies()[-1])
    cid = r.headers["x-skald-conversation-id"]
    [first] = [
        i
        for i in (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
        if i["role"] == "user"
    ]
    assert first["text"] == "What is this?" and first["attachments"][0]["mime"] == "image/png"
    # A link instead of data is refused (Skald fetches nothing for a client).
    body["messages"][0]["content"][1]["image_url"]["url"] = "http://127.0.0.1:1/cat.png"  # type: ignore[index]
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


async def test_pictures_sent_through_v1_count_against_the_quota_and_a_request_past_it_keeps_none(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "sees", capabilities=("tools", "vision"))
    fake_llm.script("sees", ["Seen."])
    mum = await signed_in(make_client, "mum")
    await member_quota(mum, 1)
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "openai")

    def asking(*sizes: int) -> dict[str, object]:
        parts: list[dict[str, object]] = [{"type": "text", "text": "Look."}]
        for size in sizes:
            data = PNG + os.urandom(size)
            url = "data:image/png;base64," + base64.b64encode(data).decode()
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return {"model": "skald", "messages": [{"role": "user", "content": parts}]}

    uploads = runtime.core.layout.home(household["ada"]) / "uploads"
    # Two that would not fit together: refused whole (OpenAI's `insufficient_quota`, 429),
    # nothing written.
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=asking(600_000, 600_000))
    assert r.status_code == 429 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert list(uploads.rglob("image-*")) == []
    # One fits and is kept, and counted at once: the next one no longer fits.
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=asking(700_000))
    assert r.status_code == 200, r.text
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=asking(700_000))
    assert r.status_code == 429 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert len(list(uploads.rglob("image-*"))) == 1


def _events(body: str) -> list[tuple[str, dict[str, object]]]:
    """The server-sent events of a `/api/chat/stream` answer, in order."""
    out = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_a_failed_streamed_turn_says_its_error_code_like_post_api_chat(
    household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat", "openai")
    # The provider refuses the key: the `done` event names the kind, as `/api/chat` does.
    llm.script("model-a", [401])
    r = await _as(make_client, token, "POST", "/api/chat/stream", json={"text": "hello"})
    assert r.status_code == 200, r.text
    name, done = _events(r.text)[-1]
    assert name == "done" and done["status"] == "failed", done
    assert done["error_code"] == "auth" and done["error"], done
    assert "401" not in str(done["error"]) and done["error_detail"] is None
    # On `/v1` the model service's failure is a 502 (the gateway's upstream failed).
    llm.script("model-a", [401])
    body = {"model": "skald", "messages": [{"role": "user", "content": "x"}]}
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=body)
    assert r.status_code == 502 and r.json()["error"]["type"] == "server_error", r.text
    assert r.json()["error"]["code"] == "auth" and "x-should-retry" not in r.headers
    # A refusal of the one error tree (a spending cap: `LimitReachedError`) keeps its code.
    mum = await signed_in(make_client, "mum")
    r = await mum.call("PUT", f"/api/usage/caps/user/{household['ada']}", json={"turns_day": 1})
    assert r.status_code == 200, r.text
    r = await _as(make_client, token, "POST", "/api/chat/stream", json={"text": "again"})
    name, done = _events(r.text)[-1]
    assert done["status"] == "failed" and done["error_code"] == "limit_reached", done
    assert "resets at midnight" in str(done["error"])
    # `/v1` says the same code in OpenAI's error shape.
    # A cap is OpenAI's "insufficient_quota" 429, which no retry can mend before the reset.
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json=body)
    assert r.status_code == 429 and r.json()["error"]["code"] == "limit_reached", r.text
    assert r.json()["error"]["type"] == "insufficient_quota"
    assert r.headers["x-should-retry"] == "false"
    r = await _as(make_client, token, "POST", "/v1/chat/completions", json={**body, "stream": True})
    error = json.loads(r.text.strip().split("\n\n")[-1].removeprefix("data: "))
    assert error["error"]["code"] == "limit_reached", r.text
    assert error["error"]["type"] == "insufficient_quota", r.text


async def test_a_revoked_token_ends_its_open_chat_stream_and_is_401_next(
    household: dict[str, str], make_client: MakeClient, llm: FakeLLM
) -> None:
    ada = await signed_in(make_client, "ada")
    token = await _token(ada, "chat")
    token_id = (await ada.call("GET", "/api/tokens")).json()[0]["id"]
    # The model holds its answer: a silent turn, no event for the stream to end on.
    held = threading.Event()
    llm.script("model-a", [Gate(held, Text("Far too late."))])
    body = {"text": "Think it over"}
    streaming = asyncio.ensure_future(
        _as(make_client, token, "POST", "/api/chat/stream", json=body)
    )
    try:
        deadline = time.monotonic() + 10
        while llm.remaining("model-a"):  # the turn has reached the model
            assert time.monotonic() < deadline and not streaming.done()
            await asyncio.sleep(0.05)
        assert (await ada.call("DELETE", f"/api/tokens/{token_id}")).status_code == 204
        revoked = time.monotonic()
        r = await asyncio.wait_for(streaming, 10)
        assert time.monotonic() - revoked < 5
    finally:
        held.set()
    assert r.status_code == 200, r.text
    name, done = _events(r.text)[-1]
    assert name == "done" and done["status"] == "failed", done
    assert done["error_code"] == "unauthenticated" and "revoked" in str(done["error"]), done
    r = await _as(make_client, token, "POST", "/api/chat/stream", json={"text": "again"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", r.text
