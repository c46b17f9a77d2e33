"""Restart recovery: a turn killed mid-round is finished from what the store kept.

A "crash" is a hard cancel of the turn's task (nothing after it is written), with a
history store that outlives the loop; recovery then runs in a fresh loop on that store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from test_agent_fakes import (
    ScriptedGate,
    ScriptedModel,
    Sink,
    assert_every_call_answered_once,
    call,
    calls,
    make_loop,
    text,
    tool,
    tool_texts,
)

from skald.agent import (
    AgentLoop,
    CallState,
    ChildAgent,
    LoopConfig,
    MemoryHistory,
    Require,
    SubAgentTool,
    Tool,
    ToolContext,
    ToolResult,
    needs_resume,
)
from skald.agent.recovery import CALL_INTERRUPTED, EXEC_INTERRUPTED


class Tools:
    """Tools that count their runs; `hang` makes the named tool block on its first run."""

    def __init__(self, hang: str) -> None:
        self.runs: Counter[str] = Counter()
        self.hang = hang
        self.hanging = asyncio.Event()

    def make(self, name: str, **kw: Any) -> Tool:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.runs[name] += 1
            if name == self.hang and self.runs[name] == 1:
                self.hanging.set()
                await asyncio.sleep(3600)
            return ToolResult(content=f"{name} ok")

        return tool(name, run, **kw)


async def crash(loop: AgentLoop, message: str, ready: asyncio.Event) -> None:
    turn = asyncio.create_task(loop.run_turn(message))
    await ready.wait()
    await asyncio.sleep(0.01)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn


async def test_a_crash_mid_round_is_recovered_without_losing_or_duplicating_anything() -> None:
    history = MemoryHistory("conv-1")
    tools = Tools(hang="run_cmd")
    toolset = [
        tools.make("read_file", kind="read", rerun=True),
        tools.make("run_cmd", kind="exec"),
        tools.make("write_file", kind="write"),
    ]
    before = ScriptedModel(calls(call("read_file"), call("run_cmd"), call("write_file")))
    loop, _, _ = make_loop(before, toolset, history=history)

    await crash(loop, "tidy up", tools.hanging)

    states = [u.state for u in await history.unfinished_calls()]
    assert states == [CallState.RUNNING, CallState.PENDING]
    kept = list(history.messages)
    assert [m.role for m in kept] == ["user", "assistant", "tool"]
    assert await needs_resume(history)

    after = ScriptedModel(text("Tidied up; the command was cut off."))
    restarted, _, sink = make_loop(after, toolset, history=history)
    result = await restarted.resume()

    assert result.status == "done"
    assert result.text == "Tidied up; the command was cut off."
    assert tools.runs == Counter({"read_file": 1, "run_cmd": 1, "write_file": 1})
    assert history.messages[: len(kept)] == kept  # nothing lost or rewritten
    assert [m.role for m in history.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assert tool_texts(history.messages) == ["read_file ok", EXEC_INTERRUPTED, "write_file ok"]
    assert_every_call_answered_once(history.messages)
    assert await history.unfinished_calls() == []
    assert not await needs_resume(history)
    sent = after.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "tool"]
    assert sink.types()[0] == "TurnStarted" and sink.events[0].resumed  # type: ignore[union-attr]


async def test_idempotent_reads_are_rerun_and_other_calls_reported() -> None:
    history = MemoryHistory("conv-1")
    runs: Counter[str] = Counter()
    started = {"search": asyncio.Event(), "fetch": asyncio.Event()}

    def hangs_once(name: str) -> Any:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            runs[name] += 1
            if runs[name] == 1:
                started[name].set()
                await asyncio.sleep(3600)
            return ToolResult(content=f"{name} ok")

        return run

    toolset = [
        tool("search", hangs_once("search"), kind="read", rerun=True, safe=True),
        tool("fetch", hangs_once("fetch"), kind="read", safe=True),  # no rerun promise
    ]
    loop, _, _ = make_loop(
        ScriptedModel(calls(call("search"), call("fetch"))), toolset, history=history
    )
    both_running = asyncio.Event()

    async def watch() -> None:
        await asyncio.gather(*(e.wait() for e in started.values()))
        both_running.set()

    watcher = asyncio.create_task(watch())
    await crash(loop, "look things up", both_running)
    await watcher
    assert {u.state for u in await history.unfinished_calls()} == {CallState.RUNNING}

    restarted, _, _ = make_loop(ScriptedModel(text("found")), toolset, history=history)
    assert (await restarted.resume()).status == "done"

    assert runs == Counter({"search": 2, "fetch": 1})  # search re-run, fetch reported
    assert sorted(tool_texts(history.messages)) == sorted([CALL_INTERRUPTED, "search ok"])
    assert_every_call_answered_once(history.messages)


async def test_a_pending_approval_is_asked_again_after_a_restart() -> None:
    history = MemoryHistory("conv-1")
    ran: list[str] = []

    async def write(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append("write")
        return ToolResult(content="written")

    toolset = [tool("write", write, kind="write")]
    gate = ScriptedGate({"write": Require("confirm")})
    gate.release.clear()
    loop, _, _ = make_loop(ScriptedModel(calls(call("write"))), toolset, history=history, gate=gate)

    await crash(loop, "write it", gate.waiting)
    (open_call,) = await history.unfinished_calls()
    assert open_call.state is CallState.AWAITING_APPROVAL

    new_gate = ScriptedGate({"write": Require("confirm")})
    restarted, _, _ = make_loop(
        ScriptedModel(text("done")), toolset, history=history, gate=new_gate
    )
    result = await restarted.resume()

    assert result.status == "done"
    assert new_gate.checked == ["write"]
    assert [r.call_id for r in new_gate.requests] == [open_call.call.id]  # same call, asked again
    assert ran == ["write"]
    assert_every_call_answered_once(history.messages)


async def test_a_crash_before_the_answer_asks_the_model_again() -> None:
    history = MemoryHistory("conv-1")
    release = asyncio.Event()
    step = text("half an ans", "wer")
    step.pause, step.pause_after = release, 1
    before = ScriptedModel(step)
    loop, _, _ = make_loop(before, history=history)

    await crash(loop, "question", before.paused)
    assert [m.role for m in history.messages] == ["user"]  # the half answer was never stored

    after = ScriptedModel(text("a whole answer"))
    restarted, _, _ = make_loop(after, history=history)
    result = await restarted.resume()

    assert result.text == "a whole answer"
    assert [m.role for m in history.messages] == ["user", "assistant"]


async def test_a_sub_agent_cut_off_by_a_crash_is_reported_not_rerun() -> None:
    history = MemoryHistory("conv-1")
    started = asyncio.Event()
    child_model = ScriptedModel(calls(call("wait")))

    async def wait_forever(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        await asyncio.sleep(3600)
        return ToolResult(content="unreachable")

    async def factory(agent: str | None, ctx: ToolContext) -> ChildAgent:
        return ChildAgent(
            model=child_model,
            config=LoopConfig(model="m"),
            tools=[tool("wait", wait_forever)],
            gate=ScriptedGate({}),
        )

    delegate = SubAgentTool(factory)
    loop, _, _ = make_loop(
        ScriptedModel(calls(call("execute_task", task="t"))), [delegate], history=history
    )
    await crash(loop, "delegate", started)

    restarted, _, _ = make_loop(ScriptedModel(text("sorry")), [delegate], history=history)
    assert (await restarted.resume()).status == "done"
    assert tool_texts(history.messages) == [CALL_INTERRUPTED]
    assert len(child_model.requests) == 1


async def test_resume_without_unfinished_work_does_nothing() -> None:
    loop, history, _ = make_loop(ScriptedModel(text("hi")))
    await loop.run_turn("hello")
    sink = Sink()
    idle, _, _ = make_loop(ScriptedModel(), history=history, sink=sink)

    result = await idle.resume()

    assert (result.status, result.rounds) == ("done", 0)
    assert sink.events == []


async def test_a_new_message_after_a_crash_closes_the_dangling_calls_first() -> None:
    history = MemoryHistory("conv-1")
    tools = Tools(hang="run_cmd")
    toolset = [tools.make("run_cmd", kind="exec"), tools.make("write_file", kind="write")]
    loop, _, _ = make_loop(
        ScriptedModel(calls(call("run_cmd"), call("write_file"))), toolset, history=history
    )
    await crash(loop, "do it", tools.hanging)

    model = ScriptedModel(text("what now?"))
    restarted, _, _ = make_loop(model, toolset, history=history)
    result = await restarted.run_turn("something else")

    assert result.status == "done"
    assert tools.runs == Counter({"run_cmd": 1})
    texts = tool_texts(history.messages)
    assert texts[0] == EXEC_INTERRUPTED
    assert texts[1].startswith("Not run")
    assert_every_call_answered_once(history.messages)
    assert [m.role for m in model.requests[0].messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]


async def test_a_stop_during_recovery_closes_what_is_left() -> None:
    history = MemoryHistory("conv-1")
    tools = Tools(hang="search")
    toolset = [
        tools.make("search", kind="read", rerun=True),
        tools.make("write_file", kind="write"),
    ]
    loop, _, _ = make_loop(
        ScriptedModel(calls(call("search"), call("write_file"))), toolset, history=history
    )
    await crash(loop, "go", tools.hanging)

    tools.runs.clear()  # the re-run of `search` hangs again
    tools.hanging.clear()
    restarted, _, _ = make_loop(ScriptedModel(), toolset, history=history)
    resume = asyncio.create_task(restarted.resume())
    await tools.hanging.wait()
    restarted.stop()
    result = await resume

    assert result.status == "stopped"
    assert tools.runs == Counter({"search": 1})
    assert await history.unfinished_calls() == []
    assert_every_call_answered_once(history.messages)
