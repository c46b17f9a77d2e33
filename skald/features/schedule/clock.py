"""The scheduler's clock, injected: the server's is the wall clock, a test's is moved by
hand (`FakeClock.advance`), so no test ever sleeps to see a job run.

Trap: `now()` is UTC and aware; a naive datetime anywhere in the scheduler is a bug.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told; `sleep` waits until `advance` passes it."""

    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)
        self._moved = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta
        self._moved.set()

    def set(self, at: datetime) -> None:
        self._now = at.astimezone(UTC)
        self._moved.set()

    async def sleep(self, seconds: float) -> None:
        until = self._now + timedelta(seconds=seconds)
        while self._now < until:
            self._moved.clear()
            await self._moved.wait()
