"""The key-derivation pool: where the server runs every Argon2id (and recovery-code)
derivation.

Rule: a derivation at the default cost holds 256 MiB and two cores for about 0.3 s, so
it never runs on the default executor (which serves file and database work: a login
storm there starves every other member) and never without a bound. The pool has
`workers` threads of its own, and admits at most `workers + queue` derivations at once;
one more is refused at once with `KdfBusyError` (503 with Retry-After) instead of
waiting. Memory therefore stays under `workers x memory_kib` above the idle server,
whatever the number of sign-ins in flight. Callers on a trusted path (a browser with a
device cookie, a signed-in member, an administrator) may use `workers` more slots, so a
flood of strangers cannot refuse them.

Traps: the threads run at a lower CPU priority (nice +10; on Linux a thread's own
attribute, inherited by the lane threads libargon2 starts), so the event loop keeps its
core during a storm and a derivation takes longer on a busy machine. The admission count
is taken and given back on the event loop thread only (no await between the check and
the increment). Turns are handed out here, trusted callers first, so the executor
never holds a queue of its own (its FIFO would put a known browser behind every
stranger). A caller that leaves while its derivation runs frees the slot only when the
derivation really ends: the memory is held until then.

Imitations (`imitate`): a sign-in for a name that does not exist must take as long as a
wrong password, and answer 503 exactly when a real check would, but needs no Argon2
memory. It is admitted like a derivation (the same count, limit and turn), and holds its
turn for a duration drawn from a running sample of real checks (`Durations`: the last
64, fed by `run(..., sample=)`), then gives it back as a finished derivation would. Trap:
with an empty sample there is nothing to draw from, so the imitation does the real
derivation once (and feeds the sample); a cancelled imitation keeps its slot until its
drawn end, as a running derivation keeps its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, TypeVar

from skald.errors import RetryLaterError

T = TypeVar("T")

KDF_NICE = 10
SAMPLE_SIZE = 64
# Until a derivation has been timed, assume the default cost on a slow machine.
INITIAL_ESTIMATE_S = 0.5

_trusted: ContextVar[bool] = ContextVar("skald_kdf_trusted", default=False)


class KdfBusyError(RetryLaterError):
    """Too many password checks are running or waiting; nothing was tried."""

    code = "busy"

    def __init__(self, retry_after: float) -> None:
        super().__init__("the server is busy checking other sign-ins", retry_after)


def _lower_priority() -> None:
    # Per thread on Linux (NPTL): only this worker (and the threads it starts) yields.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), KDF_NICE)


@contextlib.contextmanager
def trusted() -> Iterator[None]:
    """Mark the derivations of this block as coming from a trusted path (see module doc)."""
    token = _trusted.set(True)
    try:
        yield
    finally:
        _trusted.reset(token)


class Durations:
    """A running sample of how long real checks took (seconds; the last SAMPLE_SIZE)."""

    def __init__(self, size: int = SAMPLE_SIZE) -> None:
        self._values: deque[float] = deque(maxlen=size)
        self._random = random.SystemRandom()

    def __len__(self) -> int:
        return len(self._values)

    def add(self, seconds: float) -> None:
        self._values.append(seconds)

    def values(self) -> tuple[float, ...]:
        return tuple(self._values)

    def draw(self) -> float | None:
        """One of the measured durations at random, or None before the first."""
        return self._random.choice(self._values) if self._values else None


class KdfPool:
    def __init__(
        self,
        workers: int = 2,
        queue: int = 8,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if workers < 1 or queue < 0:
            raise ValueError("a KDF pool needs at least one worker and a queue of >= 0")
        self.workers = workers
        self.capacity = workers + queue
        self.reserve = workers
        self.admitted = 0  # running or waiting
        self.running = 0
        self._waiting: dict[bool, deque[asyncio.Future[None]]] = {True: deque(), False: deque()}
        self._estimate_s = INITIAL_ESTIMATE_S
        self._sleep = sleep  # an imitation's wait (tests record it)
        self.derivations = 0  # real derivations finished (status, tests)
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="skald-kdf", initializer=_lower_priority
        )

    def _retry_after(self) -> float:
        return self._estimate_s * (self.admitted + 1) / self.workers

    async def _admit(self) -> None:
        """Count this caller in and wait for its turn, or KdfBusyError at once."""
        is_trusted = _trusted.get()
        limit = self.capacity + (self.reserve if is_trusted else 0)
        if self.admitted >= limit:
            raise KdfBusyError(self._retry_after())
        self.admitted += 1
        try:
            await self._start_turn(is_trusted)
        except BaseException:
            self.admitted -= 1
            raise

    async def run(self, fn: Callable[..., T], *args: Any, sample: Durations | None = None) -> T:
        """Run `fn(*args)` on a pool thread, or raise KdfBusyError when the pool is full.

        Waiting callers start in order, trusted ones first, so a known browser waits at
        most for the derivations already running, not for a queue of strangers. With
        `sample`, the derivation's duration is added to it."""
        await self._admit()
        loop = asyncio.get_running_loop()
        timing: list[float] = []

        def timed() -> T:
            started = time.monotonic()
            try:
                return fn(*args)
            finally:
                timing.append(time.monotonic() - started)

        def finished(_: object) -> None:
            elapsed = timing[0] if timing else None
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(self._done, elapsed, sample)

        try:
            job = self._executor.submit(timed)
        except BaseException:
            self._done(None)
            raise
        # The slot is freed when the derivation really ends, even if the caller left.
        job.add_done_callback(finished)
        return await asyncio.wrap_future(job)

    async def imitate(self, sample: Durations, calibrate: Callable[[], object]) -> None:
        """Cost what a real check costs in time and admission, without its memory.

        Admitted and turned exactly like `run`; holds the turn for a duration drawn from
        `sample`. `calibrate` is the real check, run (and sampled) only while `sample`
        is empty."""
        if not len(sample):
            await self.run(calibrate, sample=sample)
            return
        await self._admit()
        loop = asyncio.get_running_loop()
        duration = sample.draw() or 0.0
        end = loop.time() + duration
        try:
            await self._sleep(duration)
        except BaseException:
            # Like a derivation whose caller left: the slot is held until its end.
            loop.call_later(max(0.0, end - loop.time()), self._done, None)
            raise
        self._done(None)

    async def _start_turn(self, is_trusted: bool) -> None:
        if self.running < self.workers and not any(self._waiting.values()):
            self.running += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[is_trusted].append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._next_turn()  # granted just as we left: pass it on
            else:
                self._waiting[is_trusted].remove(turn)
            raise

    def _next_turn(self) -> None:
        self.running -= 1
        for queue in (self._waiting[True], self._waiting[False]):
            while queue:
                turn = queue.popleft()
                if not turn.done():
                    self.running += 1
                    turn.set_result(None)
                    return

    def _done(self, elapsed: float | None, sample: Durations | None = None) -> None:
        self.admitted -= 1
        self._next_turn()
        if elapsed is not None:
            self.derivations += 1
            self._estimate_s = 0.8 * self._estimate_s + 0.2 * elapsed
            if sample is not None:
                sample.add(elapsed)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
