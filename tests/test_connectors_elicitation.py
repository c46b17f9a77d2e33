"""A household connector's question reaches the member whose call asked it, or nobody.

Two members call one household connector (a real SDK server, `clock_server.py`) at the
same time, in both orders; one call elicits. Over streamable HTTP the elicitation
arrives on the POST stream of the call that caused it, so it goes to that member's
Inbox under that call. Over stdio nothing tells which call asked: with calls of two
members in flight it is declined (nobody is asked); with one member's calls it is theirs.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import PASSWORD, add_models
from connector_support import SERVERS, on_host, running, simple_feed
from fake_llm import Call, FakeLLM
from mcp_support import free_port, python_server, wait_listening
from test_connectors_runtime import _tool_results

from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.core.user_runtime import UserRuntime
from skald.features.connectors.supervisor import ConnectorInstance
from skald.store.inbox import InboxItem

Wire = Literal["stdio", "http"]


@dataclass
class Turn:
    conversation_id: str
    sent: Sent

    async def done(self) -> None:
        await asyncio.wait_for(self.sent.done, 20)


@dataclass
class Household:
    runtime: Runtime
    fake: FakeLLM
    inst: ConnectorInstance
    ada: UserRuntime
    mum: UserRuntime
    tmp: Path

    async def start(self, who: UserRuntime, tool: str, gate: str) -> Turn:
        """`who` has the model call `tool(gate)` in a new conversation; returns once the
        call is in flight at the connector."""
        svc = self.runtime.conversations
        conversation = await svc.create(who.user.id)
        self.fake.script("m", [[Call(f"mcp__clock__{tool}", {"gate": str(self.tmp / gate)})]])
        before = len(self.inst.calls)
        sent = await svc.send(who.user.id, conversation.id, f"{tool} please")
        assert isinstance(sent, Sent)
        for _ in range(400):
            if len(self.inst.calls) > before:
                return Turn(conversation.id, sent)
            await asyncio.sleep(0.02)
        raise AssertionError("the call never reached the connector")

    def replies(self, n: int) -> None:
        """The model's last word in `n` turns, scripted once all their calls are in flight
        (replies are taken in request order, whoever asks)."""
        self.fake.script("m", ["done"] * n)

    def results(self) -> list[str]:
        return _tool_results(self.fake)

    def open(self, gate: str) -> None:
        (self.tmp / gate).write_text("go")

    async def ask_while_one_holds(
        self, holder: UserRuntime, *, asker_first: bool = False
    ) -> tuple[Turn, Turn, dict[str, list[InboxItem]]]:
        """ada's call asks while `holder`'s call is held in flight (started in the given
        order); returns the holding turn, the asking turn and who was asked."""
        if asker_first:
            asking = await self.start(self.ada, "ask_when", "ask")
            holding = await self.start(holder, "hold", "release")
        else:
            holding = await self.start(holder, "hold", "release")
            asking = await self.start(self.ada, "ask_when", "ask")
        self.replies(2)
        self.open("ask")
        return holding, asking, await self.asked_or_done(asking)

    async def asked_or_done(self, turn: Turn) -> dict[str, list[InboxItem]]:
        """Wait until someone is asked or the call ends; then who was asked."""
        for _ in range(600):
            asked = {m.user.username: await m.inbox.pending() for m in (self.ada, self.mum)}
            if turn.sent.done.done() or any(asked.values()):
                return asked
            await asyncio.sleep(0.05)
        raise AssertionError("nobody was asked and the call did not end")


def _http_server(port: int) -> subprocess.Popen[bytes]:
    return python_server(SERVERS / "clock_server.py", "http", str(port))


@pytest.fixture(params=["stdio", "http"])
async def home(
    request: pytest.FixtureRequest,
    runtime: Runtime,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> AsyncIterator[Household]:
    wire: Wire = request.param
    extra: dict[str, Any] = {}
    proc = None
    if wire == "http":
        port = free_port()
        proc = _http_server(port)
        wait_listening(port, proc)
        extra = {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    try:
        feed = simple_feed(tmp_path / "feed", clock=extra)
        c = on_host(runtime, feed)
        await c.installer.install(c.feed(), "clock")
        for name in ("ada", "mum"):
            await c.store.set_active("clock", household[name], True)
            await runtime.attach(await runtime.core.users.unlock(name, PASSWORD))
        inst = await running(runtime, "", "clock")
        await runtime.core.registry.save_rule(
            Rule(0, "default", "@mcp:clock", None, "allow", 5, "the clock"), create=True
        )
        await add_models(runtime, fake_llm, "m")
        yield Household(
            runtime,
            fake_llm,
            inst,
            runtime.user_runtimes[household["ada"]],
            runtime.user_runtimes[household["mum"]],
            tmp_path,
        )
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("asker_first", [True, False], ids=["asker-first", "asker-last"])
async def test_a_members_question_never_reaches_another_member_during_overlapping_calls(
    home: Household, request: pytest.FixtureRequest, asker_first: bool
) -> None:
    wire = request.node.callspec.params["home"]
    holding, asking, asked = await home.ask_while_one_holds(home.mum, asker_first=asker_first)
    # The other member is never asked, whatever the order and the transport.
    assert asked["mum"] == []
    if wire == "http":
        # The call's own stream says whose it is: ada is asked, under her call.
        [item] = asked["ada"]
        assert item.kind == "question" and "favourite colour" in item.reason
        assert item.conversation_id == asking.conversation_id
        await home.ada.ask.answer(item.id, "teal")
        await asking.done()
        assert "favourite colour: teal" in home.results()
    else:
        # stdio with two members' calls in flight: nobody can be sure, nobody is asked.
        assert asked["ada"] == []
        await asking.done()
        assert "no answer (decline)" in home.results()
        assert any("elicitation was declined" in e.text for e in home.inst.events)
    assert not holding.sent.done.done()
    home.open("release")
    await holding.done()
    assert "released" in home.results()
    assert await home.ada.inbox.pending() == [] and await home.mum.inbox.pending() == []


async def test_with_one_members_calls_in_flight_the_question_is_theirs(home: Household) -> None:
    holding, asking, asked = await home.ask_while_one_holds(home.ada)
    assert asked["mum"] == []
    [item] = asked["ada"]
    await home.ada.ask.answer(item.id, "amber")
    await asking.done()
    assert "favourite colour: amber" in home.results()
    home.open("release")
    await holding.done()
    assert "released" in home.results()
