"""`/stop` that reaches every level: a tree of cancellation scopes.

A turn owns one `CancelScope`; tools, approval waits and sub-agents get it (or a child of
it) through their context. Cancelling a scope cancels all its descendants, and a scope
created under a cancelled parent is born cancelled, so a stop is "sticky" for the whole
tree. `run()` races any awaitable against the scope: the awaited work is cancelled (and
given a moment to clean up) and the caller gets `Stopped`, a plain exception it can
handle, never a stray `CancelledError`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable
from typing import TypeVar

from skald.log import get_logger

T = TypeVar("T")

log = get_logger("skald.agent")

# How long stopped work may take to unwind (kill a process, close a stream) before it
# is abandoned with a warning.
DEFAULT_GRACE_S = 5.0


class Stopped(Exception):
    """The scope was cancelled while the caller waited on it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelScope:
    def __init__(
        self, parent: CancelScope | None = None, *, grace_s: float = DEFAULT_GRACE_S
    ) -> None:
        self._event = asyncio.Event()
        self._reason: str | None = None
        self._children: weakref.WeakSet[CancelScope] = weakref.WeakSet()
        self.grace_s = grace_s
        if parent is not None:
            if parent._reason is not None:
                self.cancel(parent._reason)
            else:
                parent._children.add(self)

    def child(self) -> CancelScope:
        return CancelScope(self, grace_s=self.grace_s)

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str:
        return self._reason or ""

    def cancel(self, reason: str = "stopped") -> None:
        """Cancel this scope and every scope below it. Idempotent; the first reason wins."""
        if self._reason is not None:
            return
        self._reason = reason
        self._event.set()
        for child in list(self._children):
            child.cancel(reason)

    def check(self) -> None:
        if self._reason is not None:
            raise Stopped(self._reason)

    async def wait(self) -> None:
        await self._event.wait()

    async def run(self, work: Awaitable[T]) -> T:
        """Await `work`, or cancel it and raise `Stopped` as soon as the scope is cancelled.

        If the caller itself is cancelled (a hard shutdown), the work is cancelled too and
        the `CancelledError` propagates unchanged.
        """
        if self._reason is not None:
            _discard(work)
            raise Stopped(self._reason)
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            stop.cancel()
            await _unwind(task, self.grace_s)
            raise
        stop.cancel()
        if not task.done():
            await _unwind(task, self.grace_s)
            raise Stopped(self.reason)
        if task.cancelled():
            # Cancelled from elsewhere (not by us, not by our caller): not a hard stop.
            raise (
                Stopped(self.reason)
                if self.cancelled
                else RuntimeError("the operation was cancelled")
            )
        return task.result()


async def _unwind(task: asyncio.Future[T], grace_s: float) -> None:
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=grace_s)
    if not done:
        log.warning("stopped work did not finish unwinding in time", grace_s=grace_s)
        return
    if not task.cancelled() and task.exception() is not None:
        log.debug("stopped work raised while unwinding", error=repr(task.exception()))


def _discard(work: Awaitable[object]) -> None:
    """Drop work that will never be awaited (and avoid the "never awaited" warning)."""
    if asyncio.iscoroutine(work):
        work.close()
    elif isinstance(work, asyncio.Future):
        work.cancel()
