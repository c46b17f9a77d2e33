"""The in-memory history store's rules and the projection for the model."""

from __future__ import annotations

import pytest

from skald.agent import CallState, MemoryHistory, UnfinishedCall, project
from skald.agent.history import MISSING_RESULT, tool_result_message
from skald.llm.types import Message, TextPart, ToolCall

A = ToolCall(id="a", name="read", arguments={})
B = ToolCall(id="b", name="write", arguments={"x": 1})


def assistant_with(*tool_calls: ToolCall) -> Message:
    return Message(role="assistant", tool_calls=list(tool_calls))


async def test_calls_start_pending_and_finish_with_exactly_one_result() -> None:
    history = MemoryHistory("c")
    await history.append(Message(role="user", content=[TextPart("hi")]))
    await history.append(assistant_with(A, B))
    assert await history.unfinished_calls() == [
        UnfinishedCall(A, CallState.PENDING),
        UnfinishedCall(B, CallState.PENDING),
    ]

    await history.mark_call("a", CallState.RUNNING)
    await history.append_result(tool_result_message("a", "ok", is_error=False), CallState.DONE)

    assert await history.unfinished_calls() == [UnfinishedCall(B, CallState.PENDING)]
    with pytest.raises(ValueError, match="already has a result"):
        await history.append_result(
            tool_result_message("a", "again", is_error=False), CallState.DONE
        )
    with pytest.raises(ValueError, match="already has a result"):
        await history.mark_call("a", CallState.RUNNING)
    with pytest.raises(ValueError, match="unknown tool call"):
        await history.append_result(tool_result_message("zz", "?", is_error=False), CallState.DONE)
    with pytest.raises(ValueError, match="final state"):
        await history.append_result(
            tool_result_message("b", "?", is_error=False), CallState.RUNNING
        )
    with pytest.raises(ValueError, match="append_result"):
        await history.append(tool_result_message("b", "?", is_error=False))
    with pytest.raises(ValueError, match="duplicate tool call id"):
        await history.append(assistant_with(A))


async def test_metadata_is_kept_with_the_result() -> None:
    history = MemoryHistory("c", [assistant_with(A)])
    await history.append_result(
        tool_result_message("a", "ok", is_error=False), CallState.DONE, {"path": "x.md"}
    )
    assert history.metadata == {"a": {"path": "x.md"}}
    assert history.states["a"] is CallState.DONE


def test_projection_orders_results_fills_gaps_and_drops_orphans() -> None:
    stored = [
        Message(role="user", content=[TextPart("go")]),
        assistant_with(A, B),
        tool_result_message("b", "B done", is_error=False),
        tool_result_message("zz", "orphan", is_error=False),
    ]
    out = project(stored)
    assert [(m.role, m.tool_call_id) for m in out] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
    ]
    assert out[2].text == MISSING_RESULT and out[2].is_error
    assert out[3].text == "B done"


async def test_start_turn_stores_and_loads_at_once_unless_a_call_is_open() -> None:
    history = MemoryHistory("c")
    first = Message(role="user", content=[TextPart("hi")])
    assert await history.start_turn(first) == [first]
    await history.append(assistant_with(A))
    # A call is open: nothing is stored, the loop settles the call first.
    assert await history.start_turn(Message(role="user", content=[TextPart("again")])) is None
    assert len(await history.load()) == 2
