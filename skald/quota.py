"""Storage limits: each member's quota and the free-disk reserve.

The rule: every write Skald makes for a member (file tools, notes, the Files API,
uploads, a chat turn, a sandbox command) first asks `Budget.check(adding)`, which
refuses with `QuotaExceededError` when the member's home + database would pass their
quota, and with `DiskFullError` when the data directory's disk would fall under the
reserve; afterwards the writer reports what it changed with `Budget.wrote(delta)`.

The traps:
- Usage is a cached figure. Walking a home costs a system call per entry, so each
  member's tree is walked once (in a thread, `tree_size`, by descriptor) and then kept current by the
  writes Skald reports; the storage guard walks again every `RESCAN_S` to catch what the
  sandbox wrote (container writes reach the bind-mounted home without passing through
  Skald). Between two walks a member can be over quota by what their commands wrote.
- Sizes are allocated blocks (`st_blocks`), not `st_size`: `fallocate` takes space
  without writing, and a sparse file claims a size it does not occupy. A file with
  several hard links counts once.
- The free-disk figure is `statvfs` `f_bavail` (what a non-root process may still use),
  refreshed by the guard every `DISK_CHECK_S` and before each tool write; between two
  refreshes Skald's own reported writes are subtracted, so a burst cannot overshoot.
- Refusing early is about a clear message, not about safety: SQLite answers a full disk
  with SQLITE_FULL and rolls the statement back, and file writes go to a temporary file
  that is removed on failure. The tests fill a small tmpfs and run `integrity_check`.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from skald import walk
from skald.agent.history import human_size
from skald.config import Config
from skald.errors import DiskFullError, QuotaExceededError
from skald.paths import DataLayout
from skald.store.rows import Role

__all__ = [
    "DISK_CHECK_S",
    "RESCAN_S",
    "Budget",
    "BudgetSource",
    "StorageAccountant",
    "human_size",
    "quota_bytes",
    "tree_size",
]

MIB: Final = 1024 * 1024
DISK_CHECK_S: Final = 5.0  # the guard's look at the free space
RESCAN_S: Final = 300.0  # the guard's walk of every known member's tree
_BLOCK: Final = 512  # st_blocks is counted in 512-byte units on Linux


def quota_bytes(role: Role, config: Config) -> int:
    """The member's quota in bytes (0: no limit): the role's, else the instance default."""
    mb = role.attributes.storage_quota_mb
    return (config.storage.member_quota_mb if mb is None else mb) * MIB


def _allocated(st: os.stat_result) -> int:
    return st.st_blocks * _BLOCK


def tree_size(root: Path) -> int:
    """Bytes allocated under `root` (itself included; a file or a folder).

    A folder is walked by descriptor (`skald.walk`, as every walk of a member's tree):
    links are never followed and a folder swapped for a link mid-walk is not entered, so
    the figure never counts anything outside the home. Hard links count once; entries
    that vanish or cannot be read are skipped.
    """
    try:
        top = root.lstat()
    except OSError:
        return 0
    if not stat.S_ISDIR(top.st_mode):
        return _allocated(top)
    try:
        return walk.usage(root.parent, (root.name,)).allocated
    except OSError:
        return 0


class StorageAccountant:
    """Every member's usage figure and the disk's free space, for one data directory.

    Thread-safe: tools report writes from worker threads, the guard rescans in another.
    """

    def __init__(self, layout: DataLayout, config: Config) -> None:
        self.layout = layout
        self.reserve = config.storage.disk_reserve_mb * MIB
        self._lock = threading.Lock()
        self._used: dict[str, int] = {}
        self._free: int | None = None

    # -- measuring (blocking: call from a thread) ------------------------------------------

    def member_paths(self, user_id: str) -> list[Path]:
        db = self.layout.user_db(user_id)
        return [self.layout.home(user_id), db, *(Path(f"{db}{s}") for s in ("-wal", "-shm"))]

    def scan(self, user_id: str) -> int:
        """Walk the member's home and database files now; the figure replaces the cache."""
        used = sum(tree_size(p) for p in self.member_paths(user_id))
        with self._lock:
            self._used[user_id] = used
        return used

    def refresh_disk(self) -> int:
        """Look at the disk now (a `statvfs`, cheap but a system call)."""
        st = os.statvfs(self.layout.root)
        free = st.f_bavail * st.f_frsize
        with self._lock:
            self._free = free
        return free

    # -- the figures -----------------------------------------------------------------------

    async def usage(self, user_id: str) -> int:
        """The member's usage: the cached figure, walked first in a thread if unknown."""
        with self._lock:
            used = self._used.get(user_id)
        if used is None:
            used = await asyncio.to_thread(self.scan, user_id)
        return used

    def cached_usage(self, user_id: str) -> int | None:
        with self._lock:
            return self._used.get(user_id)

    def known(self) -> list[str]:
        with self._lock:
            return list(self._used)

    def forget(self, user_id: str) -> None:
        with self._lock:
            self._used.pop(user_id, None)

    @property
    def free(self) -> int:
        """Free bytes as last seen minus what Skald wrote since (refreshed if never seen)."""
        with self._lock:
            free = self._free
        return self.refresh_disk() if free is None else free

    @property
    def disk_low(self) -> bool:
        return self.reserve > 0 and self.free < self.reserve

    def wrote(self, user_id: str, delta: int) -> None:
        """Skald changed the member's storage by `delta` bytes (negative: freed)."""
        with self._lock:
            if user_id in self._used:
                self._used[user_id] = max(0, self._used[user_id] + delta)
            if self._free is not None:
                self._free = max(0, self._free - delta)

    # -- the decision ----------------------------------------------------------------------

    def check(self, user_id: str, quota: int, adding: int) -> None:
        """Refuse a write of `adding` more bytes (0: "may this member still write?")."""
        if self.reserve > 0 and self.free - max(adding, 0) < self.reserve:
            raise DiskFullError(
                f"the disk is nearly full ({human_size(self.free)} free, "
                f"{human_size(self.reserve)} kept in reserve): new writes are refused "
                "until space is freed; tell the administrator"
            )
        if quota <= 0:
            return
        used = self.cached_usage(user_id) or 0
        if used + max(adding, 0) > quota or (adding == 0 and used >= quota):
            need = f"; this needs {human_size(adding)} more" if adding > 0 else ""
            raise QuotaExceededError(
                f"quota exceeded: {human_size(used)} of {human_size(quota)} used{need}. "
                "Delete files you no longer need to make room"
            )


@dataclass(frozen=True)
class Budget:
    """One member's side of the accountant, with their quota as it is now."""

    accountant: StorageAccountant
    user_id: str
    quota: int  # bytes; 0: no limit

    @property
    def used(self) -> int:
        return self.accountant.cached_usage(self.user_id) or 0

    def check(self, adding: int) -> None:
        self.accountant.check(self.user_id, self.quota, adding)

    def fresh_check(self, adding: int) -> None:
        """`check` after a new look at the disk, and after a new walk of the member's
        tree before refusing for the quota (the figure may be stale: files deleted from
        the sandbox). Blocking: for code already in a thread."""
        self.accountant.refresh_disk()
        try:
            self.check(adding)
        except QuotaExceededError:
            self.accountant.scan(self.user_id)
            self.check(adding)

    async def recheck(self, adding: int = 0) -> None:
        """`fresh_check` for the event loop: the blocking part runs in a thread."""
        try:
            self.check(adding)
        except QuotaExceededError:
            await asyncio.to_thread(self.fresh_check, adding)

    def wrote(self, delta: int) -> None:
        self.accountant.wrote(self.user_id, delta)


class BudgetSource(Protocol):
    """What the tools hold: a budget built at each call, so a role edit applies at once.
    A caller that has just read the member's role passes it (a turn's setup), else the
    role is read afresh."""

    def __call__(self, role: Role | None = None) -> Awaitable[Budget]: ...
