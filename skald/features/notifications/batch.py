"""Batching: items added for one key within a window are handed over in one call.

The first item for a key opens its window (`window` seconds); everything added until it
closes goes out with it, in order, each item once. An item added while a batch is being
handed over opens the next window. `sleep` is injectable so tests move time by hand
(never by sleeping).

Trap: a failing flush is logged and its items dropped from the batcher only; callers
that must not lose them keep them durably (the notification rows stay held).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from skald.log import get_logger

__all__ = ["Batcher"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T", bound=Hashable)

log = get_logger("skald.features.notifications.batch")


class Batcher(Generic[K, T]):
    def __init__(
        self,
        flush: Callable[[K, list[T]], Awaitable[None]],
        window: float,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._flush = flush
        self.window = window
        self._sleep = sleep
        self._pending: dict[K, dict[T, None]] = {}
        self._timers: dict[K, asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()

    def add(self, key: K, item: T) -> None:
        self._pending.setdefault(key, {})[item] = None
        if key not in self._timers:
            task = asyncio.get_running_loop().create_task(self._wait_then_flush(key))
            self._timers[key] = task
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def pending(self, key: K) -> list[T]:
        return list(self._pending.get(key, ()))

    async def _wait_then_flush(self, key: K) -> None:
        try:
            await self._sleep(self.window)
        finally:
            self._timers.pop(key, None)
        await self._hand_over(key)

    async def _hand_over(self, key: K) -> None:
        items = list(self._pending.pop(key, {}))
        if not items:
            return
        try:
            await self._flush(key, items)
        except Exception:
            log.exception("a batch could not be delivered", items=len(items))

    async def flush_now(self) -> None:
        """Hand over every open batch at once (shutdown, tests)."""
        for key, timer in list(self._timers.items()):
            timer.cancel()
            self._timers.pop(key, None)
        for key in list(self._pending):
            await self._hand_over(key)
        await self.wait()

    async def wait(self) -> None:
        """Until every batch handed over so far has been delivered."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._running):
            task.cancel()
        for task in list(self._running):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._pending.clear()
        self._timers.clear()
