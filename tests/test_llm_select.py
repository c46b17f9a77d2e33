"""AUTO ordering and fallback: retriable errors move on, others stop, streamed text stays."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from skald.core.model_select import FallbackClient, ModelHealth, Outcome, auto_order
from skald.llm.errors import LlmError, error_for_status
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
from skald.store.llm import ModelRow, Strength


def _m(
    mid: str, strength: Strength, priority: int, enabled: bool = True, caps: list[str] | None = None
) -> ModelRow:
    return ModelRow(
        id=mid,
        provider_id="p",
        model=f"wire-{mid}",
        name=mid,
        strength=strength,
        capabilities=caps or ["tools"],
        priority=priority,
        enabled=enabled,  # type: ignore[arg-type]
        created_at="t",
        updated_at="t",
    )


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_auto_order_prefers_strength_then_priority_and_rests_failures() -> None:
    models = [
        _m("a2", "average", 2),
        _m("h1", "high", 1),
        _m("a1", "average", 1),
        _m("l1", "low", 1),
        _m("off", "average", 0, enabled=False),
    ]
    clock = Clock()
    health = ModelHealth(clock)
    assert [m.id for m in auto_order(models, "average", health)] == ["a1", "a2", "h1", "l1"]
    assert [m.id for m in auto_order(models, "low", health)] == ["l1", "a1", "a2", "h1"]
    health.failed("a1")
    assert [m.id for m in auto_order(models, "average", health)] == ["a2", "h1", "l1", "a1"]
    clock.now += 61
    assert auto_order(models, "average", health)[0].id == "a1"
    vision = [_m("v", "high", 5, caps=["vision", "tools"]), *models]
    assert [m.id for m in auto_order(vision, "average", health, needs=["vision"])] == ["v"]


class Scripted:
    def __init__(
        self, error: LlmError | None = None, after_text: bool = False, after_call: bool = False
    ) -> None:
        self.error = error
        self.after_text = after_text or after_call
        self.after_call = after_call
        self.seen: list[str] = []

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.seen.append(request.model)
        if self.error and not self.after_text:
            raise self.error
        yield TextDelta("hello")
        if self.after_call:
            yield ToolCallReady(ToolCall(id="c", name="note", arguments={}))
        if self.error:
            raise self.error
        yield Finished(reason="stop", usage=Usage(input_tokens=3, output_tokens=1))


async def _collect(client: FallbackClient) -> list[StreamEvent]:
    return [e async for e in client.stream(Request(model="auto", messages=[]))]


async def test_falls_back_on_503_and_not_on_401() -> None:
    a, b = Scripted(error_for_status(503, "A", "overloaded")), Scripted()
    outcomes: list[Outcome] = []

    async def record(o: Outcome) -> None:
        outcomes.append(o)

    health = ModelHealth()
    client = FallbackClient(
        [(_m("a", "average", 1), a), (_m("b", "average", 2), b)], health, record
    )
    events = await _collect(client)
    assert events[0] == TextDelta("hello") and a.seen == ["wire-a"] and b.seen == ["wire-b"]
    assert [(o.model.id, o.ok) for o in outcomes] == [("a", False), ("b", True)]
    assert not health.healthy("a") and client.last_model is not None and client.last_model.id == "b"

    c, d = Scripted(error_for_status(401, "C", "bad key")), Scripted()
    client = FallbackClient([(_m("c", "average", 1), c), (_m("d", "average", 2), d)], ModelHealth())
    with pytest.raises(LlmError) as exc:
        await _collect(client)
    assert exc.value.status == 401 and not exc.value.retriable and d.seen == []


async def test_a_failure_after_text_starts_over_on_the_next_model_with_a_restart() -> None:
    a, b = Scripted(error_for_status(503, "A", "gone"), after_text=True), Scripted()
    client = FallbackClient([(_m("a", "average", 1), a), (_m("b", "average", 2), b)], ModelHealth())
    events = await _collect(client)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["TextDelta", "Restart", "TextDelta", "Finished"]
    restart = events[1]
    assert isinstance(restart, Restart) and restart.model == "b" and "503" in restart.reason
    assert restart.usage.output_tokens > 0 and restart.usage.estimated


async def test_no_fallback_once_a_call_was_streamed_or_on_the_last_model() -> None:
    a, b = Scripted(error_for_status(503, "A", "gone"), after_call=True), Scripted()
    client = FallbackClient([(_m("a", "average", 1), a), (_m("b", "average", 2), b)], ModelHealth())
    with pytest.raises(LlmError):
        await _collect(client)
    assert b.seen == []
    last = Scripted(error_for_status(503, "A", "gone"), after_text=True)
    with pytest.raises(LlmError, match="gone"):
        await _collect(FallbackClient([(_m("a", "average", 1), last)], ModelHealth()))


async def test_all_failing_says_so_and_no_models_is_a_clear_error() -> None:
    a = Scripted(LlmError("network down", retriable=True))
    client = FallbackClient([(_m("a", "average", 1), a)], ModelHealth())
    with pytest.raises(LlmError, match="every model failed"):
        await _collect(client)
    with pytest.raises(LlmError, match="no language model"):
        FallbackClient([], ModelHealth())
