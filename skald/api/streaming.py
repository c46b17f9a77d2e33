"""A blocking generator served as an async response body, one step per worker thread.

Rule: file downloads and ZIPs are produced by blocking generators (disk reads,
compression); `BlockingStream` runs each `next()` in a worker so the event loop never
waits on the disk, and memory stays at one chunk.

Traps:
- Litestar stops iterating a body when the client leaves but never closes the iterator;
  an abandoned generator would keep its files open until the cycle collector runs. So
  the task that iterates is watched: when it ends, however it ends, the generator is
  told to stop (`stop` event) and closed from a worker once its current step is done
  (a lock orders the two), never concurrently with it.
- Once the response has started, an error can no longer become a 4xx: `prime()` runs
  the first step (which opens what the generator reads) before the handler returns, so
  a missing or swapped folder is a clean 404/403/409 with every header. An error after
  that is logged and re-raised: the server then drops the connection, so the client
  sees a broken download instead of a complete-looking truncated one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Generator

from skald.log import get_logger

__all__ = ["BlockingStream"]

log = get_logger("skald.http")


class BlockingStream:
    """An async iterator over `steps`; empty chunks are skipped."""

    def __init__(
        self, steps: Generator[bytes, None, None], stop: threading.Event, *, what: str = "stream"
    ) -> None:
        self._steps = steps
        self._stop = stop
        self._what = what
        self._lock = threading.Lock()
        self._closed = False
        self._watched = False
        self._primed: bytes | None = None
        self._done = False

    def __aiter__(self) -> BlockingStream:
        return self

    async def prime(self) -> None:
        """Run the first step now: its errors reach the caller before any byte is sent."""
        try:
            chunk = await asyncio.to_thread(self._step)
        except BaseException:
            self.close()
            raise
        if chunk is None:
            self._done = True
        else:
            self._primed = chunk

    async def __anext__(self) -> bytes:
        if not self._watched:
            self._watched = True
            task = asyncio.current_task()
            if task is not None:
                task.add_done_callback(lambda _: self.close())
        if self._primed:
            first, self._primed = self._primed, None
            return first
        while not self._done:
            try:
                chunk = await asyncio.to_thread(self._step)
            except Exception as exc:
                # Headers are gone already: log, and let the server abort the connection.
                log.error("response stream failed", what=self._what, error=repr(exc))
                self.close()
                raise
            if chunk is None:
                break
            if chunk:
                return chunk
        self.close()
        raise StopAsyncIteration

    def _step(self) -> bytes | None:
        with self._lock:
            return None if self._closed else next(self._steps, None)

    def _close_now(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self._steps.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        try:
            asyncio.get_running_loop().run_in_executor(None, self._close_now)
        except RuntimeError:  # no loop any more: the step cannot be running either
            self._close_now()
