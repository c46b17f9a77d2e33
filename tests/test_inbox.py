"""The Inbox: durable approval requests, decided from any client, with bypasses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from conftest import Client, MakeClient, admin_adds_models, post_chat, signed_in, wait_idle
from fake_llm import Call, FakeLLM, Text

from skald.core.runtime import Runtime


def _write(name: str) -> Call:
    return Call("write_file", {"path": f"shared-memory/{name}.md", "content": f"# {name}"})


async def _to_the_worker(
    make_client: MakeClient, fake: FakeLLM, task: str, step: Call, *said: str
) -> None:
    """The admin adds model-a, which hands `task` to the worker helper: the helper's
    first round is `step`, then each answer `said` (the helper's, then the parent's)."""
    await admin_adds_models(make_client, fake, [("model-a", "openai")])
    calls = [Call("execute_task", {"task": task, "agent": "worker"})]
    fake.script("model-a", [calls, [step], *(Text(s) for s in said)])


async def _settled(member: Client, cid: str) -> list[dict[str, Any]]:
    """The conversation's items once its turn is over and nothing of it is left in the
    member's Inbox."""
    await wait_idle(member, cid)
    assert await _inbox(member) == []
    items: list[dict[str, Any]] = (
        await member.call("GET", f"/api/conversations/{cid}/messages")
    ).json()
    return items


async def _inbox(client: Client) -> list[dict[str, Any]]:
    r = await client.call("GET", "/api/inbox")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()
    return items


