"""Runaway turns: output cut at the limit, the same failing call again and again, and
the per-turn budgets (issue 16, fault 3)."""

from __future__ import annotations

from typing import Any

from test_agent_fakes import ScriptedModel, Step, call, calls, make_loop, text, tool

from skald.agent import ToolContext, ToolResult, TurnDone
from skald.llm.types import Finished, TextDelta, ToolCall, ToolCallReady, Usage

WRITE_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}


def _cut_call() -> Step:
    # What a client makes of arguments cut mid-JSON, with the finish reason "length".
    broken = ToolCall(id="x", name="write", arguments={"_raw": '{"path": "a.md", "content": "Lo'})
    return Step(
        [
            ToolCallReady(broken),
            Finished(reason="length", usage=Usage(input_tokens=10, output_tokens=5)),
        ]
    )


async def test_calls_cut_off_at_the_output_limit_are_not_run_and_the_model_is_told() -> None:
    ran: list[dict[str, Any]] = []

    async def write(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(args)
        return ToolResult(content="written")

    model = ScriptedModel(_cut_call(), text("I will write less at a time."))
    loop, _, _ = make_loop(model, [tool("write", write, parameters=WRITE_ARGS)], max_tokens=512)

    result = await loop.run_turn("write a long story to a.md")

    assert result.status == "done"
    assert ran == []  # never run with half its arguments
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and told.is_error
    assert "output limit" in told.text and "missing" not in told.text


async def test_an_answer_cut_at_the_output_limit_is_marked_cut_off() -> None:
    cut = Step([TextDelta("Once upon a"), Finished(reason="length", usage=Usage())])
    model = ScriptedModel(cut)
    loop, history, _ = make_loop(model, max_tokens=64)

    await loop.run_turn("a story")

    answer = history.messages[-1]
    assert answer.text == "Once upon a" and answer.interrupted is not None
    assert answer.interrupted.code == "cut_off" and "output limit" in answer.interrupted.detail


async def test_the_same_failing_call_repeated_stops_the_turn_with_a_clear_message() -> None:
    async def broken(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.error("disk on fire")

    same = calls(call("save", path="a.md"))
    model = ScriptedModel(same, same, same, text("never asked"))
    loop, _, sink = make_loop(model, [tool("save", broken)], max_repeated_failures=3)

    result = await loop.run_turn("save it")

    assert result.status == "failed" and result.error_code == "repeated_failure"
    assert result.error is not None and "same failing step (save) 3 times" in result.error
    assert len(model.requests) == 3
    assert sink.of(TurnDone)[0].error_code == "repeated_failure"


async def test_a_failing_call_with_other_arguments_or_a_success_resets_the_count() -> None:
    async def picky(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if args.get("path") == "ok.md":
            return ToolResult(content="saved")
        return ToolResult.error("no")

    model = ScriptedModel(
        calls(call("save", path="a.md")),
        calls(call("save", path="a.md")),
        calls(call("save", path="ok.md")),
        calls(call("save", path="a.md")),
        calls(call("save", path="b.md")),
        text("done"),
    )
    loop, _, _ = make_loop(model, [tool("save", picky)], max_repeated_failures=3)

    assert (await loop.run_turn("save")).status == "done"


async def test_the_turn_token_budget_ends_a_runaway_turn_after_its_calls_ran() -> None:
    async def ok(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=str(args))

    def big(n: int) -> Step:
        return Step(
            [
                ToolCallReady(ToolCall(id="c", name="look", arguments={"n": n})),
                Finished(reason="tool_calls", usage=Usage(input_tokens=6000, output_tokens=10)),
            ]
        )

    model = ScriptedModel(big(1), big(2), big(3), text("never"))
    loop, history, _ = make_loop(model, [tool("look", ok)], max_turn_tokens=10_000)

    result = await loop.run_turn("look around")

    assert result.status == "failed" and result.error_code == "turn_budget"
    assert result.error is not None and "budget for one turn (10000)" in result.error
    assert len(model.requests) == 2
    assert [m.role for m in history.messages][-1] == "tool"  # the last calls have results
