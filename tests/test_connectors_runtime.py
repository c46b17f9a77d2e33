"""Connectors at work: real MCP server processes (the official Python SDK's, in
tests/mcp_servers), started by the supervisor, called by a scripted model through a real
chat turn, gated by `@mcp:<server>` rules, stopped at once when a grant is revoked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from conftest import MakeClient, add_models, signed_in
from connector_support import (
    in_state,
    installed_for_ada,
    on_host,
    pending,
    running,
    simple_feed,
)
from fake_llm import Call, FakeLLM

from skald.agent.events import ToolOutput
from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.events import ChatEvent
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index


def _tool_results(fake: FakeLLM) -> list[str]:
    return [
        m.get("content") or ""
        for body in fake.bodies()
        for m in body["messages"]
        if m.get("role") == "tool"
    ]


async def test_a_household_connector_is_called_by_the_model_under_its_mcp_rule(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    ada = await installed_for_ada(runtime, household, simple_feed(tmp_path / "feed"), "clock")
    inst = await running(runtime, "", "clock", failed_ends=True)
    assert {s.name for s in inst.specs} >= {"mcp__clock__now", "mcp__clock__slow"}
    await add_models(runtime, fake_llm, "m")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    # Without a rule for the server the catch-all asks.
    fake_llm.script("m", [[Call("mcp__clock__now", {})]])
    sent = await svc.send(ada, conversation.id, "what time is it?")
    assert isinstance(sent, Sent)
    assert (await svc.wait(ada, sent)).status == "awaiting_approval"
    await svc.stop(ada, conversation.id)
    await asyncio.wait_for(sent.done, 10)  # the stopped turn has ended
    # With an allow rule on `@mcp:clock` the call goes through.
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:clock", None, "allow", 5, "the clock"), create=True
    )
    fake_llm.script("m", [[Call("mcp__clock__now", {})], "It is 12:34."])
    sent = await svc.send(ada, conversation.id, "and now?")
    assert isinstance(sent, Sent)
    reply = await svc.wait(ada, sent)
    assert reply.reply == "It is 12:34.", (reply, _tool_results(fake_llm))
    assert "12:34" in _tool_results(fake_llm)[-1]
    # The server's log notification during the call is recorded with the instance.
    assert any(e.kind == "log" and "the clock was read" in e.text for e in inst.events)
    # The prompt names the connector; the tool came from the server's schema.
    body = fake_llm.bodies()[-1]
    assert "## Connectors" in body["messages"][0]["content"]
    assert any(t["function"]["name"] == "mcp__clock__now" for t in body["tools"])


async def test_stop_cancels_a_running_connector_call_and_the_connector_keeps_running(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    mark = tmp_path / "cancelled"
    feed = simple_feed(tmp_path / "feed", clock={"env": {"CANCEL_MARK": str(mark)}})
    ada = await installed_for_ada(runtime, household, feed, "clock")
    inst = await running(runtime, "", "clock", failed_ends=True)
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:clock", None, "allow", 5, "the clock"), create=True
    )
    await add_models(runtime, fake_llm, "m")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake_llm.script("m", [[Call("mcp__clock__slow", {"seconds": 60})]])
    subscription = svc.subscribe(ada)
    sent = await svc.send(ada, conversation.id, "count")
    assert isinstance(sent, Sent)
    # The server's progress notifications reach every client as the call's output.
    progress = []
    async with asyncio.timeout(20):
        async for event in subscription:
            if isinstance(event, ChatEvent) and isinstance(event.event, ToolOutput):
                progress.append(event.event.chunk)
                if len(progress) == 2:
                    break
    subscription.close()
    assert progress[0].startswith("progress: 0/60") and progress[1].startswith("progress: 1/60")
    assert inst.calls, "the call never reached the connector"
    await svc.command(ada, conversation.id, "/stop")
    await asyncio.wait_for(sent.done, 10)
    assert not inst.calls
    # The server saw the cancellation (its handler was cancelled, not left running).
    for _ in range(100):
        if mark.exists():
            break
        await asyncio.sleep(0.05)
    assert mark.read_text() == "cancelled"
    assert inst.state == "running" and inst.session is not None
    await inst.session.ping()


async def test_an_elicitation_becomes_an_inbox_question_and_the_answer_returns_to_the_server(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    ada = await installed_for_ada(runtime, household, simple_feed(tmp_path / "feed"), "clock")
    await running(runtime, "", "clock", failed_ends=True)
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:clock", None, "allow", 5, "the clock"), create=True
    )
    await add_models(runtime, fake_llm, "m")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake_llm.script("m", [[Call("mcp__clock__favourite", {})], "noted"])
    sent = await svc.send(ada, conversation.id, "ask me")
    assert isinstance(sent, Sent)
    waiting = await pending(runtime, ada)
    assert len(waiting) == 1 and "favourite colour" in waiting[0].reason
    assert waiting[0].kind == "question" and waiting[0].conversation_id == conversation.id
    mine = runtime.user_runtimes[ada]
    await mine.ask.answer(waiting[0].id, "teal")
    assert (await svc.wait(ada, sent)).reply == "noted"
    assert _tool_results(fake_llm)[-1] == "favourite colour: teal"
    assert await mine.inbox.pending() == []


async def test_an_update_restarts_the_running_instance_on_the_new_version(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    feed = simple_feed(tmp_path / "feed")
    await installed_for_ada(runtime, household, feed, "clock")
    before = await running(runtime, "", "clock", failed_ends=True)
    c = service.require(runtime.server)
    sup = c.supervisor
    assert sup is not None
    write_index(feed, bump=("clock",))
    row = await c.installer.install(c.feed(), "clock", update=True)
    assert row.feed_version == 2
    await sup.restart_all("clock")
    assert before.state == "stopped" and before.session is None
    after = await running(runtime, "", "clock", failed_ends=True)
    assert after is not before and after.connector.feed_version == 2


async def test_revoking_the_grant_stops_the_members_instance_before_it_returns(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    feed = simple_feed(tmp_path / "feed", clock={"scope": "personal"})
    c = service.require(runtime.server)
    sup = c.supervisor
    assert sup is not None
    # Personal connectors run in the member's sandbox; here (no Docker in this test) the
    # instance keeps failing to start, which is enough to see it go on revocation.
    await installed_for_ada(runtime, household, feed, "clock")
    for _ in range(100):
        if (household["ada"], "clock") in sup.instances:
            break
        await asyncio.sleep(0.05)
    assert (household["ada"], "clock") in sup.instances
    await c.revoke("clock", household["ada"])
    assert (household["ada"], "clock") not in sup.instances
    mine = runtime.user_runtimes[household["ada"]]
    assert not [t for t in mine.all_tools() if t.name.startswith("mcp__")]


async def test_a_dying_connector_is_restarted_then_marked_failed_with_its_stderr(
    runtime: Runtime, household: dict[str, str], tmp_path: Path, make_client: MakeClient
) -> None:
    feed = tmp_path / "feed"
    folder = feed / "broken"
    folder.mkdir(parents=True)
    (folder / "connector.json").write_text(
        json.dumps(
            {
                "name": "broken",
                "transport": "stdio",
                "command": [
                    "python3",
                    "-c",
                    "import sys; print('boom: token=sk-hidden-42', file=sys.stderr); sys.exit(3)",
                ],
                "scope": "household",
            }
        )
    )
    write_index(feed, 1)
    c = on_host(runtime, feed, max_restarts=1)
    await installed_for_ada(runtime, household, feed, "broken")
    await in_state(runtime, "", "broken", "failed")
    row = await c.store.require("broken")
    assert row.last_error and "exited with status 3" in row.last_error
    assert row.last_stderr and "boom" in row.last_stderr
    # The card says so: administrators see the stderr lines and the events, members not.
    mum = await signed_in(make_client, "mum")
    card = (await mum.call("GET", "/api/connectors/broken")).json()
    assert card["state"] == "failed" and "boom" in card["last_stderr"]
    assert [e["kind"] for e in card["events"]][-1] == "state"
    ada = await signed_in(make_client, "ada")
    card = (await ada.call("GET", "/api/connectors/broken")).json()
    assert card["state"] == "failed"
    assert card["last_stderr"] is None and card["last_error"] is None and card["events"] == []


async def test_with_many_connectors_the_model_sees_a_short_catalogue_and_activates_tools(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    names = tuple(f"c{i:02d}" for i in range(11))
    on_host(runtime, catalogue_above=3)
    ada = await installed_for_ada(runtime, household, simple_feed(tmp_path / "feed", names), *names)
    for name in names:
        await running(runtime, "", name, failed_ends=True)
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:c07", None, "allow", 5, "c07"), create=True
    )
    await add_models(runtime, fake_llm, "m")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake_llm.script(
        "m",
        [
            [Call("activate_tools", {"connector": "c07"})],
            [Call("connector_call", {"connector": "c07", "tool": "now", "arguments": {}})],
            "done",
        ],
    )
    sent = await svc.send(ada, conversation.id, "time via c07")
    assert isinstance(sent, Sent)
    assert (await svc.wait(ada, sent)).reply == "done"
    results = _tool_results(fake_llm)
    assert "has_key" in results[-2] and "12:34" in results[-1]
    body = fake_llm.bodies()[0]
    catalogue = len(json.dumps(body["tools"])) + len(body["messages"][0]["content"])
    # The same connectors offered directly, for comparison.
    on_host(runtime, catalogue_above=100)
    fake_llm.script("m", ["ok"])
    sent = await svc.send(ada, conversation.id, "again")
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    body = fake_llm.bodies()[-1]
    direct = len(json.dumps(body["tools"])) + len(body["messages"][0]["content"])
    print(f"prompt+tools with 11 connectors: catalogue {catalogue} chars, direct {direct} chars")
    assert catalogue < direct
