"""The agent loop's rounds: streaming, tool calls, concurrency, bad calls, retries, events."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from test_agent_fakes import (
    ScriptedModel,
    Step,
    assert_every_call_answered_once,
    call,
    calls,
    echo_tool,
    failing,
    make_loop,
    text,
    tool,
    tool_texts,
)

from skald.agent import (
    AgentLoop,
    AllowAll,
    CallState,
    Event,
    LoopConfig,
    MemoryHistory,
    TokenDelta,
    ToolCallUpdate,
    ToolContext,
    ToolFinished,
    ToolOutput,
    ToolResult,
    TurnDone,
    UsageReport,
)
from skald.llm.errors import LlmError
from skald.llm.types import TextDelta


async def test_a_plain_answer_streams_and_ends_the_turn() -> None:
    model = ScriptedModel(text("Hel", "lo!"))
    loop, history, sink = make_loop(model, system_prompt="You are Skald.")

    result = await loop.run_turn("hi")

    assert result.status == "done"
    assert result.text == "Hello!"
    assert result.rounds == 1
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.messages[1].text == "Hello!"
    assert sink.types() == [
        "TurnStarted",
        "TokenDelta",
        "TokenDelta",
        "UsageReport",
        "TurnDone",
    ]
    assert [e.text for e in sink.of(TokenDelta)] == ["Hel", "lo!"]
    done = sink.of(TurnDone)[0]
    assert (done.status, done.text, done.conversation_id) == ("done", "Hello!", "conv-1")
    request = model.requests[0]
    assert request.model == "test-model"
    assert [m.role for m in request.messages] == ["system", "user"]
    assert model.closed == 1


async def test_tool_calls_run_and_the_results_go_back_to_the_model() -> None:
    seen_history: list[list[str]] = []
    history = MemoryHistory("conv-1")

    async def lookup(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        # The assistant message with this call is stored before the tool runs.
        seen_history.append([m.role for m in history.messages])
        assert history.states[ctx.call_id] is CallState.RUNNING
        return ToolResult(content=f"found {args['q']}")

    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    model = ScriptedModel(
        calls(call("lookup", q="milk"), say="Let me look."), text("You have milk.")
    )
    loop, history, sink = make_loop(
        model, [tool("lookup", lookup, parameters=params)], history=history
    )

    result = await loop.run_turn("do we have milk?")

    assert result.status == "done"
    assert result.text == "You have milk."
    assert result.rounds == 2
    assert seen_history == [["user", "assistant"]]
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]
    assistant = history.messages[1]
    assert assistant.text == "Let me look."
    (stored_call,) = assistant.tool_calls
    assert stored_call.id != "call_0"  # ids are ours, unique in the conversation
    assert history.states[stored_call.id] is CallState.DONE
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[2].tool_call_id == stored_call.id
    assert second[2].text == "found milk"
    statuses = [e.status for e in sink.of(ToolCallUpdate)]
    assert statuses == ["pending", "running", "done"]
    (finished,) = sink.of(ToolFinished)
    assert (finished.name, finished.content, finished.is_error) == ("lookup", "found milk", False)
    usage = sink.of(UsageReport)
    assert len(usage) == 2
    assert result.usage.input_tokens == 20


async def test_the_round_cap_ends_a_turn_that_never_stops_calling_tools() -> None:
    model = ScriptedModel(*[calls(call("echo", n=i)) for i in range(3)])
    loop, history, sink = make_loop(model, [echo_tool()], max_rounds=3)

    result = await loop.run_turn("loop forever")

    assert result.status == "failed"
    assert result.rounds == 3
    assert result.error is not None and "3 model calls" in result.error
    assert len(model.requests) == 3
    assert_every_call_answered_once(history.messages)
    assert sink.of(TurnDone)[0].status == "failed"


async def test_safe_calls_of_one_response_run_concurrently_and_results_keep_call_order() -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    def slow(name: str, delay: float) -> Any:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            started.append(name)
            if len(started) == 2:
                both_started.set()
            # Each waits for the other: this only finishes if they run at the same time.
            await asyncio.wait_for(both_started.wait(), 2)
            await asyncio.sleep(delay)
            return ToolResult(content=name)

        return run

    tools = [tool("a", slow("a", 0.05), safe=True), tool("b", slow("b", 0.0), safe=True)]
    model = ScriptedModel(calls(call("a"), call("b")), text("ok"))
    loop, history, _ = make_loop(model, tools)

    result = await loop.run_turn("go")

    assert result.status == "done"
    # b finished first and was stored first; the model still sees call order.
    assert tool_texts(history.messages) == ["b", "a"]
    assert tool_texts(model.requests[1].messages) == ["a", "b"]
    assert_every_call_answered_once(history.messages)


async def test_one_unsafe_call_makes_the_response_run_in_order() -> None:
    log: list[str] = []

    def step(name: str) -> Any:
        async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            log.append(f"{name} start")
            await asyncio.sleep(0.01)
            log.append(f"{name} end")
            return ToolResult(content=name)

        return run

    tools = [tool("read", step("read"), safe=True), tool("write", step("write"), kind="write")]
    model = ScriptedModel(calls(call("read"), call("write"), call("read")), text("ok"))
    loop, history, _ = make_loop(model, tools)

    await loop.run_turn("go")

    assert log == ["read start", "read end", "write start", "write end", "read start", "read end"]
    assert tool_texts(history.messages) == ["read", "write", "read"]


async def test_parallel_calls_are_capped() -> None:
    running = 0
    peak = 0

    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return ToolResult(content="ok")

    model = ScriptedModel(calls(*[call("r", i=i) for i in range(6)]), text("done"))
    loop, history, _ = make_loop(model, [tool("r", run, safe=True)], max_parallel_calls=2)

    await loop.run_turn("go")

    assert peak == 2
    assert len(tool_texts(history.messages)) == 6


async def test_unknown_tools_bad_arguments_and_crashing_tools_become_error_results() -> None:
    async def boom(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire " + "x" * 1000)

    params = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    tools = [tool("read_file", boom, parameters=params), echo_tool()]
    model = ScriptedModel(
        calls(call("nope"), call("read_file", limit="ten"), call("read_file", path="a")),
        text("sorry"),
    )
    loop, history, sink = make_loop(model, tools)

    result = await loop.run_turn("go")

    assert result.status == "done"
    unknown, invalid, crashed = (m for m in history.messages if m.role == "tool")
    assert unknown.is_error and "Unknown tool 'nope'" in unknown.text
    assert "echo" in unknown.text and "read_file" in unknown.text
    assert invalid.is_error
    assert "missing required argument 'path'" in invalid.text
    assert "'limit' must be an integer" in invalid.text
    assert crashed.is_error and "RuntimeError: disk on fire" in crashed.text
    assert len(crashed.text) < 500  # a short message, not the whole exception
    statuses = [e.status for e in sink.of(ToolFinished)]
    assert statuses == ["error", "error", "error"]
    assert_every_call_answered_once(history.messages)


async def test_long_tool_output_is_cut_with_a_note() -> None:
    async def big(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content="y" * 500)

    model = ScriptedModel(calls(call("big")), text("ok"))
    loop, history, _ = make_loop(model, [tool("big", big)], max_result_chars=100)

    await loop.run_turn("go")

    (result,) = tool_texts(history.messages)
    assert result.startswith("y" * 100)
    assert "truncated: 500 characters" in result


async def test_a_tool_streams_output_chunks_to_the_sink() -> None:
    async def cmd(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.output("line 1\n")
        await ctx.output("line 2\n")
        return ToolResult(content="line 1\nline 2\n")

    model = ScriptedModel(calls(call("cmd")), text("ok"))
    loop, history, sink = make_loop(model, [tool("cmd", cmd, kind="exec")])

    await loop.run_turn("go")

    chunks = sink.of(ToolOutput)
    assert [c.chunk for c in chunks] == ["line 1\n", "line 2\n"]
    assert chunks[0].call_id == history.messages[1].tool_calls[0].id


async def test_a_retriable_error_before_any_token_is_retried_once() -> None:
    model = ScriptedModel(failing(LlmError("busy", status=429, retriable=True)), text("hi"))
    loop, _, _ = make_loop(model)

    result = await loop.run_turn("hello")

    assert result.status == "done"
    assert result.text == "hi"
    assert len(model.requests) == 2


async def test_a_second_retriable_error_fails_the_turn() -> None:
    busy = LlmError("provider answered 503", status=503, retriable=True)
    model = ScriptedModel(failing(busy), failing(busy))
    loop, history, sink = make_loop(model)

    result = await loop.run_turn("hello")

    assert result.status == "failed"
    assert result.error == "provider answered 503"
    assert len(model.requests) == 2
    assert sink.of(TurnDone)[0].error == "provider answered 503"
    # Nothing was said: the failure is recorded, as an answer of nothing.
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.messages[1].text == "" and history.messages[1].interrupted is not None


async def test_a_non_retriable_error_fails_at_once() -> None:
    model = ScriptedModel(
        failing(LlmError("provider answered 401: bad key", status=401, retriable=False))
    )
    loop, _, sink = make_loop(model)

    result = await loop.run_turn("hello")

    assert result.status == "failed"
    assert result.error is not None and "401" in result.error
    assert len(model.requests) == 1
    assert sink.of(TurnDone)[0].status == "failed"


async def test_an_error_after_tokens_were_streamed_is_not_retried() -> None:
    model = ScriptedModel(
        failing(LlmError("reset", retriable=True), after=text("partial", "more"), after_events=1),
        text("never"),
    )
    loop, history, _ = make_loop(model)

    result = await loop.run_turn("hello")

    assert result.status == "failed"
    assert len(model.requests) == 1
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.messages[1].text == "partial"  # what the member saw is kept


async def test_a_stream_without_finish_counts_as_an_error() -> None:
    model = ScriptedModel(Step([TextDelta("a")]), Step([TextDelta("b")]))
    loop, _, _ = make_loop(model)

    result = await loop.run_turn("hello")

    assert result.status == "failed"
    assert result.error is not None and "ended before it was complete" in result.error


async def test_an_async_sink_works_and_a_failing_sink_never_breaks_the_turn() -> None:
    got: list[Event] = []

    async def async_sink(event: Event) -> None:
        got.append(event)
        if isinstance(event, TokenDelta):
            raise RuntimeError("client went away")

    model = ScriptedModel(text("a", "b"))
    loop = AgentLoop(model, [], MemoryHistory("c"), AllowAll(), async_sink, LoopConfig(model="m"))

    result = await loop.run_turn("hi")

    assert result.status == "done"
    assert isinstance(got[-1], TurnDone)


async def test_events_round_trip_as_a_tagged_union() -> None:
    model = ScriptedModel(calls(call("echo", x=1)), text("ok"))
    loop, _, sink = make_loop(model, [echo_tool()])
    await loop.run_turn("go")

    for event in sink.events:
        wire = msgspec.json.encode(event)
        assert msgspec.json.decode(wire, type=Event) == event
    first = msgspec.json.decode(msgspec.json.encode(sink.events[0]))
    assert first["type"] == "turn_started"
    assert first["conversation_id"] == "conv-1"


async def test_an_empty_answer_is_not_stored() -> None:
    model = ScriptedModel(text())
    loop, history, _ = make_loop(model)

    result = await loop.run_turn("hi")

    assert result.status == "done"
    assert [m.role for m in history.messages] == ["user"]


async def test_one_loop_runs_one_turn_at_a_time() -> None:
    gate = asyncio.Event()
    step = text("slow")
    step.pause, step.pause_after = gate, 0
    model = ScriptedModel(step, text("second"))
    loop, _, _ = make_loop(model)

    first = asyncio.create_task(loop.run_turn("one"))
    await model.paused.wait()
    assert loop.busy
    with pytest.raises(RuntimeError, match="already running"):
        await loop.run_turn("two")
    gate.set()
    assert (await first).status == "done"
    assert (await loop.run_turn("two")).text == "second"


async def test_a_tool_gets_its_context() -> None:
    seen: list[ToolContext] = []

    async def look(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        seen.append(ctx)
        return ToolResult(content="ok", metadata={"shown": True})

    model = ScriptedModel(calls(call("look")), text("ok"))
    history = MemoryHistory("conv-9")
    loop, _, _ = make_loop(model, [tool("look", look)], history=history, extras={"user_id": "u1"})

    await loop.run_turn("go")

    (ctx,) = seen
    assert (ctx.conversation_id, ctx.depth, ctx.extras) == ("conv-9", 0, {"user_id": "u1"})
    assert ctx.call_id == history.messages[1].tool_calls[0].id
    assert not ctx.cancel.cancelled
    assert history.metadata[ctx.call_id] == {"shown": True}
