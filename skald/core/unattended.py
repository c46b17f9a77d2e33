"""Conversations nobody watches (a scheduled job's run, a background task), and the pace
of the model calls made there.

Rule: a run puts its conversation in the member's `Unattended` together with the
member's `CallPacer`, for as long as its turn lasts. There the unattended gate decides
every call (a Require is refused at once), and every model request of the turn (its
rounds, its compaction, its helpers) passes `CallPacer.take` first: `UserRuntime`
wraps the model source in a `PacedClient` at the one place turns and helpers get one
(`model_for`). Over the member's per-minute limit the request fails with an `LlmError`
of kind `background_limit`, which is not retried: the run ends failed with that
sentence, the model is not asked again.

Trap: the pacer belongs to the member, not to one run: ten jobs running at once share
one budget. Its owner (the scheduler) keeps one per member for the server's life, so a
lock and unlock does not reset it.

Background work that may ask (a scheduled job's run, a background task) is added with an
`Asking`: there the member's own gate decides, so a Require waits in their Inbox like a
chat's, labelled with the job or task (`Origin`) and with a deadline the `Asking` keeps
(`requested`); a decision made through `UserRuntime.decide` is handed to it (`decided`).
Without an `Asking` (system agents) the unattended gate still refuses at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Literal, Protocol

import msgspec

from skald.agent.approval import ApprovalRequest
from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import Request, StreamEvent

__all__ = ["WINDOW_S", "Asking", "CallPacer", "Origin", "PacedClient", "Unattended"]

WINDOW_S = 60.0


class CallPacer:
    """At most `per_minute` model requests in any 60 s (a sliding window)."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._times: deque[float] = deque()

    def take(self) -> None:
        """Count one request, or refuse it (LlmError `background_limit`)."""
        now = self._clock()
        while self._times and self._times[0] <= now - WINDOW_S:
            self._times.popleft()
        if len(self._times) >= self.per_minute:
            raise LlmError(
                f"scheduled jobs and background tasks may ask the model at most "
                f"{self.per_minute} times a minute for each member, and this member's "
                "reached that: this run stops here, the next one starts afresh",
                retriable=False,
                kind="background_limit",
            )
        self._times.append(now)


class PacedClient:
    """A model source whose every request passes the pacer first."""

    def __init__(self, inner: ModelClient, pacer: CallPacer) -> None:
        self.inner = inner
        self.pacer = pacer

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.pacer.take()
        async for event in self.inner.stream(request):
            yield event


class Origin(msgspec.Struct, frozen=True, kw_only=True):
    """What an Inbox item of background work says it comes from, and until when it waits."""

    kind: Literal["scheduled", "task"]
    title: str
    expires_at: str  # ISO UTC


class Asking(Protocol):
    """A background run that lets its approval requests wait for the member."""

    async def requested(self, request: ApprovalRequest) -> Origin:
        """The gate asks the member (first time, or again on recovery): mark the run as
        waiting, keep the deadline; the answer labels the Inbox item."""
        ...

    async def decided(self, call_id: str, tool: str, approved: bool, reason: str) -> None:
        """The member (or the deadline) decided one of this run's requests."""
        ...


class Unattended:
    """One member's conversations whose current turn nobody watches."""

    def __init__(self) -> None:
        self._pacers: dict[str, CallPacer] = {}
        self._asking: dict[str, Asking] = {}

    def add(self, conversation_id: str, pacer: CallPacer, asking: Asking | None = None) -> None:
        """`asking`: approval requests wait in the Inbox; None: refused at once."""
        self._pacers[conversation_id] = pacer
        if asking is None:
            self._asking.pop(conversation_id, None)
        else:
            self._asking[conversation_id] = asking

    def discard(self, conversation_id: str) -> None:
        self._pacers.pop(conversation_id, None)
        self._asking.pop(conversation_id, None)

    def asking(self, conversation_id: str) -> Asking | None:
        return self._asking.get(conversation_id)

    def refuses(self, conversation_id: str) -> bool:
        """Whether the unattended gate (every Require refused at once) decides here."""
        return conversation_id in self._pacers and conversation_id not in self._asking

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._pacers

    def pacer(self, conversation_id: str) -> CallPacer | None:
        return self._pacers.get(conversation_id)
