"""One model call: stream the answer, collect the calls, retry once when that is safe.

Model fallback (trying another model) is the model source's business, not ours: the
caller hands the loop a client that already falls back. The loop only retries a
retriable error that happened before anything was streamed, once, after a short
backoff; after the first token a retry would show the user two different beginnings.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from skald.agent.cancel import CancelScope
from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import (
    Finished,
    Message,
    ReasoningDelta,
    Request,
    Restart,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallReady,
    Usage,
)
from skald.log import get_logger

log = get_logger("skald.agent")


@dataclass
class Reply:
    """What one model call produced so far (partial when the call was stopped)."""

    parts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish: str | None = None
    started: bool = False  # something (text or a call) arrived

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def message(self) -> Message:
        text = self.text
        return Message(
            role="assistant", content=[TextPart(text)] if text else [], tool_calls=list(self.calls)
        )


OnDelta = Callable[[str], Awaitable[None]]
OnRestart = Callable[[Restart], Awaitable[None]]


async def call_model(
    model: ModelClient,
    request: Request,
    reply: Reply,
    scope: CancelScope,
    on_delta: OnDelta,
    *,
    retries: int,
    backoff_s: float,
    on_reasoning: OnDelta | None = None,
    on_restart: OnRestart | None = None,
) -> None:
    """Fill `reply` from one model answer. Raises `LlmError` or `Stopped`."""
    attempt = 0
    while True:
        try:
            await scope.run(_stream(model, request, reply, on_delta, on_restart, on_reasoning))
            return
        except LlmError as exc:
            if not exc.retriable or reply.started or attempt >= retries:
                raise
            attempt += 1
            log.info(
                "model call failed before streaming; retrying", error=str(exc), attempt=attempt
            )
        await scope.run(asyncio.sleep(backoff_s * attempt))


async def answer(model: ModelClient, request: Request) -> Reply:
    """One model answer, whole, for a caller that shows nothing while it streams (an
    unattended system agent): no retry, no cancel scope; what a `Restart` voided is not
    in it. Raises `LlmError`."""
    reply = Reply()
    await _stream(model, request, reply, _unshown, None)
    return reply


async def _unshown(text: str) -> None:
    """Nobody watches the text stream in."""


async def _stream(
    model: ModelClient,
    request: Request,
    reply: Reply,
    on_delta: OnDelta,
    on_restart: OnRestart | None,
    on_reasoning: OnDelta | None = None,
) -> None:
    events = model.stream(request)
    try:
        async for event in events:
            if isinstance(event, Restart):
                # Another model starts over: what was streamed is void (the clients
                # were told, and replace it), and nothing of it is stored.
                reply.parts.clear()
                reply.calls.clear()
                reply.started = False
                if on_restart is not None:
                    await on_restart(event)
            elif isinstance(event, ReasoningDelta):
                # Shown live, never part of the reply (nor of what a retry replaces).
                if on_reasoning is not None:
                    await on_reasoning(event.text)
            elif isinstance(event, TextDelta):
                reply.started = True
                reply.parts.append(event.text)
                await on_delta(event.text)
            elif isinstance(event, ToolCallReady):
                reply.started = True
                reply.calls.append(event.call)
            elif isinstance(event, Finished):
                reply.finish = event.reason
                reply.usage = event.usage
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if reply.finish is None:
        raise LlmError(
            "the model's answer ended before it was complete", retriable=True, kind="interrupted"
        )


def normalise_call_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Give every call a fresh id of our own, unique and well-formed for every provider.

    Provider ids cannot be trusted to be either: some OpenAI-compatible servers send
    empty ids or `call_0` in every turn (a clash with an older call breaks the history,
    the approval inbox and recovery, which all key on the id), others use characters
    another provider rejects after a fallback. Providers only need the ids to match
    within the conversation we send, so ours serve as well as theirs.
    """
    return [
        ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=c.name, arguments=c.arguments)
        for c in calls
    ]
