"""The storage guard: the free-disk reserve, the sandboxes' pause, the usage rescans.

Rule: below `storage.disk_reserve_mb` of free space Skald refuses new writes (every
write path asks `Budget.check`, which reads the figure this guard refreshes) and pauses
every sandbox of this instance (`docker pause`: processes frozen, nothing lost); the
sandboxes resume once free space is back above the reserve plus `RESUME_MARGIN`, so a
disk hovering at the threshold does not flap them.

Trap: the container writes into the bind-mounted home without passing through Skald, so
no write path can stop it; a running command is stopped by its own `CommandWatch`
(quota.py), anything else (a connector's programs) only by this pause, which acts
`DISK_CHECK_S` late at worst. What lands before either acts still lands; SQLite then
meets ENOSPC as SQLITE_FULL and rolls back, which the tests check with a full tmpfs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

from skald.log import get_logger
from skald.quota import DISK_CHECK_S, RESCAN_S, StorageAccountant, human_size
from skald.sandbox.manager import SandboxManager, SandboxUnavailable

log = get_logger("skald.storage")

RESUME_MARGIN: Final = 1.25  # sandboxes resume at 125 % of the reserve


@dataclass(eq=False)
class StorageGuard:
    accountant: StorageAccountant
    sandbox: Callable[[], SandboxManager | None]
    _: KW_ONLY
    disk_check_s: float = DISK_CHECK_S
    rescan_s: float = RESCAN_S
    paused: bool = field(init=False, default=False)  # this guard paused the sandboxes
    ticks: int = field(init=False, default=0)  # completed checks (tests wait on it)

    async def tick(self) -> None:
        """One look at the disk; pause or resume the sandboxes when it crossed a line.

        While the disk stays low every tick pauses again whatever runs (a sandbox made
        meanwhile, at a login), which costs one container listing."""
        free = await asyncio.to_thread(self.accountant.refresh_disk)
        reserve = self.accountant.reserve
        if self.accountant.disk_low:
            if not self.paused:
                log.warning(
                    "disk nearly full: writes refused, sandboxes paused",
                    free=human_size(free),
                    reserve=human_size(reserve),
                )
            self.paused = await self._sandboxes(pause=True) or self.paused
        elif self.paused and free >= reserve * RESUME_MARGIN:
            log.info("disk space back: sandboxes resumed", free=human_size(free))
            self.paused = not await self._sandboxes(pause=False)
        self.ticks += 1

    async def _sandboxes(self, *, pause: bool) -> bool:
        """True when done (or when there are no sandboxes); False to try again."""
        manager = self.sandbox()
        if manager is None:
            return True
        try:
            count = await (manager.pause_all() if pause else manager.unpause_all())
        except SandboxUnavailable as exc:
            log.warning("sandboxes not reached", pause=pause, error=str(exc))
            return False
        if count:
            log.info("sandboxes paused" if pause else "sandboxes resumed", count=count)
        return True

    async def rescan(self) -> None:
        """Walk again every member whose figure is kept (one at a time, in a thread)."""
        for user_id in self.accountant.known():
            await asyncio.to_thread(self.accountant.scan, user_id)

    async def run_forever(self) -> None:
        """Supervised service: the disk every `disk_check_s`, the homes every `rescan_s`."""
        scanned = time.monotonic()
        while True:
            await self.tick()
            if time.monotonic() - scanned >= self.rescan_s:
                await self.rescan()
                scanned = time.monotonic()
            await asyncio.sleep(self.disk_check_s)