async def _until_inbox(client: Client, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(10):
        while True:
            items = await _inbox(client)
            if len(items) == count:
                return items
            await asyncio.sleep(0.05)


async def test_inbox_lists_decides_and_hides_from_others(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a", [[_write("wifi")], Text("Not saved."), [_write("bins")], Text("Saved.")]
    )
    ada = await signed_in(make_client, "ada")
    assert await _inbox(ada) == []

    out = await post_chat(ada, "save the wifi note")
    assert out["status"] == "awaiting_approval"
    cid = out["conversation_id"]
    [item] = await _until_inbox(ada, 1)
    assert item["kind"] == "approval"
    assert item["conversation_id"] == cid
    assert item["conversation_title"]
    assert item["tool"] == "write_file"
    assert item["arguments"]["path"] == "shared-memory/wifi.md"
    assert item["reason"] == "writing to the household's shared memory"
    assert item["choices"] is None and item["created_at"]
    assert item["preview"].startswith("--- shared-memory/wifi.md\n+++ shared-memory/wifi.md\n")
    assert "+# wifi\n" in item["preview"]

    mum = await signed_in(make_client, "mum")
    assert await _inbox(mum) == []
    for verb in ("approve", "reject"):
        r = await mum.call("POST", f"/api/inbox/{item['id']}/{verb}", json={})
        assert r.status_code == 404
    r = await ada.call("POST", f"/api/inbox/{item['id']}/answer", json={"answer": "yes"})
    assert r.status_code == 400

    r = await ada.call("POST", f"/api/inbox/{item['id']}/reject")
    assert r.status_code == 204
    assert (await _settled(ada, cid))[-1]["text"] == "Not saved."
    assert [n.path for n in await runtime.shared_memory.note_list()] == []
    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve", json={})
    assert r.status_code == 404  # decided already

    out = await post_chat(ada, "save the bins note", cid)
    [item] = await _until_inbox(ada, 1)
    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve")
    assert r.status_code == 204
    await wait_idle(ada, cid)
    assert await _inbox(ada) == []
    assert "bins" in await runtime.shared_memory.note_get("bins.md")


async def _approved_with_bypass(make_client: MakeClient, bypass: str) -> tuple[Client, str]:
    """ada asks to save a note and approves the request with `bypass`; her client and
    the conversation, its turn over."""
    ada = await signed_in(make_client, "ada")
    cid = (await post_chat(ada, "save a"))["conversation_id"]
    [item] = await _until_inbox(ada, 1)
    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve", json={"bypass": bypass})
    assert r.status_code == 204
    await wait_idle(ada, cid)
    return ada, cid


async def test_bypass_for_the_conversation_covers_that_tool_only(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    edit = Call("edit_file", {"path": "shared-memory/a.md", "old_text": "# a", "new_text": "# A"})
    fake_llm.script(
        "model-a",
        [[_write("a")], Text("one"), [_write("b")], Text("two"), [edit], Text("three")],
    )
    ada, cid = await _approved_with_bypass(make_client, "conversation")
    # the same tool in the same conversation runs without asking
    out = await post_chat(ada, "save b", cid)
    assert out["status"] == "done" and out["reply"] == "two"
    assert "b" in await runtime.shared_memory.note_get("b.md")
    # another tool still asks
    out = await post_chat(ada, "edit a", cid)
    assert out["status"] == "awaiting_approval"
    [item] = await _until_inbox(ada, 1)
    assert item["tool"] == "edit_file"
    assert "-# a\n+# A\n" in item["preview"]
    # and so does the same tool in another conversation
    r = await ada.call("POST", f"/api/inbox/{item['id']}/reject")
    assert r.status_code == 204


async def test_bypass_for_fifteen_minutes_is_kept_in_the_gate(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [[_write("a")], Text("one"), [_write("b")], Text("two")])
    ada, cid = await _approved_with_bypass(make_client, "15m")
    mine = runtime.user_runtimes[household["ada"]]
    assert await mine.gate.bypassing(cid, "write_file")
    assert not await mine.gate.bypassing(cid, "edit_file")
    assert not await mine.gate.bypassing("other", "write_file")
    out = await post_chat(ada, "save b", cid)
    assert out["status"] == "done"


async def test_ask_user_becomes_a_question_and_the_answer_is_the_result(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    ask = Call("ask_user", {"question": "Which day for bread?", "choices": ["Sat", "Sun"]})
    fake_llm.script("model-a", [[ask], Text("Sunday it is.")])
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={"title": "Bread"})).json()["id"]
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "plan"})
    assert r.status_code == 202
    [item] = await _until_inbox(ada, 1)
    assert item["kind"] == "question" and item["tool"] == "ask_user"
    assert item["reason"] == "Which day for bread?" and item["choices"] == ["Sat", "Sun"]
    assert item["conversation_title"] == "Bread"

    mum = await signed_in(make_client, "mum")
    r = await mum.call("POST", f"/api/inbox/{item['id']}/answer", json={"answer": "Sat"})
    assert r.status_code == 404
    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve", json={})
    assert r.status_code == 404  # a question is answered, not approved
    r = await ada.call("POST", f"/api/inbox/{item['id']}/answer", json={"answer": "Sun"})
    assert r.status_code == 204
    assert (await _settled(ada, cid))[-1]["text"] == "Sunday it is."
    tool_msgs = [m for m in fake_llm.bodies("openai")[-1]["messages"] if m["role"] == "tool"]
    assert "The user answered: Sun" in str(tool_msgs[0]["content"])


async def test_inbox_changed_is_published_with_the_count(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    monkeypatch: Any,
) -> None:
    from skald.core.events import InboxChanged

    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [[_write("a")], Text("done")])
    seen: list[tuple[str, int]] = []
    publish = runtime.events.publish

    def record(user_id: str, event: Any) -> None:
        if isinstance(event, InboxChanged):
            seen.append((user_id, event.count))
        publish(user_id, event)

    monkeypatch.setattr(runtime.events, "publish", record)
    ada = await signed_in(make_client, "ada")
    cid = (await post_chat(ada, "save a"))["conversation_id"]
    [item] = await _until_inbox(ada, 1)
    await _until(lambda: bool(seen))  # the row is written a moment before the event
    assert seen == [(household["ada"], 1)]
    assert (await ada.call("POST", f"/api/inbox/{item['id']}/approve")).status_code == 204
    await wait_idle(ada, cid)
    await _until(lambda: seen[-1][1] == 0)
    assert seen[-1] == (household["ada"], 0)


async def _until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.02)


