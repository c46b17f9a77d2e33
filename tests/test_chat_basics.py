"""Chat basics through the conversation service and its thin routes: retry, regenerate,
edit and resend, search of the member's own conversations, the view context kept apart
from what was typed, and a picture for a model that cannot see it. Real owner databases,
the fake provider over real HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable

import pytest
from conftest import PASSWORD, Client, add_models, signed_in
from fake_llm import FakeLLM, Text

from skald.agent import ReasoningStreamed, TurnDone
from skald.core.conversations import Sent
from skald.core.events import ChatEvent
from skald.core.runtime import Runtime
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.store.conversations import ViewItem

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def _picture(runtime: Runtime, ada: str, conversation_id: str) -> None:
    folder = await runtime.conversations.attachment_folder(ada, conversation_id)
    folder.path.mkdir(parents=True, exist_ok=True)
    (folder.path / "cat.png").write_bytes(PNG)


async def _turn(runtime: Runtime, ada: str, sent: object) -> None:
    assert isinstance(sent, Sent)
    await runtime.conversations.wait(ada, sent)


async def test_regenerate_replaces_the_last_answer_and_the_model_sees_the_message_once(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["First answer.", "Second answer."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "name a river"))
    first = await svc.history(ada, conversation.id)
    await _turn(runtime, ada, await svc.resend(ada, conversation.id, first[0].seq))
    history = await svc.history(ada, conversation.id)
    assert [(i.role, i.text) for i in history] == [
        ("user", "name a river"),
        ("assistant", "Second answer."),
    ]
    # The second request carried the question once, without the dropped answer.
    asked = llm.bodies()[-1]["messages"]
    texts = json.dumps(asked)
    assert texts.count("name a river") == 1 and "First answer." not in texts


async def test_answer_again_keeps_the_earlier_answers_under_the_message_and_an_edit_drops_them(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["Rhine.", "Danube.", "Po.", "Seine."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "name a river"))
    for _ in range(2):
        seq = (await svc.history(ada, conversation.id))[0].seq
        await _turn(runtime, ada, await svc.resend(ada, conversation.id, seq))
    history = await svc.history(ada, conversation.id)
    assert [(i.role, i.text) for i in history] == [
        ("user", "name a river"),
        ("assistant", "Po."),
    ]
    assert history[0].earlier_answers == ["Rhine.", "Danube."]
    # The model never sees them: the last request had the question once, no old answer.
    texts = json.dumps(llm.bodies()[-1]["messages"])
    assert texts.count("name a river") == 1 and "Rhine." not in texts and "Danube." not in texts
    # An edit is another question: its answers start afresh.
    await _turn(runtime, ada, await svc.resend(ada, conversation.id, history[0].seq, "a sea?"))
    history = await svc.history(ada, conversation.id)
    assert [(i.text, i.earlier_answers) for i in history] == [("a sea?", []), ("Seine.", [])]


async def test_retry_after_a_failure_sends_the_same_message_again(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", [400, "Worked this time."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    sent = await svc.send(ada, conversation.id, "try me")
    assert isinstance(sent, Sent)
    assert (await svc.wait(ada, sent)).status == "failed"
    seq = (await svc.history(ada, conversation.id))[0].seq
    await _turn(runtime, ada, await svc.resend(ada, conversation.id, seq))
    assert [(i.role, i.text) for i in await svc.history(ada, conversation.id)] == [
        ("user", "try me"),
        ("assistant", "Worked this time."),
    ]


async def test_edit_and_resend_drops_the_later_messages_and_keeps_the_view_context(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    llm.script("model-a", ["A.", "B.", "C."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    view = [ViewItem("page", "Files"), ViewItem("folder", "~/recipes")]
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "one", view_context=view))
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "two"))
    first = (await svc.history(ada, conversation.id))[0]
    assert first.text == "one" and first.view == view
    await _turn(runtime, ada, await svc.resend(ada, conversation.id, first.seq, "one, edited"))
    history = await svc.history(ada, conversation.id)
    assert [(i.role, i.text) for i in history] == [("user", "one, edited"), ("assistant", "C.")]
    assert history[0].view == view
    assert "~/recipes" in json.dumps(llm.bodies()[-1])


async def test_resend_is_refused_while_a_turn_runs_and_for_an_answer_or_another_members_message(
    runtime: Runtime, ada: str, llm: FakeLLM, household: dict[str, str]
) -> None:
    llm.script("model-a", ["Done."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "hello"))
    user, answer = await svc.history(ada, conversation.id)
    with pytest.raises(NotFoundError):
        await svc.resend(ada, conversation.id, answer.seq)
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    with pytest.raises(NotFoundError):
        await svc.resend(household["mum"], conversation.id, user.seq)
    await runtime.user_runtimes[ada].hub.update(conversation.id, status="running")
    with pytest.raises(ConflictError):
        await svc.resend(ada, conversation.id, user.seq)
    # Nothing was taken back by the refused attempts.
    assert len(await svc.history(ada, conversation.id)) == 2


async def test_search_finds_titles_and_message_text_of_the_members_own_conversations_only(
    runtime: Runtime, ada: str, llm: FakeLLM, household: dict[str, str]
) -> None:
    llm.script("model-a", ["Gnocchi need floury potatoes.", "Fine."])
    svc = runtime.conversations
    recipes = await svc.create(ada, "Dinner plans")
    await _turn(runtime, ada, await svc.send(ada, recipes.id, "how do I make gnocchi?"))
    other = await svc.create(ada)
    await _turn(
        runtime,
        ada,
        await svc.send(
            ada, other.id, "hi", view_context=[ViewItem("page", "potatoes-secret-view")]
        ),
    )
    hits = await svc.search(ada, "potato")  # a prefix of the last word
    assert [(h.conversation_id, h.seq is not None) for h in hits] == [(recipes.id, True)]
    assert "potatoes" in hits[0].snippet
    assert [h.conversation_id for h in await svc.search(ada, "dinner")] == [recipes.id]
    # FTS syntax in the query is just text; the view context is not searchable text.
    assert await svc.search(ada, 'gnocchi" OR "x') == []
    assert await svc.search(ada, "potatoes-secret-view") == []
    assert await svc.search(ada, "   ") == []
    # Control characters are no words (a NUL used to end the FTS5 string: a 500).
    assert [h.conversation_id for h in await svc.search(ada, "\x00dinner\x16")] == [recipes.id]
    # Another member searches their own database only.
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    assert await svc.search(household["mum"], "gnocchi") == []
    with pytest.raises(InvalidInputError):
        await svc.search(ada, "x" * 201)


async def test_the_view_context_is_bounded_and_never_part_of_the_typed_text(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    svc = runtime.conversations
    conversation = await svc.create(ada)
    # A malformed label is refused; length is never a refusal (test_view_context.py).
    with pytest.raises(InvalidInputError, match="colon"):
        await svc.send(ada, conversation.id, "x", view_context=[ViewItem("a: b", "c")])
    assert await svc.history(ada, conversation.id) == []


async def test_a_picture_for_a_model_without_vision_sends_the_text_and_says_it_was_not_seen(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "text-only")
    fake_llm.script("text-only", ["I cannot see it."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await _picture(runtime, ada, conversation.id)
    path = f"uploads/{conversation.id}/cat.png"
    sent = await svc.send(ada, conversation.id, "what is in the picture?", [path])
    assert isinstance(sent, Sent) and sent.images_not_seen
    reply = await svc.wait(ada, sent)
    assert reply.status == "done" and reply.reply == "I cannot see it."
    body = json.dumps(fake_llm.bodies()[-1])
    assert "image_url" not in body and "cannot see pictures" in body
    first = (await svc.history(ada, conversation.id))[0]
    assert first.images_not_seen and first.text == "what is in the picture?"


async def test_a_picture_goes_to_a_vision_model_in_auto(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "text-only")
    await add_models(runtime, fake_llm, "sees", capabilities=("tools", "vision"))
    fake_llm.script("sees", ["A cat."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    await _picture(runtime, ada, conversation.id)
    sent = await svc.send(ada, conversation.id, "and now?", [f"uploads/{conversation.id}/cat.png"])
    assert isinstance(sent, Sent) and not sent.images_not_seen
    assert (await svc.wait(ada, sent)).reply == "A cat."
    assert "image_url" in json.dumps(fake_llm.bodies()[-1])
    assert not (await svc.history(ada, conversation.id))[0].images_not_seen


async def test_the_routes_resend_and_search_for_the_signed_in_member(
    household: dict[str, str],
    llm: FakeLLM,
    make_client: Callable[[], Awaitable[Client]],
) -> None:
    llm.script("model-a", ["One.", "Two."])
    client = await signed_in(make_client, "ada")
    conv = (await client.call("POST", "/api/conversations", json={"title": "Trip to Lyon"})).json()
    r = await client.call(
        "POST",
        f"/api/conversations/{conv['id']}/messages",
        json={"text": "plan it", "view_context": [{"label": "page", "value": "Files"}]},
    )
    assert r.status_code == 202
    assert r.json() == {"accepted": True, "images_not_seen": False, "videos_not_seen": False}
    for _ in range(300):
        items = (await client.call("GET", f"/api/conversations/{conv['id']}/messages")).json()
        if len(items) == 2:
            break
        await asyncio.sleep(0.02)
    assert items[0]["view"] == [{"label": "page", "value": "Files"}]
    r = await client.call(
        "POST",
        f"/api/conversations/{conv['id']}/messages/{items[0]['seq']}/resend",
        json={"text": "plan"},
    )
    assert r.status_code == 202, r.text
    r = await client.call(
        "POST", f"/api/conversations/{conv['id']}/messages/999999/resend", json={}
    )
    assert r.status_code in (404, 409)
    # Past SQLite's 64-bit integers (found by the fuzzer: an overflow answered 500).
    for seq in (2**63, 2**64 + 1, -1):
        r = await client.call(
            "POST", f"/api/conversations/{conv['id']}/messages/{seq}/resend", json={}
        )
        assert r.status_code == 404 and "no such message" in r.json()["error"]["message"]
    hits = (await client.call("GET", "/api/chat/search", params={"q": "lyon"})).json()
    assert [h["conversation_id"] for h in hits] == [conv["id"]]
    r = await client.call(
        "POST",
        f"/api/conversations/{conv['id']}/messages",
        json={"text": "x", "view_context": [{}] * 9},
    )
    assert r.status_code == 400


async def test_streamed_reasoning_reaches_every_client_but_never_the_history_or_the_model(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "thinker")
    fake_llm.script("thinker", [Text("Two.", reasoning="One plus one makes two."), Text("Fine.")])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    thoughts: list[str] = []
    async with svc.subscribe(ada) as events:
        await _turn(runtime, ada, await svc.send(ada, conversation.id, "1+1?"))
        async for event in events:
            if isinstance(event, ChatEvent) and isinstance(event.event, ReasoningStreamed):
                thoughts.append(event.event.text)
            if isinstance(event, ChatEvent) and isinstance(event.event, TurnDone):
                break
    assert "".join(thoughts) == "One plus one makes two."
    assert [(i.role, i.text) for i in await svc.history(ada, conversation.id)] == [
        ("user", "1+1?"),
        ("assistant", "Two."),
    ]
    await _turn(runtime, ada, await svc.send(ada, conversation.id, "sure?"))
    assert "One plus one" not in json.dumps(fake_llm.bodies()[-1])
