"""Sub-agents as a tool: `execute_task` runs a nested loop; depth cap; stop reaches it."""

from __future__ import annotations

import asyncio
from typing import Any

from test_agent_fakes import (
    ScriptedModel,
    Sink,
    call,
    calls,
    echo_tool,
    make_loop,
    text,
    tool,
    tool_texts,
)

from skald.agent import (
    AllowAll,
    ChildAgent,
    LoopConfig,
    SubagentFinished,
    SubagentStarted,
    SubAgentTool,
    Tool,
    ToolContext,
    ToolResult,
    TurnDone,
)


def child_factory(model: ScriptedModel, tools: list[Tool], requested: list[str | None]) -> Any:
    async def factory(agent: str | None, ctx: ToolContext) -> ChildAgent | None:
        requested.append(agent)
        if agent == "missing":
            return None
        config = LoopConfig(model="child-model", system_prompt="You are a researcher.")
        return ChildAgent(model=model, config=config, tools=tools, gate=AllowAll())

    return factory


async def test_execute_task_runs_a_child_loop_and_returns_its_answer() -> None:
    child_model = ScriptedModel(calls(call("echo", q="prices")), text("Milk costs 1 EUR."))
    requested: list[str | None] = []
    delegate = SubAgentTool(
        child_factory(child_model, [echo_tool()], requested),
        agents={"researcher": "finds things out", "missing": "not installed"},
    )
    model = ScriptedModel(
        calls(call("execute_task", task="Find the price of milk.", agent="researcher")),
        text("It costs 1 EUR."),
    )
    loop, history, sink = make_loop(model, [delegate])

    result = await loop.run_turn("how much is milk?")

    assert result.status == "done"
    assert requested == ["researcher"]
    (answer,) = [m for m in history.messages if m.role == "tool"]
    assert answer.text == "Milk costs 1 EUR." and not answer.is_error
    # The child's own conversation never lands in the parent's history.
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]
    child_request = child_model.requests[0]
    assert child_request.model == "child-model"
    assert [m.text for m in child_request.messages] == [
        "You are a researcher.",
        "Find the price of milk.",
    ]
    assert [t.name for t in child_request.tools] == ["echo"]
    (started,) = sink.of(SubagentStarted)
    (finished,) = sink.of(SubagentFinished)
    assert started.child_conversation_id == f"conv-1/{started.call_id}"
    assert (started.agent, started.depth) == ("researcher", 0)
    assert finished.status == "done"
    child_done = [e for e in sink.of(TurnDone) if e.depth == 1]
    assert [e.conversation_id for e in child_done] == [started.child_conversation_id]


async def test_the_tool_spec_lists_the_agents_and_validation_rejects_others() -> None:
    requested: list[str | None] = []
    delegate = SubAgentTool(
        child_factory(ScriptedModel(), [], requested), agents={"researcher": "finds things out"}
    )
    params = delegate.spec.parameters
    assert delegate.name == "execute_task"
    assert params["required"] == ["task"]
    assert params["properties"]["agent"]["enum"] == ["researcher"]

    model = ScriptedModel(calls(call("execute_task", task="x", agent="hacker")), text("ok"))
    loop, history, _ = make_loop(model, [delegate])
    await loop.run_turn("go")

    assert requested == []
    (error,) = tool_texts(history.messages)
    assert "must be one of 'researcher'" in error


async def test_an_agent_the_factory_does_not_know_is_an_error_result() -> None:
    requested: list[str | None] = []
    delegate = SubAgentTool(
        child_factory(ScriptedModel(), [], requested), agents={"missing": "gone"}
    )
    model = ScriptedModel(calls(call("execute_task", task="x", agent="missing")), text("ok"))
    loop, history, _ = make_loop(model, [delegate])

    await loop.run_turn("go")

    (error,) = tool_texts(history.messages)
    assert "no agent named 'missing'" in error


async def test_sub_agents_nest_at_most_five_levels() -> None:
    # One model serves every level: each level delegates once, then answers.
    levels = 6
    model = ScriptedModel(
        *[calls(call("execute_task", task=f"level {i + 1}")) for i in range(levels)],
        *[text(f"answer from depth {levels - 1 - i}") for i in range(levels)],
    )

    async def factory(agent: str | None, ctx: ToolContext) -> ChildAgent:
        return ChildAgent(
            model=model, config=LoopConfig(model="m"), tools=[nested], gate=AllowAll()
        )

    nested = SubAgentTool(factory)
    loop, _, sink = make_loop(model, [nested])

    result = await loop.run_turn("go deep")

    assert result.status == "done"
    assert result.text == "answer from depth 0"
    assert len(model.requests) == 2 * levels
    refused = model.requests[levels].messages[-1]  # depth 5's second request
    assert refused.role == "tool" and refused.is_error
    assert "cannot nest more than 5 levels" in refused.text
    assert max(e.depth for e in sink.events) == 5
    assert len(sink.of(SubagentStarted)) == 5


async def test_stopping_the_parent_stops_the_child_and_its_tools() -> None:
    child_tool_cancelled = asyncio.Event()
    child_tool_started = asyncio.Event()

    async def long_job(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        child_tool_started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            child_tool_cancelled.set()
            raise
        return ToolResult(content="unreachable")

    child_model = ScriptedModel(calls(call("long_job")))
    delegate = SubAgentTool(
        child_factory(child_model, [tool("long_job", long_job, kind="exec")], [])
    )
    model = ScriptedModel(calls(call("execute_task", task="work hard")))
    sink = Sink()
    loop, history, _ = make_loop(model, [delegate], sink=sink)

    turn = asyncio.create_task(loop.run_turn("go"))
    await child_tool_started.wait()
    loop.stop()
    result = await asyncio.wait_for(turn, 5)

    assert result.status == "stopped"
    assert child_tool_cancelled.is_set()
    (closed,) = tool_texts(history.messages)
    assert "Stopped by the user" in closed
    assert await history.unfinished_calls() == []
