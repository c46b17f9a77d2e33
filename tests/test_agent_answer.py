"""`agent.streaming.answer`: one whole model answer for an unattended caller (event
triage). What came before a `Restart` is void; an answer without `Finished` fails."""

from __future__ import annotations

import pytest
from test_agent_fakes import ScriptedModel, Step, call, calls

from skald.agent.streaming import answer
from skald.llm.errors import LlmError
from skald.llm.types import Request, Restart, StreamEvent, TextDelta, ToolCallReady, Usage

REQUEST = Request(model="", messages=[], max_tokens=100)


async def test_a_restart_voids_the_text_and_calls_before_it() -> None:
    void, kept = call("notify"), call("notify", n=1)
    cut_off: list[StreamEvent] = [TextDelta("first "), ToolCallReady(void)]
    cut_off.append(Restart(reason="cut off", model="other", usage=Usage()))
    model = ScriptedModel(Step(cut_off + calls(kept, say="second").events))
    reply = await answer(model, REQUEST)
    assert reply.text == "second"
    assert reply.calls == [kept]
    assert reply.finish == "tool_calls"


async def test_an_answer_that_never_finishes_fails() -> None:
    with pytest.raises(LlmError):
        await answer(ScriptedModel(Step([TextDelta("half")])), REQUEST)
