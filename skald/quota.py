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
  Skald). While a member's command runs, `CommandWatch` looks much more often and stops
  it once she is over quota; what it wrote until then (the measured overshoot) stays.
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
from collections.abc import Awaitable, Callable
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
    "CommandWatch",
    "StorageAccountant",
    "human_size",
    "quota_bytes",
    "tree_size",
]

MIB: Final = 1024 * 1024
DISK_CHECK_S: Final = 5.0  # the guard's look at the free space
RESCAN_S: Final = 300.0  # the guard's walk of every known member's tree
LOOK_S: Final = 0.1  # while a member's command runs: the free space of the home's disk
WALK_S: Final = 2.0  # ... and a walk of their tree at least this often
SLOW_WALK_S: Final = 0.05  # a walk longer than this spaces out the next ones (a big home)
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

    def __init__(
        self,
        layout: DataLayout,
        config: Config,
        owned: Callable[[str], list[Path]] | None = None,
    ) -> None:
        self.layout = layout
        # Folders outside the home that count against a member (their projects...).
        self.owned = owned
        self.reserve = config.storage.disk_reserve_mb * MIB
        self._lock = threading.Lock()
        self._used: dict[str, int] = {}
        self._free: int | None = None

    # -- measuring (blocking: call from a thread) ------------------------------------------

    def member_paths(self, user_id: str) -> list[Path]:
        db = self.layout.user_db(user_id)
        extra = [] if self.owned is None else self.owned(user_id)
        return [
            self.layout.home(user_id),
            db,
            *(Path(f"{db}{s}") for s in ("-wal", "-shm")),
            *extra,
        ]

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

    def __call__(self, role: Role | None = None, owner: str | None = None) -> Awaitable[Budget]:
        """`owner`: the budget of whoever a place counts against (a project's owner)."""
        ...


class CommandWatch:
    """The quota while one of the member's sandbox commands runs (container writes reach
    the bind-mounted home without passing through Skald).

    Cheap first: `statvfs` of the home's disk every `look_s`; the member's tree is walked
    only when the disk lost at least the room the member had left since the last walk
    (whoever wrote it), or when `walk_s` has passed (deletions elsewhere can hide a
    member's growth from the disk figure). After a slow walk (a big home) the next one
    waits as long as it took, so a huge home on a busy disk does not keep a core busy.

    Trap: detection is not prevention. What the command writes between two looks, and
    until it is killed, lands: the overshoot is the write rate times that delay
    (measured in docs/dev/security.md). A command's files are bounded one by one by
    the file-size limit the command runs under (`ulimit -f`, the quota)."""

    def __init__(self, budget: Budget, *, look_s: float = LOOK_S, walk_s: float = WALK_S) -> None:
        self.budget = budget
        self.look_s = look_s
        self.walk_s = walk_s
        # The homes' disk (the home itself may not exist before the first command).
        self._disk = budget.accountant.layout.homes_dir
        self._free_at_walk: int | None = None  # the disk's free space when last walked

    def _free(self) -> int:
        st = os.statvfs(self._disk)
        return st.f_bavail * st.f_frsize

    def _walk(self) -> tuple[int, int]:
        free = self._free()
        used = self.budget.accountant.scan(self.budget.user_id)
        self._free_at_walk = free
        return used, free

    async def start(self) -> None:
        """The disk as the command starts (the member's figure is the cached one)."""
        self._free_at_walk = await asyncio.to_thread(self._free)

    async def until_over(self) -> str:
        """Returns why the command must stop (over quota, or the disk under the
        reserve) as soon as it is seen; runs until cancelled otherwise."""
        accountant, quota = self.budget.accountant, self.budget.quota
        loop = asyncio.get_running_loop()
        if self._free_at_walk is None:
            await self.start()
        walked = loop.time()
        cost = 0.0  # the last walk's duration
        while True:
            await asyncio.sleep(self.look_s)
            free = await asyncio.to_thread(self._free)
            if accountant.reserve > 0 and free < accountant.reserve:
                return (
                    f"the disk is nearly full ({human_size(free)} free, "
                    f"{human_size(accountant.reserve)} kept in reserve)"
                )
            if quota <= 0:
                continue
            lost = (self._free_at_walk or free) - free
            since = loop.time() - walked
            # A busy disk (other writers) must not keep a large home's walk running:
            # after a slow walk, never more than half of the time walking (not less:
            # a pause after a walk that found the member just under is overshoot).
            if cost > SLOW_WALK_S and since < cost:
                continue
            if lost < quota - self.budget.used and since < max(self.walk_s, 4 * cost):
                continue
            began = loop.time()
            used, free = await asyncio.to_thread(self._walk)
            walked = loop.time()
            cost = walked - began
            if used > quota:
                return f"storage quota reached: {human_size(used)} of {human_size(quota)} used"

    async def settle(self) -> None:
        """After the command: walk once more, so the figure (and `/api/storage`) shows
        what the command left. Always: the disk's free space cannot tell (other writers
        and deletions on the same disk hide a command's growth). About 80 ms for a home
        of 10 000 files on a loaded machine."""
        await asyncio.to_thread(self._walk)
