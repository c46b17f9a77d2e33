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
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable

from skald.llm.client import ModelClient
from skald.llm.errors import LlmError
from skald.llm.types import Request, StreamEvent

__all__ = ["WINDOW_S", "CallPacer", "PacedClient", "Unattended"]

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


class Unattended:
    """One member's conversations whose current turn nobody watches."""

    def __init__(self) -> None:
        self._pacers: dict[str, CallPacer] = {}

    def add(self, conversation_id: str, pacer: CallPacer) -> None:
        self._pacers[conversation_id] = pacer

    def discard(self, conversation_id: str) -> None:
        self._pacers.pop(conversation_id, None)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._pacers

    def pacer(self, conversation_id: str) -> CallPacer | None:
        return self._pacers.get(conversation_id)
