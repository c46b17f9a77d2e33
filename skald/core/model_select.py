"""AUTO model selection and fallback across models.

AUTO walks the enabled models of the wanted strength in priority order, then the other
strengths nearest first. A model that just failed with a retriable error rests for a
while so every request does not pay for its timeout again. A failure before anything
was streamed falls back silently. A failure after text was streamed, but before any
tool call, falls back too: the client first gets `Restart` (the text so far is void;
the reader drops it and tells the member which model continues), never a splice of
two answers. After a tool call, or on the last candidate, the failure is raised.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from skald.llm.client import ModelClient
from skald.llm.errors import LlmError, every_model_failed
from skald.llm.tokens import completed
from skald.llm.types import (
    Finished,
    ImagePart,
    Message,
    Request,
    Restart,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallReady,
    Usage,
)
from skald.store.llm import ModelKind, ModelRow, Strength

_NEAREST: dict[str, tuple[Strength, ...]] = {
    "low": ("low", "average", "high"),
    "average": ("average", "high", "low"),
    "high": ("high", "average", "low"),
}
REST_S = 60.0


@dataclass
class ModelHealth:
    """Which models failed recently (in memory; a restart gives everyone a new chance)."""

    clock: Callable[[], float] = time.monotonic
    _resting_until: dict[str, float] = field(default_factory=dict)

    def failed(self, model_id: str) -> None:
        self._resting_until[model_id] = self.clock() + REST_S

    def succeeded(self, model_id: str) -> None:
        self._resting_until.pop(model_id, None)

    def healthy(self, model_id: str) -> bool:
        return self._resting_until.get(model_id, 0.0) <= self.clock()


def auto_order(
    models: Sequence[ModelRow],
    strength: Strength,
    health: ModelHealth,
    needs: Sequence[str] = (),
    kind: ModelKind = "chat",
) -> list[ModelRow]:
    """The enabled models of one kind that have `needs`, in the order AUTO tries them."""
    usable = [
        m
        for m in models
        if m.enabled and m.kind == kind and all(n in m.capabilities for n in needs)
    ]
    ordered = [
        m
        for s in _NEAREST[strength]
        for m in sorted((m for m in usable if m.strength == s), key=lambda m: (m.priority, m.name))
    ]
    # Resting models go last rather than away: better a slow answer than none.
    return [m for m in ordered if health.healthy(m.id)] + [
        m for m in ordered if not health.healthy(m.id)
    ]


RequestOutcome = Literal["finished", "stopped", "failed"]


@dataclass(frozen=True)
class Outcome:
    """How one request to one model ended, with the tokens it cost (reported by the
    server, or estimated from the request and what was streamed)."""

    model: ModelRow
    outcome: RequestOutcome
    error: LlmError | None
    started: float
    usage: Usage
    # What was sent and what came back (for a member's opt-in request log; never
    # written anywhere else): the request as handed to the provider's client.
    request: Request | None = None
    text: str = ""
    calls: tuple[ToolCall, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == "finished"


OnOutcome = Callable[[Outcome], Awaitable[None]]


class FallbackClient:
    """A ModelClient over several candidate models, tried in order.

    Every request to a candidate is reported exactly once (`on_outcome`): finished,
    failed, or stopped when the consumer stops reading (a `/stop`, a cancelled turn).
    """

    def __init__(
        self,
        candidates: Sequence[tuple[ModelRow, ModelClient]],
        health: ModelHealth,
        on_outcome: OnOutcome | None = None,
    ) -> None:
        if not candidates:
            raise LlmError(
                "no language model is set up yet: an administrator can add one under Models",
                retriable=False,
                kind="no_model",
            )
        self.candidates = list(candidates)
        self.health = health
        self.on_outcome = on_outcome
        self.last_model: ModelRow | None = None

    async def _report(
        self,
        model: ModelRow,
        outcome: RequestOutcome,
        error: LlmError | None,
        started: float,
        usage: Usage,
        sent: Request,
        text: list[str],
        calls: list[ToolCall],
    ) -> None:
        if self.on_outcome is not None:
            ended = Outcome(
                model, outcome, error, started, usage, sent, "".join(text), tuple(calls)
            )
            # Shielded: a stop cancels the reading task, and the record must still land.
            await asyncio.shield(self.on_outcome(ended))

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        last_error: LlmError | None = None
        for index, (model, client) in enumerate(self.candidates):
            following = self.candidates[index + 1 :]
            restart: Restart | None = None
            sent = _with_model(request, model)
            started = time.monotonic()
            yielded = False
            text: list[str] = []
            calls: list[ToolCall] = []
            reported = False
            try:
                async for event in client.stream(sent):
                    yielded = True
                    self.last_model = model
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, ToolCallReady):
                        calls.append(event.call)
                    elif isinstance(event, Finished):
                        self.health.succeeded(model.id)
                        usage = completed(event.usage, sent, "".join(text), calls)
                        event = Finished(reason=event.reason, usage=usage)
                        reported = True
                        await self._report(
                            model, "finished", None, started, usage, sent, text, calls
                        )
                    yield event
                return
            except LlmError as exc:
                reported = True
                # Refused before anything came (a bad key, an overload): no work was done.
                usage = completed(None, sent, "".join(text), calls) if yielded else Usage()
                await self._report(model, "failed", exc, started, usage, sent, text, calls)
                # After the answer began, only text may be thrown away: a call may
                # already be stored and running, and a last candidate has no successor.
                if not exc.retriable or (yielded and (calls or not following)):
                    raise
                self.health.failed(model.id)
                last_error = exc
                if yielded:
                    restart = Restart(reason=str(exc), model=following[0][0].name, usage=usage)
            finally:
                if not reported:  # the reader stopped (or something unexpected broke)
                    usage = completed(None, sent, "".join(text), calls)
                    await self._report(model, "stopped", None, started, usage, sent, text, calls)
            if restart is not None:
                yield restart  # the reader drops what it has; the next model starts over
        assert last_error is not None
        raise every_model_failed(last_error)


def _with_model(request: Request, model: ModelRow) -> Request:
    """The request as this candidate gets it: its wire id, its own longest answer
    (`max_output_tokens`) when the catalogue knows it, else the caller's default, and no
    tools for a model not marked able to use them (a fallback in a turn that has them:
    many local servers reject or garble a tools list the model cannot handle), and no
    pictures in tool results for a model not marked `vision` (a note says so)."""
    return Request(
        model=model.model,
        messages=request.messages if "vision" in model.capabilities else _unseen(request.messages),
        tools=request.tools if "tools" in model.capabilities else [],
        max_tokens=model.max_output_tokens or request.max_tokens,
        temperature=request.temperature,
    )


TOOL_PICTURE_NOT_SEEN = (
    "[a picture the tool returned: not shown to you, the model in use cannot see pictures]"
)


def _unseen(messages: list[Message]) -> list[Message]:
    """Tool results' pictures replaced by a note (a user's picture already chose a vision
    model for the turn: `needs=("vision",)`)."""
    out = []
    for m in messages:
        if m.role == "tool" and any(isinstance(p, ImagePart) for p in m.content):
            parts = [
                TextPart(TOOL_PICTURE_NOT_SEEN) if isinstance(p, ImagePart) else p
                for p in m.content
            ]
            m = msgspec.structs.replace(m, content=parts)
        out.append(m)
    return out


# Of a model's context window, what the prompt may fill before compaction: the rest is
# its answer, and the estimate (characters / 4) is rough.
COMPACT_SHARE = 0.8


def compact_threshold(
    models: Sequence[ModelRow], default_output: int, configured: int | None
) -> int | None:
    """Prompt tokens at which to compact, for a turn that may use any of `models`:
    the smallest known window, less the answer's room, times COMPACT_SHARE; the
    configured threshold when it is lower (or when no window is known)."""
    room = [
        int((m.context_window - (m.max_output_tokens or default_output)) * COMPACT_SHARE)
        for m in models
        if m.context_window
    ]
    limits = [x for x in (*room, configured) if x is not None and x > 0]
    return min(limits) if limits else None
