"""`/v1` with the official `openai` package as the client, against a running server:
models, plain and streamed answers (usage last, then `[DONE]`), follow-ups by name and
by whole history without duplicates, approvals that wait in the Inbox, client tools
refused, Skald's own tool calls as SSE comments, revocation ending an open stream,
errors in OpenAI's shape with OpenAI's statuses (a spending cap is a `RateLimitError`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household

PW = "ada's long password"
MODEL = "m"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[ServerProcess]:
    # Bea is the member whose spending cap is reached (the others go on undisturbed).
    with household(tmp_path_factory.mktemp("v1"), ("ada", PW), ("bea", PW)) as server:
        admin = Api(server.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_openai, MODEL)
        yield server


@pytest.fixture(scope="module")
def ada(srv: ServerProcess) -> Api:
    api = Api(srv.url)
    api.login("ada", PW)  # her data is unlocked while a session lives
    return api


def token_for(api: Api, *scopes: str) -> str:
    r = api.post("/api/tokens", json={"name": "phone", "scopes": list(scopes or ("openai",))})
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


def client(srv: ServerProcess, token: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=srv.url + "/v1", api_key=token, max_retries=0, default_headers=headers
    )


def user_texts(api: Api, cid: str) -> list[str]:
    items = api.get(f"/api/conversations/{cid}/messages").json()
    return [i["text"] for i in items if i["role"] == "user"]


def conversation_with(api: Api, text: str) -> str:
    """The one conversation holding a user message `text`."""
    found = [
        c["id"] for c in api.get("/api/conversations").json() if text in user_texts(api, c["id"])
    ]
    assert len(found) == 1, found
    return found[0]


def test_the_models_are_skald_and_the_members_own_assistant(srv: ServerProcess, ada: Api) -> None:
    models = client(srv, token_for(ada)).models.list()
    assert [m.id for m in models.data] == ["skald", "assistant"]


def test_a_plain_completion_is_a_turn_of_skald(srv: ServerProcess, ada: Api, fake: FakeLLM) -> None:
    fake.script(MODEL, [Text("Hello from Skald.", input_tokens=30, output_tokens=4)])
    answer = client(srv, token_for(ada)).chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "Hi there"}]
    )
    assert answer.choices[0].message.content == "Hello from Skald."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.prompt_tokens == 30
    assert answer.usage.total_tokens == 34
    assert user_texts(ada, conversation_with(ada, "Hi there")) == ["Hi there"]


def test_a_streamed_completion_sends_deltas_then_usage_then_done(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    fake.script(MODEL, [Text("Streaming works fine.", input_tokens=20, output_tokens=5)])
    stream = client(srv, token_for(ada)).chat.completions.create(
        model="skald",
        messages=[{"role": "user", "content": "Stream please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Streaming works fine."
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    # On the wire: `data:` lines, the last one `[DONE]`.
    fake.script(MODEL, [Text("Again.")])
    with httpx.stream(
        "POST",
        srv.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {token_for(ada)}"},
        json={"model": "skald", "messages": [{"role": "user", "content": "x"}], "stream": True},
        timeout=30,
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and all(line.startswith(("data: ", ":")) for line in lines)


def _content(line: str) -> str:
    """The answer's text a streamed `data:` line carries ("" for anything else)."""
    if not line.startswith("data: {"):
        return ""
    choices = json.loads(line.removeprefix("data: "))["choices"]
    return str(choices[0]["delta"].get("content") or "") if choices else ""


def test_skalds_own_tool_calls_stream_as_comments_before_the_answer(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    write = Call("write_file", {"path": "progress.md", "content": "# Progress\nSo far so good."})
    fake.script(MODEL, [[write], Text("I wrote progress.md for you.")])
    with httpx.stream(
        "POST",
        srv.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {token_for(ada)}"},
        json={
            "model": "skald",
            "messages": [{"role": "user", "content": "Note it"}],
            "stream": True,
        },
        timeout=30,
    ) as r:
        lines = [line for line in r.iter_lines() if line]
    notes = [i for i, line in enumerate(lines) if line.startswith(":") and "write_file" in line]
    said = [i for i, line in enumerate(lines) if _content(line)]
    assert notes and said and notes[-1] < said[0], lines
    assert lines[notes[-1]] == ": skald tool write_file: done", lines
    assert "".join(_content(line) for line in lines) == "I wrote progress.md for you."
    assert lines[-1] == "data: [DONE]"
    # The official client skips the comments and reads the answer alone.
    fake.script(MODEL, [[write], Text("I wrote progress.md again.")])
    stream = client(srv, token_for(ada)).chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "Note it again"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "I wrote progress.md again."


def test_a_spending_cap_is_openais_rate_limit_error_429(srv: ServerProcess, fake: FakeLLM) -> None:
    bea = Api(srv.url)
    me = bea.login("bea", PW)
    app = client(srv, token_for(bea))  # max_retries=0: the client retries a 429 by default
    fake.script(MODEL, [Text("One answer today.")])
    ask = {"model": "skald", "messages": [{"role": "user", "content": "One more?"}]}
    assert app.chat.completions.create(**ask).choices[0].message.content == "One answer today."
    admin = Api(srv.url)
    admin.login(ADMIN, ADMIN_PW)
    r = admin.request("PUT", f"/api/usage/caps/user/{me['id']}", json={"turns_day": 1})
    assert r.status_code == 200, r.text
    with pytest.raises(openai.RateLimitError) as caught:
        app.chat.completions.create(**ask)
    assert caught.value.status_code == 429
    assert caught.value.body["type"] == "insufficient_quota"  # type: ignore[index]
    assert caught.value.body["code"] == "limit_reached"  # type: ignore[index]
    assert "resets at midnight" in caught.value.message
    # A retry cannot mend it before the reset: the client is told not to try again.
    assert caught.value.response.headers["x-should-retry"] == "false"
    # Streamed, the turn fails after the 200 has begun: the error line says the same.
    with pytest.raises(openai.APIError) as streamed:
        list(app.chat.completions.create(**ask, stream=True))
    assert streamed.value.body["type"] == "insufficient_quota"  # type: ignore[index]


def test_a_named_conversation_keeps_the_context_of_a_voice_follow_up(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    voice = client(srv, token_for(ada), **{"X-Skald-Conversation": "kitchen"})
    fake.script(MODEL, [Text("Noted, Ada."), Text("Your name is Ada.")])
    voice.chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "My name is Ada"}]
    )
    voice.chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "What is my name?"}]
    )
    cid = conversation_with(ada, "My name is Ada")
    assert user_texts(ada, cid) == ["My name is Ada", "What is my name?"]
    sent = fake.bodies("openai")[-1]["messages"]
    assert any("My name is Ada" in str(m.get("content")) for m in sent)


