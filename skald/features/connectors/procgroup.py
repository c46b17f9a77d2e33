"""A connector's processes inside a container, marked like a sandbox command's.

Rule: a connector that runs in a container (a personal one in the member's sandbox, a
household one in its own box) starts through `docker exec -u 0:0 ... setpriv
--groups=<boot mark>,<its mark> --reuid --regid --bounding-set=-all -- <command>`: the
supplementary marker groups of `skald/sandbox/procs.py`, the same mechanism as members'
commands, not a second one. Every process the connector starts inherits the marks, and
`setsid` or `env -i` cannot drop them (that needs CAP_SETGID, which no connector process
has). So

- when the instance's process ends or is stopped (switch-off, lock, deactivation, revoke,
  update, shutdown), `kill()` kills every process with its mark, as root in the container;
- after a crash, the first `ensure` of the member's container at the next start kills
  every process marked by an earlier boot (`SandboxManager._kill_stale`): the boot mark
  changes at every server start.

Trap: killing the host's `docker exec` client does not end the process in the container
(Docker does not signal an exec's process when its client goes): without the kill here a
connector's children, and often the connector itself, live on in the container.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skald.log import get_logger
from skald.sandbox.procs import drop_argv, new_mark, run_killer

if TYPE_CHECKING:
    from skald.sandbox.manager import SandboxManager

log = get_logger("skald.features.connectors")


@dataclass(frozen=True)
class MarkedGroup:
    """One connector instance's processes in one container."""

    manager: SandboxManager
    container: str
    mark: int

    @classmethod
    def new(cls, manager: SandboxManager, container: str) -> MarkedGroup:
        return cls(manager, container, new_mark(manager.boot_mark))

    def exec_argv(
        self, workdir: str, env: Sequence[str], command: Sequence[str], home: str
    ) -> list[str]:
        """The `docker exec` command line. `env` are names only: docker copies each value
        from its own environment, so no secret is ever on a command line (`ps`)."""
        argv = ["docker", "exec", "-i", "-u", "0:0", "-w", workdir, "-e", f"HOME={home}"]
        for key in env:
            argv += ["-e", key]
        marks = (self.manager.boot_mark, self.mark)
        drop = drop_argv(marks, self.manager.uid, self.manager.gid)
        return [*argv, self.container, *drop, "--", *command]

    async def kill(self) -> int:
        """Kill every process carrying the mark; a failure (the container is gone, Docker
        is away) is logged: the boot-mark sweep at the next start catches what is left."""
        try:
            killed = await self.manager.call(
                run_killer, self.manager.client(), self.container, "cmd", self.mark
            )
        except Exception as exc:
            log.warning("could not kill a connector's processes", error=str(exc)[:300])
            return 0
        if killed:
            log.info("killed a connector's processes", n=killed)
        return killed
