"""A third-party plugin's long-lived parts follow its switch: services and channels.

Rule: a service of a plugin runs only while the plugin is switched on: switched off,
it is cancelled, and it starts again (afresh) when switched back on; a channel of a
plugin switched off is unavailable, so notifications go the member's other ways.

Trap: the wrapped service's crash still reaches the runner (restart with back-off);
only the switch's own cancellation is swallowed here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skald.core.services import ServiceSpec
    from skald.plugins.switches import Switches


def gated_service(spec: ServiceSpec, pid: str, switches: Switches) -> ServiceSpec:
    async def once() -> None:
        await spec.run()

    async def run() -> None:
        while True:
            await switches.wait_for(pid, True)
            work = asyncio.create_task(once(), name=f"plugin-{pid}-{spec.name}")
            off = asyncio.create_task(switches.wait_for(pid, False))
            try:
                done, _ = await asyncio.wait({work, off}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (work, off):
                    if not task.done():
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
            if work in done:
                work.result()  # a crash goes to the runner; a clean end ends the service
                return

    return dataclasses.replace(spec, run=run)


class GatedChannel:
    """A plugin's notification channel, unavailable while the plugin is switched off."""

    def __init__(self, channel: Any, pid: str, switches: Switches) -> None:
        self.channel = channel
        self.name: str = channel.name
        self.pid = pid
        self.switches = switches

    async def available(self, user_id: str) -> bool:
        return self.switches.on(self.pid) and bool(await self.channel.available(user_id))

    async def deliver(self, delivery: Any) -> bool:
        if not self.switches.on(self.pid):
            return False
        return bool(await self.channel.deliver(delivery))