def test_a_client_resending_the_whole_history_adds_nothing_twice(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    app = client(srv, token_for(ada))
    fake.script(MODEL, [Text("Paris."), Text("About two million.")])
    history: list[Any] = [{"role": "system", "content": "Be brief."}]
    history.append({"role": "user", "content": "Capital of France?"})
    first = app.chat.completions.create(model="skald", messages=history)
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "How many people live there?"},
    ]
    app.chat.completions.create(model="skald", messages=history)
    cid = conversation_with(ada, "Capital of France?")
    assert user_texts(ada, cid) == ["Capital of France?", "How many people live there?"]


def test_client_tools_are_refused_with_400(srv: ServerProcess, ada: Api) -> None:
    tool = {"type": "function", "function": {"name": "lights", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        client(srv, token_for(ada)).chat.completions.create(
            model="skald", messages=[{"role": "user", "content": "Lights on"}], tools=[tool]
        )
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == "tools"  # type: ignore[index]
    assert (
        "tools run inside skald" in caught.value.message.lower()
        or "Skald runs" in caught.value.message
    )


def test_an_approval_waits_in_the_inbox_and_the_next_request_gets_the_result(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    voice = client(srv, token_for(ada), **{"X-Skald-Conversation": "notes"})
    write = Call("write_file", {"path": "shared-memory/bins.md", "content": "# Bins\nTuesday."})
    fake.script(MODEL, [[write], Text("Saved the bin day for everyone."), Text("Anything else?")])
    first = voice.chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "Note the bin day for all"}]
    )
    content = first.choices[0].message.content or ""
    assert "Inbox" in content and srv.url + "/#/inbox" in content
    [pending] = ada.get("/api/inbox").json()
    assert ada.post(f"/api/inbox/{pending['id']}/approve", json={}).status_code == 204
    cid = conversation_with(ada, "Note the bin day for all")
    deadline = time.monotonic() + 20
    while ada.get(f"/api/conversations/{cid}/messages").json()[-1]["text"] != (
        "Saved the bin day for everyone."
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    second = voice.chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "Done?"}]
    )
    assert (second.choices[0].message.content or "").startswith("Saved the bin day for everyone.")


def test_errors_are_in_openai_shape_with_the_right_status(srv: ServerProcess, ada: Api) -> None:
    # The auth middleware's refusals too (the app's own handlers must not answer them).
    with pytest.raises(openai.AuthenticationError) as denied:
        client(srv, "skald_000000000000_" + "x" * 43).models.list()
    assert denied.value.body["type"] == "authentication_error"  # type: ignore[index]
    assert denied.value.body["code"] == "unauthenticated"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError) as caught:
        client(srv, token_for(ada)).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.PermissionDeniedError) as refused:  # a chat-only token
        client(srv, token_for(ada, "chat")).models.list()
    assert refused.value.body["code"] == "token_scope"  # type: ignore[index]
    assert refused.value.body["type"] == "permission_error"  # type: ignore[index]
    r = httpx.post(
        srv.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {token_for(ada)}"},
        content=b"{not json",
    )
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_a_revoked_token_ends_its_open_stream_and_is_401_next(
    srv: ServerProcess, ada: Api, fake: FakeLLM
) -> None:
    token = token_for(ada)
    token_id = next(t["id"] for t in ada.get("/api/tokens").json() if t["id"] in token)
    fake.script(MODEL, [Text("slow " * 200, chunk_size=5, chunk_delay=0.05)])
    stream = client(srv, token).chat.completions.create(
        model="skald", messages=[{"role": "user", "content": "Tell me a long story"}], stream=True
    )
    got: list[str] = []
    revoked = threading.Event()
    with pytest.raises(openai.APIError, match="revoked"):
        for c in stream:
            got.append(c.choices[0].delta.content or "" if c.choices else "")
            if len(got) == 3 and not revoked.is_set():
                assert ada.delete(f"/api/tokens/{token_id}").status_code == 204
                revoked.set()
    assert revoked.is_set() and len("".join(got)) < len("slow " * 200)
    with pytest.raises(openai.AuthenticationError):
        client(srv, token).models.list()