async def test_a_helpers_approval_reaches_the_inbox_and_answering_it_finishes_both_turns(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    from skald.agent import ApprovalRequested
    from skald.core.events import ChatEvent

    step = _write("wifi")  # the helper's first round asks for an approval
    said = ("Saved the note.", "The helper saved it.")
    await _to_the_worker(make_client, fake_llm, "save the wifi note", step, *said)
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={"title": "Wifi"})).json()["id"]
    seen: list[Any] = []
    conn = runtime.events.connect(household["ada"], "test-tab")
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "save it"})
    assert r.status_code == 202
    [item] = await _until_inbox(ada, 1)
    # The item belongs to the conversation on screen, under the card of the helper's call.
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    parent = items[1]["tool_calls"][0]
    assert parent["name"] == "execute_task" and parent["status"] == "running"
    assert item["conversation_id"] == cid and item["conversation_title"] == "Wifi"
    assert item["parent_call_id"] == parent["id"]
    assert item["tool"] == "write_file" and item["kind"] == "approval"
    assert item["reason"] == "writing to the household's shared memory"
    assert "+# wifi\n" in (item["preview"] or "")
    # The chat heard it live, and the conversation shows it is waiting.
    while not conn.queue.empty():
        seen.append(conn.queue.get_nowait())
    requested = [
        e.event for e in seen if isinstance(e, ChatEvent) and isinstance(e.event, ApprovalRequested)
    ]
    assert [(e.call_id, e.depth) for e in requested] == [(item["id"], 1)]
    runtime.events.disconnect(conn)
    convs = {c["id"]: c for c in (await ada.call("GET", "/api/conversations")).json()}
    assert convs[cid]["status"] == "awaiting_approval"
    # Another member sees nothing and can decide nothing.
    mum = await signed_in(make_client, "mum")
    assert await _inbox(mum) == []
    assert (await mum.call("POST", f"/api/inbox/{item['id']}/approve")).status_code == 404

    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve")
    assert r.status_code == 204
    items = await _settled(ada, cid)
    assert "wifi" in await runtime.shared_memory.note_get("wifi.md")
    assert items[-1]["text"] == "The helper saved it."
    assert items[1]["tool_calls"][0]["status"] == "done"


async def test_a_helpers_question_reaches_the_inbox_and_the_answer_reaches_the_helper(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    step = Call("ask_user", {"question": "Rye or spelt?", "choices": ["rye", "spelt"]})
    said = ("Spelt it is.", "The helper chose spelt.")
    await _to_the_worker(make_client, fake_llm, "plan the bread", step, *said)
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={"title": "Bread"})).json()["id"]
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "plan"})
    assert r.status_code == 202
    [item] = await _until_inbox(ada, 1)
    parent = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()[1]
    assert item["kind"] == "question" and item["conversation_id"] == cid
    assert item["parent_call_id"] == parent["tool_calls"][0]["id"]
    r = await ada.call("POST", f"/api/inbox/{item['id']}/answer", json={"answer": "spelt"})
    assert r.status_code == 204
    assert (await _settled(ada, cid))[-1]["text"] == "The helper chose spelt."
    helper_round = fake_llm.bodies("openai")[2]["messages"]
    assert "The user answered: spelt" in str(helper_round[-1]["content"])


async def test_rejecting_a_helpers_request_tells_the_helper_and_the_turn_ends(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    step = _write("bins")
    said = ("I was not allowed to save it.", "The helper could not save it.")
    await _to_the_worker(make_client, fake_llm, "save the bins note", step, *said)
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "save the bins note")
    assert out["status"] == "awaiting_approval"  # the helper's request ends the wait
    cid = out["conversation_id"]
    [item] = await _until_inbox(ada, 1)
    r = await ada.call("POST", f"/api/approvals/{item['id']}", json={"decision": "reject"})
    assert r.status_code == 204
    assert (await _settled(ada, cid))[-1]["text"] == "The helper could not save it."
    assert [n.path for n in await runtime.shared_memory.note_list()] == []
    helper_round = fake_llm.bodies("openai")[2]["messages"]
    assert "declined" in str(helper_round[-1]["content"])
