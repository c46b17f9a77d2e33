"""Messages the member sends while a turn runs join that turn at its next step, instead
of waiting for a turn of their own (issue 15, part 3)."""

from __future__ import annotations

from typing import Any

from test_agent_fakes import ScriptedModel, call, calls, make_loop, text, tool

from skald.agent import MemoryHistory, ToolContext, ToolResult
from skald.llm.types import Message, TextPart


def _user(words: str) -> Message:
    return Message(role="user", content=[TextPart(words)])


async def test_a_message_sent_during_a_tool_call_is_seen_at_the_next_step() -> None:
    pending: list[Message] = []

    async def slow_search(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pending.append(_user("Oh, and only vegetarian ones"))  # typed while it ran
        return ToolResult(content="12 recipes")

    async def joined() -> Message | None:
        return pending.pop(0) if pending else None

    model = ScriptedModel(calls(call("search", q="dinner")), text("Here are 3 vegetarian ones."))
    history = MemoryHistory("conv-1")
    loop, _, _ = make_loop(model, [tool("search", slow_search)], history=history, joined=joined)

    result = await loop.run_turn("Find dinner recipes")

    assert result.status == "done" and result.rounds == 2
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "user"]
    assert second[-1].text == "Oh, and only vegetarian ones"
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "user", "assistant"]


async def test_a_message_sent_during_the_final_answer_gets_its_own_step_in_the_turn() -> None:
    asked = 0

    async def joined() -> Message | None:
        nonlocal asked
        asked += 1
        return _user("And tomorrow?") if asked == 2 else None  # after the first answer

    model = ScriptedModel(text("Sunny today."), text("Rain tomorrow."))
    loop, _, _ = make_loop(model, joined=joined)

    result = await loop.run_turn("Weather?")

    assert result.status == "done" and result.text == "Rain tomorrow." and result.rounds == 2
    assert model.requests[1].messages[-1].text == "And tomorrow?"
