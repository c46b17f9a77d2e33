"""`agent.streaming.answer`: one whole model answer for an unattended caller (event
triage). What came before a `Restart` is void; an answer without `Finished` fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from skald.agent.streaming import answer
from skald.llm.errors import LlmError
from skald.llm.types import (
    Finished,
    Request,
    Restart,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    Usage,
)


class Events:
    def __init__(self, events: Sequence[StreamEvent]) -> None:
        self.events = events

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        for event in self.events:
            yield event


REQUEST = Request(model="", messages=[], max_tokens=100)


async def test_a_restart_voids_the_text_and_calls_before_it() -> None:
    void = ToolCall(id="a", name="notify", arguments={})
    kept = ToolCall(id="b", name="notify", arguments={"n": 1})
    model = Events(
        [
            TextDelta("first "),
            ToolCallReady(void),
            Restart(reason="cut off", model="other", usage=Usage()),
            TextDelta("second"),
            ToolCallReady(kept),
            Finished(reason="tool_calls", usage=Usage(input_tokens=3, output_tokens=2)),
        ]
    )
    reply = await answer(model, REQUEST)
    assert reply.text == "second"
    assert reply.calls == [kept]
    assert reply.finish == "tool_calls"


async def test_an_answer_that_never_finishes_fails() -> None:
    with pytest.raises(LlmError):
        await answer(Events([TextDelta("half")]), REQUEST)
