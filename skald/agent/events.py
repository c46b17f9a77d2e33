"""What the loop tells the outside world while a turn runs.

Every event is a msgspec struct in one tagged union (`Event`, tag field `type`), carrying
the conversation it belongs to and its depth (0 for the conversation itself, 1.. for
sub-agents, whose events reach the same sink under their own conversation id). The
sink is a plain callable, sync or async; it must not block for long (drop token deltas
rather than apply backpressure). A sink that raises is logged and ignored: losing an
event must never break a turn.

The authoritative state is the history store, not the events: a client that missed
events reloads the history.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypedDict

import msgspec

from skald.llm.types import ToolCall, Usage
from skald.log import get_logger

log = get_logger("skald.agent")

CallStatus = Literal[
    "pending", "awaiting_approval", "running", "done", "error", "denied", "interrupted"
]
TurnStatus = Literal["done", "failed", "stopped", "awaiting_approval"]


class AgentEvent(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    depth: int = 0


class TurnStarted(AgentEvent, frozen=True, tag="turn_started"):
    resumed: bool = False  # True when recovery continues an interrupted turn


class TokenDelta(AgentEvent, frozen=True, tag="token_delta"):
    text: str


class ReasoningStreamed(AgentEvent, frozen=True, tag="reasoning_delta"):
    """Reasoning the model streams before its answer: live only (never stored)."""

    text: str


class ToolCallUpdate(AgentEvent, frozen=True, tag="tool_call"):
    call_id: str
    name: str
    arguments: dict[str, Any]
    status: CallStatus


class ToolOutput(AgentEvent, frozen=True, tag="tool_output"):
    """A chunk of output a running tool streams (command output, progress)."""

    call_id: str
    chunk: str


class ToolFinished(AgentEvent, frozen=True, tag="tool_result"):
    call_id: str
    name: str
    status: CallStatus  # done, error, denied or interrupted
    content: str
    is_error: bool
    metadata: dict[str, Any] | None = None


class ApprovalRequested(AgentEvent, frozen=True, tag="approval_requested"):
    call_id: str
    name: str
    arguments: dict[str, Any]
    kind: str
    reason: str = ""


class UsageReport(AgentEvent, frozen=True, tag="usage"):
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None
    estimated: bool = False  # a count is an estimate (stopped, failed, or not reported)


class ModelSwitched(AgentEvent, frozen=True, tag="model_switched"):
    """The answer being streamed broke off and another model starts it over: clients
    drop the text shown so far for this answer."""

    model: str  # the household's name of the model that continues
    reason: str  # technical (consumers show it only to those who manage models)


class Compacted(AgentEvent, frozen=True, tag="compacted"):
    dropped: int  # messages replaced by the summary
    kept: int


class SubagentStarted(AgentEvent, frozen=True, tag="subagent_started"):
    call_id: str  # the parent's execute_task call
    child_conversation_id: str
    agent: str | None = None


class SubagentFinished(AgentEvent, frozen=True, tag="subagent_finished"):
    call_id: str
    child_conversation_id: str
    status: TurnStatus
    error: str | None = None


class TurnDone(AgentEvent, frozen=True, tag="turn_done"):
    status: TurnStatus
    error: str | None = None
    error_code: str | None = None  # failed: the kind of failure (skald.llm.errors codes)
    # Set by a consumer that replaces `error` with a plain sentence: the technical text.
    error_detail: str | None = None
    text: str = ""  # the final assistant text (streamed already as token deltas)
    rounds: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


Event = (
    TurnStarted
    | TokenDelta
    | ReasoningStreamed
    | ToolCallUpdate
    | ToolOutput
    | ToolFinished
    | ApprovalRequested
    | UsageReport
    | ModelSwitched
    | Compacted
    | SubagentStarted
    | SubagentFinished
    | TurnDone
)

EventSink = Callable[[Event], Awaitable[None] | None]


async def deliver(sink: EventSink, event: Event) -> None:
    """Hand one event to the sink; a failing sink is logged, never propagated."""
    try:
        result = sink(event)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("agent event sink failed", event_type=type(event).__name__)


class Emitter:
    """The sink bound to one conversation and depth, with one method per event."""

    def __init__(self, sink: EventSink, conversation_id: str, depth: int) -> None:
        self.sink = sink
        self.conversation_id = conversation_id
        self.depth = depth

    async def turn_started(self, *, resumed: bool) -> None:
        await self._send(TurnStarted(**self._base(), resumed=resumed))

    async def token(self, text: str) -> None:
        await self._send(TokenDelta(**self._base(), text=text))

    async def reasoning(self, text: str) -> None:
        await self._send(ReasoningStreamed(**self._base(), text=text))

    async def call(self, call: ToolCall, status: CallStatus) -> None:
        await self._send(
            ToolCallUpdate(
                **self._of_call(call),
                arguments=call.arguments,
                status=status,
            )
        )

    async def result(
        self,
        call: ToolCall,
        status: CallStatus,
        content: str,
        is_error: bool,
        metadata: dict[str, Any] | None,
    ) -> None:
        await self._send(
            ToolFinished(
                **self._of_call(call),
                status=status,
                content=content,
                is_error=is_error,
                metadata=metadata,
            )
        )

    async def approval(self, call: ToolCall, kind: str, reason: str) -> None:
        await self._send(
            ApprovalRequested(
                **self._of_call(call),
                arguments=call.arguments,
                kind=kind,
                reason=reason,
            )
        )

    async def usage(self, model: str, usage: Usage) -> None:
        await self._send(
            UsageReport(
                **self._base(),
                model=model,
                **_counts(usage),
                estimated=usage.estimated,
            )
        )

    async def switched(self, model: str, reason: str) -> None:
        await self._send(ModelSwitched(**self._base(), model=model, reason=reason))

    async def compacted(self, dropped: int, kept: int) -> None:
        await self._send(Compacted(**self._base(), dropped=dropped, kept=kept))

    async def turn_done(
        self,
        status: TurnStatus,
        *,
        error: str | None,
        text: str,
        rounds: int,
        usage: Usage,
        error_code: str | None = None,
    ) -> None:
        await self._send(
            TurnDone(
                **self._base(),
                status=status,
                error=error,
                error_code=error_code,
                text=text,
                rounds=rounds,
                **_counts(usage),
            )
        )

    def _base(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "depth": self.depth}

    def _of_call(self, call: ToolCall) -> dict[str, Any]:
        # What every event about one call carries: where, and which call.
        return {**self._base(), "call_id": call.id, "name": call.name}

    async def _send(self, event: Event) -> None:
        await deliver(self.sink, event)


class _Counts(TypedDict):
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def _counts(usage: Usage) -> _Counts:
    # What every event reporting a model's usage carries (an estimate says so apart);
    # typed, so mypy checks the keys against each event's fields.
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
    }
