"""Answers cut short: what the member saw is kept, marked interrupted, and the model
learns why at its next call (issue 16, fault 1)."""

from __future__ import annotations

from test_agent_fakes import ScriptedModel, failing, make_loop, stopped_mid_stream, text

from skald.agent import TurnDone
from skald.llm.errors import LlmError


async def test_a_provider_failure_mid_stream_keeps_the_partial_text_marked_interrupted() -> None:
    broke = LlmError("peer closed connection", retriable=True)
    model = ScriptedModel(
        failing(broke, after=text("The tide ", "turns at"), after_events=2), text("Again.")
    )
    loop, history, sink = make_loop(model)

    result = await loop.run_turn("when is the tide?")

    assert result.status == "failed"
    assert result.text == "The tide turns at"
    stored = history.messages[-1]
    assert stored.role == "assistant" and stored.text == "The tide turns at"
    assert stored.interrupted is not None
    assert "peer closed connection" in stored.interrupted.detail
    assert sink.of(TurnDone)[0].error_code == result.error_code is not None

    # The next turn tells the model its earlier answer broke off, and why.
    await loop.run_turn("and then?")
    sent = model.requests[-1].messages
    earlier = next(m for m in sent if m.role == "assistant")
    assert earlier.text.startswith("The tide turns at")
    assert "interrupted: peer closed connection" in earlier.text
    assert earlier.interrupted is None  # the note is text; no field leaks to a provider


async def test_a_failure_before_any_text_is_recorded_but_never_sent_as_an_empty_answer() -> None:
    refused = LlmError("provider answered 401: bad key", status=401, retriable=False)
    model = ScriptedModel(failing(refused), text("Hi."))
    loop, history, _ = make_loop(model)

    await loop.run_turn("hello")

    record = history.messages[-1]
    assert record.role == "assistant" and record.text == "" and record.interrupted is not None
    assert "401" in record.interrupted.detail
    await loop.run_turn("hello again")
    roles = [m.role for m in model.requests[-1].messages]
    assert roles == ["user", "user"]  # the record is not an (empty) assistant message


async def test_a_stop_mid_stream_is_marked_as_stopped() -> None:
    import asyncio

    from test_agent_fakes import Step

    from skald.llm.types import TextDelta

    gate = asyncio.Event()
    model = ScriptedModel(Step([TextDelta("Once upon")], pause=gate, pause_after=1))
    loop, history, _ = make_loop(model)
    result = await stopped_mid_stream(loop, model, "a story")

    assert result.status == "stopped"
    kept = history.messages[-1]
    assert kept.text == "Once upon" and kept.interrupted is not None
    assert kept.interrupted.code == "stopped"
