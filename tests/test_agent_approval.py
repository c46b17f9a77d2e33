"""The approval gate as the loop uses it: allow, deny, require -> approved/rejected/deferred."""

from __future__ import annotations

import asyncio
from typing import Any

from test_agent_fakes import (
    ScriptedGate,
    ScriptedModel,
    assert_every_call_answered_once,
    call,
    calls,
    make_loop,
    text,
    tool,
    tool_texts,
)

from skald.agent import (
    ApprovalRequested,
    Approved,
    CallState,
    Deferred,
    Deny,
    Rejected,
    Require,
    Tool,
    ToolCallUpdate,
    ToolContext,
    ToolResult,
    TurnStarted,
)


def counting_tool(name: str, ran: list[str], kind: Any = "write") -> Tool:
    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(name)
        return ToolResult(content=f"{name} ok")

    return tool(name, run, kind=kind)


async def test_a_denied_call_does_not_run_and_the_model_is_told_why() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"rm": Deny("deleting files is not allowed for this agent")})
    model = ScriptedModel(calls(call("rm", path="x")), text("I may not delete that."))
    loop, history, _ = make_loop(model, [counting_tool("rm", ran)], gate=gate)

    result = await loop.run_turn("delete x")

    assert result.status == "done"
    assert ran == []
    (refusal,) = [m for m in history.messages if m.role == "tool"]
    assert refusal.is_error
    assert "refused" in refusal.text and "not allowed for this agent" in refusal.text
    assert history.states[refusal.tool_call_id or ""] is CallState.DENIED
    assert "refused" in model.requests[1].messages[-1].text


async def test_a_failing_gate_fails_closed() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"rm": RuntimeError("rules table locked")})
    model = ScriptedModel(calls(call("rm")), text("ok"))
    loop, history, _ = make_loop(model, [counting_tool("rm", ran)], gate=gate)

    await loop.run_turn("go")

    assert ran == []
    (refusal,) = tool_texts(history.messages)
    assert "approval check failed" in refusal


async def test_an_approved_call_runs_after_the_request_is_announced() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"write": Require("writes need a grown-up")})
    gate.release.clear()
    model = ScriptedModel(calls(call("write", path="a.txt")), text("written"))
    loop, history, sink = make_loop(model, [counting_tool("write", ran)], gate=gate)

    turn = asyncio.create_task(loop.run_turn("write it"))
    await gate.waiting.wait()
    (request,) = gate.requests
    assert (request.tool, request.arguments, request.kind) == ("write", {"path": "a.txt"}, "write")
    assert request.reason == "writes need a grown-up"
    assert request.conversation_id == "conv-1"
    assert history.states[request.call_id] is CallState.AWAITING_APPROVAL
    (announced,) = sink.of(ApprovalRequested)
    assert announced.call_id == request.call_id
    assert ran == []
    gate.release.set()
    result = await turn

    assert result.status == "done"
    assert ran == ["write"]
    statuses = [e.status for e in sink.of(ToolCallUpdate)]
    assert statuses == ["pending", "awaiting_approval", "running", "done"]


async def test_a_rejected_call_gets_an_error_result() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"write": Require()}, answer=Rejected("not now"))
    model = ScriptedModel(calls(call("write")), text("ok, I won't"))
    loop, history, _ = make_loop(model, [counting_tool("write", ran)], gate=gate)

    await loop.run_turn("write it")

    assert ran == []
    (rejection,) = tool_texts(history.messages)
    assert "declined" in rejection and "not now" in rejection


async def test_a_deferred_approval_pauses_the_turn_and_resume_finishes_it() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"write": Require()}, answer=Deferred())
    tools = [counting_tool("write", ran), counting_tool("notify", ran)]
    model = ScriptedModel(calls(call("write"), call("notify")), text("all done"))
    loop, history, sink = make_loop(model, tools, gate=gate)

    paused = await loop.run_turn("write and tell me")

    assert paused.status == "awaiting_approval"
    assert ran == []
    assert [u.state for u in await history.unfinished_calls()] == [
        CallState.AWAITING_APPROVAL,
        CallState.PENDING,
    ]

    gate.answer = Approved()  # the human said yes, later
    resumed = await loop.resume()

    assert resumed.status == "done"
    assert resumed.text == "all done"
    assert ran == ["write", "notify"]
    assert gate.checked == ["write", "write", "notify"]  # asked again on resume
    assert await history.unfinished_calls() == []
    assert_every_call_answered_once(history.messages)
    assert [e.resumed for e in sink.of(TurnStarted)] == [False, True]


async def test_a_new_message_closes_a_still_open_approval() -> None:
    ran: list[str] = []
    gate = ScriptedGate({"write": Require()}, answer=Deferred())
    model = ScriptedModel(calls(call("write")), text("fine, something else then"))
    loop, history, _ = make_loop(model, [counting_tool("write", ran)], gate=gate)

    assert (await loop.run_turn("write it")).status == "awaiting_approval"
    result = await loop.run_turn("never mind, tell me a joke")

    assert result.status == "done"
    assert ran == []
    (closed,) = tool_texts(history.messages)
    assert "approval request was still open" in closed
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert_every_call_answered_once(history.messages)
