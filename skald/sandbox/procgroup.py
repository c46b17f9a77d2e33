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

This is the connectors' `docker exec` code, kept with the sandbox it reaches into
(issue 21): the same command started on a Docker API stream (`MarkedGroup.starter`,
`exec_stream.py`: no client process on the host, the usual way), the command line for a
daemon that is not on a unix socket (`MarkedGroup.exec_argv`) and the client's
environment (`docker_client_env`), one command run to its end under a group of its own
(`run_marked`: a dependency install) and the kill; and how a command run to its end is
waited for, killed and reaped on a timeout or a cancellation (`communicate_within`: the
connectors' host commands and `verify` checks too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skald.log import get_logger
from skald.sandbox.exec_stream import ExecProcess, direct_socket, start_exec
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
        return [*argv, self.container, *self._dropped(command)]

    def _dropped(self, command: Sequence[str]) -> list[str]:
        """`command` run as the member, carrying the boot's and this group's marks."""
        marks = (self.manager.boot_mark, self.mark)
        return [*drop_argv(marks, self.manager.uid, self.manager.gid), "--", *command]

    def starter(
        self, workdir: str, env: Mapping[str, str], command: Sequence[str], home: str
    ) -> Callable[[int], Awaitable[ExecProcess]] | None:
        """What `exec_argv` runs, started on a Docker API stream instead of a `docker
        exec` client process (`exec_stream.py`), or None when the daemon is not on a
        unix socket (the caller keeps the client). Takes the stdout reader's limit."""
        socket_path = direct_socket(self.manager.config.docker_host)
        if socket_path is None:
            return None
        argv = self._dropped(command)
        environment = {**env, "HOME": home}

        async def start(limit: int) -> ExecProcess:
            return await start_exec(
                self.manager, socket_path, self.container, argv, environment, workdir, limit=limit
            )

        return start

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


async def communicate_within(
    proc: asyncio.subprocess.Process, seconds: float, kill: Callable[[], None] | None = None
) -> bytes:
    """What the process wrote to stdout, once it ends within `seconds`. On a timeout
    (`TimeoutError`) or a cancellation it is killed (`kill`: its process group, say;
    default: the process) and reaped before the error goes on, so none is left running."""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), seconds)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            (proc.kill if kill is None else kill)()
        await proc.wait()
        raise
    return out


def docker_client_env() -> dict[str, str]:
    """The `docker` client's environment before the connector's declared variables."""
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST", "LANG")}


async def run_marked(
    manager: SandboxManager,
    container: str,
    workdir: str,
    env: Mapping[str, str],
    command: Sequence[str],
    home: str,
    seconds: float,
) -> tuple[int, bytes]:
    """Run `command` in the container under a marker group of its own, to its end:
    (exit code, stdout and stderr together). The group is killed when it ends, fails,
    times out (`seconds`) or is cancelled (the member locks, Skald stops); a timeout raises
    `TimeoutError`. `env` values reach the process through the client's environment."""
    group = MarkedGroup.new(manager, container)
    argv = group.exec_argv(workdir, list(env), command, home)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env={**docker_client_env(), **env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out = await communicate_within(proc, seconds)
    finally:
        # Shielded: a cancelled start (lock, shutdown) still kills what it started.
        await asyncio.shield(group.kill())
    return proc.returncode if proc.returncode is not None else -1, out
