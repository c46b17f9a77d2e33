"""`/stop`: the cancellation tree, and a stopped turn leaves a usable conversation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from test_agent_fakes import (
    ScriptedGate,
    ScriptedModel,
    assert_every_call_answered_once,
    call,
    calls,
    make_loop,
    stopped_mid_stream,
    text,
    tool,
    tool_texts,
)

from skald.agent import (
    CallState,
    CancelScope,
    Require,
    Stopped,
    ToolContext,
    ToolFinished,
    ToolResult,
    TurnDone,
)

# -- the scope tree -----------------------------------------------------------------------


async def test_cancelling_a_scope_cancels_its_whole_subtree_only() -> None:
    root = CancelScope()
    turn = root.child()
    tool_scope = turn.child()
    sibling = root.child()

    turn.cancel("stopped by the user")

    assert turn.cancelled and tool_scope.cancelled
    assert tool_scope.reason == "stopped by the user"
    assert not root.cancelled and not sibling.cancelled
    late = turn.child()
    assert late.cancelled  # sticky: work started after the stop is stopped too
    with pytest.raises(Stopped):
        late.check()


async def _sleeps_until_cancelled(cancelled: asyncio.Event) -> None:
    """Work that sleeps for an hour unless cancelled, which it notes in `cancelled`."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        cancelled.set()
        raise


async def test_run_returns_the_result_or_cancels_the_work() -> None:
    scope = CancelScope()
    assert await scope.run(asyncio.sleep(0, result=42)) == 42

    cancelled = asyncio.Event()

    task = asyncio.create_task(scope.run(_sleeps_until_cancelled(cancelled)))
    await asyncio.sleep(0.01)
    scope.cancel("enough")
    with pytest.raises(Stopped, match="enough"):
        await task
    assert cancelled.is_set()
    with pytest.raises(Stopped):
        await scope.run(asyncio.sleep(0))  # already cancelled: nothing starts


async def test_a_hard_cancel_of_the_caller_takes_the_work_down_too() -> None:
    scope = CancelScope()
    inner_cancelled = asyncio.Event()

    task = asyncio.create_task(scope.run(_sleeps_until_cancelled(inner_cancelled)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner_cancelled.is_set()
    assert not scope.cancelled


async def test_work_that_ignores_cancellation_is_abandoned_after_the_grace() -> None:
    scope = CancelScope(grace_s=0.05)
    finished = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # ignores the stop for a while
            finished.set()

    task = asyncio.create_task(scope.run(stubborn()))
    await asyncio.sleep(0.01)
    t0 = time.monotonic()
    scope.cancel()
    with pytest.raises(Stopped):
        await task
    assert time.monotonic() - t0 < 0.25
    await asyncio.wait_for(finished.wait(), 2)


# -- stopping a turn ------------------------------------------------------------------------


async def test_stop_during_the_model_stream_keeps_what_was_shown() -> None:
    release = asyncio.Event()
    step = text("The answer is", " never shown")
    step.pause, step.pause_after = release, 1
    model = ScriptedModel(step, text("fresh start"))
    loop, history, sink = make_loop(model)

    result = await stopped_mid_stream(loop, model, "question")

    assert result.status == "stopped"
    assert result.error == "stopped by the user"
    assert result.text == "The answer is"
    assert model.closed == 1  # the stream was closed, not left hanging
    assert [(m.role, m.text) for m in history.messages] == [
        ("user", "question"),
        ("assistant", "The answer is"),
    ]
    assert sink.of(TurnDone)[0].status == "stopped"

    again = await loop.run_turn("next")
    assert again.status == "done"
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]


async def test_stop_interrupts_running_tools_and_every_call_gets_a_result() -> None:
    cancelled: list[str] = []
    started = asyncio.Event()

    def blocked(name: str) -> Any:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            try:
                started.set()
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            return ToolResult(content="unreachable")

        return run

    tools = [tool("a", blocked("a"), safe=True), tool("b", blocked("b"), safe=True)]
    model = ScriptedModel(calls(call("a"), call("b")), text("ok"))
    loop, history, sink = make_loop(model, tools)

    turn = asyncio.create_task(loop.run_turn("go"))
    await started.wait()
    await asyncio.sleep(0.01)
    loop.stop()
    result = await turn

    assert result.status == "stopped"
    assert sorted(cancelled) == ["a", "b"]
    assert all("Stopped by the user" in t for t in tool_texts(history.messages))
    assert all(s is CallState.INTERRUPTED for s in history.states.values())
    assert {e.status for e in sink.of(ToolFinished)} == {"interrupted"}
    assert_every_call_answered_once(history.messages)
    assert len(model.requests) == 1  # no further round after a stop

    again = await loop.run_turn("and now?")
    assert again.status == "done"
    sent = model.requests[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "user"]


async def test_stop_in_a_sequential_batch_leaves_later_calls_unrun_but_answered() -> None:
    ran: list[str] = []
    started = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        await asyncio.sleep(3600)
        return ToolResult(content="unreachable")

    async def after(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append("after")
        return ToolResult(content="ran")

    tools = [tool("slow", slow, kind="exec"), tool("after", after, kind="write")]
    model = ScriptedModel(calls(call("slow"), call("after")))
    loop, history, _ = make_loop(model, tools)

    turn = asyncio.create_task(loop.run_turn("go"))
    await started.wait()
    loop.stop()
    assert (await turn).status == "stopped"

    assert ran == []
    first, second = tool_texts(history.messages)
    assert "Stopped by the user while running" in first
    assert "Not run" in second
    assert await history.unfinished_calls() == []


async def test_stop_cancels_an_approval_wait() -> None:
    gate = ScriptedGate({"write": Require()})
    gate.release.clear()
    model = ScriptedModel(calls(call("write")))

    async def write(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise AssertionError("must not run")

    loop, history, _ = make_loop(model, [tool("write", write)], gate=gate)

    turn = asyncio.create_task(loop.run_turn("go"))
    await gate.waiting.wait()
    loop.stop()
    result = await turn

    assert result.status == "stopped"
    (closed,) = tool_texts(history.messages)
    assert "waited for approval" in closed
    assert await history.unfinished_calls() == []


async def test_cancelling_the_callers_scope_stops_the_turn() -> None:
    root = CancelScope()
    release = asyncio.Event()
    step = text("x")
    step.pause = release
    model = ScriptedModel(step)
    loop, _, _ = make_loop(model, cancel=root)

    turn = asyncio.create_task(loop.run_turn("hi"))
    await model.paused.wait()
    root.cancel("shutting down")

    result = await turn
    assert (result.status, result.error) == ("stopped", "shutting down")


async def test_stop_when_idle_does_nothing() -> None:
    model = ScriptedModel(text("hi"))
    loop, _, _ = make_loop(model)
    loop.stop()
    assert (await loop.run_turn("hello")).status == "done"
