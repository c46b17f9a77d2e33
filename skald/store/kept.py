"""Reads kept between requests and turns while nothing can have changed what they read.

Rule: an answer is kept while no row of the tables it came from was written through
this process's connection (a `WriteCount`: SQLite's pre-update hook counts every
writer, a foreign key's cascade included, on the database thread before the writer's
`await` returns) and for at most `max_age` seconds. The count is taken before the read
is sent, so a write that lands while the read is on its way makes the answer stale at
once, whichever of the two the thread runs first. That keeps revocation synchronous: the
request or turn after a role edit, a deactivation or a switched-off plugin reads again.

Traps:
- `tables` must name every table the read touches (joins and helpers included); a
  table left out is kept past its writes. Each user of this class lists its tables next
  to the read and a test writes to each one.
- Another process's writes (the CLI's, on its own connection) are not counted: the age
  bound is what covers them, so keep it to a couple of seconds.
- One `KeptReads` per kind of read, made once for the database's life (each registers a
  count with the database for as long as it is open).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import KW_ONLY, dataclass, field
from typing import Generic, NamedTuple, TypeVar

import apsw

from skald.store.database import Database, WriteCount

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# How long an answer may be kept at most: the bound on another process's writes.
KEPT_S = 2.0
# Answers kept at most; past it the oldest goes first (insertion order).
KEPT_MAX = 1024


class Before(NamedTuple):
    """Taken before a read is sent (`KeptReads.before`): the count and the time."""

    writes: int
    at: float


class _Kept(NamedTuple, Generic[T]):
    writes: int  # the WriteCount's value before the read was sent
    at: float
    value: T


@dataclass(eq=False)
class KeptReads(Generic[K, T]):
    """One kind of read on `db`, its answers kept by key (see the module's rule).
    `keep`: which answers may be kept (an unknown session token's `None` is not)."""

    db: Database
    tables: frozenset[str]
    _: KW_ONLY
    max_age: float = KEPT_S
    max_entries: int = KEPT_MAX
    clock: Callable[[], float] = time.monotonic
    keep: Callable[[T], bool] = lambda _: True
    _writes: WriteCount = field(init=False)
    _kept: dict[K, _Kept[T]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._writes = self.db.count_writes(self.tables)

    def keys(self) -> list[K]:
        """The keys kept now, oldest first (tests, and what `forget` may drop)."""
        return list(self._kept)

    def forget(self, key: K) -> None:
        self._kept.pop(key, None)

    async def get(self, key: K, read: Callable[[apsw.Connection], T]) -> T:
        """The kept answer for `key` while it is good, else `read`'s, in one trip."""
        kept = self._good(key)
        if kept is not None:
            return kept.value
        before = self.before()  # see the module's rule
        value = await self.db.call(read)
        self.put(key, value, before)
        return value

    def kept(self, key: K) -> tuple[T] | None:
        """The kept answer for `key` (in a 1-tuple) while it is good, else None: for a
        caller whose read is part of a larger trip (it then `put`s what it read)."""
        kept = self._good(key)
        return None if kept is None else (kept.value,)

    def before(self) -> Before:
        """What to `put` an answer with: taken before its read is sent."""
        return Before(self._writes.value, self.clock())

    def put(self, key: K, value: T, before: Before) -> None:
        """Keep `value` for `key`, read after `before` was taken."""
        self._kept.pop(key, None)
        if self.keep(value):
            if len(self._kept) >= self.max_entries:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = _Kept(before.writes, before.at, value)

    def _good(self, key: K) -> _Kept[T] | None:
        kept = self._kept.get(key)
        if kept is None or kept.writes != self._writes.value:
            return None
        return kept if self.clock() - kept.at < self.max_age else None
