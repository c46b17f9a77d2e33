"""A command in a container with its stdin, stdout and stderr on one Docker API socket.

What `docker exec -i` does, without its process: the CLI is a Go program of about 24 MiB
resident, and every personal or boxed connector kept one alive on the host for as long
as it ran (issue 22 goal 5). Here the exec is created through the SDK and started by
Skald itself on a connection to the daemon's unix socket, upgraded to a raw stream
(`Connection: Upgrade`, `Upgrade: tcp`); stdout and stderr come multiplexed in frames
(an 8-byte header: the stream, then the length), stdin goes out as it is.

`ExecProcess` shows the exec as asyncio shows a child process (`stdin`, `stdout`,
`stderr`, `wait()`, `returncode`), so the MCP stdio transport reads it unchanged.

Rules:
- Values of the environment go in the exec's JSON body on the daemon's socket, never on
  a command line (as with the CLI, which sent them the same way).
- Only a daemon on a unix socket is reached this way (`direct_socket`); for any other
  `docker_host` the caller keeps the CLI.
- Reading applies back-pressure: a connector that writes faster than Skald reads fills
  the stream readers to their limit, then the socket is not read until they drain.

Traps:
- The daemon may send the first frames in the same packet as the 101's head: the head is
  read with the same `StreamReader` that then reads the frames (an HTTP library that
  buffers the head would swallow them).
- Closing the stream does not end the process (Docker never signals an exec's process);
  the caller kills its marker group, as it did the CLI's (`procgroup.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from skald.log import get_logger
from skald.sandbox.client import DEFAULT_SOCKET

if TYPE_CHECKING:
    from skald.sandbox.manager import SandboxManager

log = get_logger("skald.sandbox")

UNIX = "unix://"
DEFAULT_LIMIT = 64 * 1024
HEAD_LIMIT = 64 * 1024  # the daemon's answer to the upgrade: a few hundred bytes
STDOUT, STDERR = 1, 2
# After the output ends, how long the daemon may take to record the exit status.
EXIT_POLLS, EXIT_POLL_S = 20, 0.05


def direct_socket(docker_host: str) -> str | None:
    """The daemon's socket path when it is reached on a unix socket, else None."""
    url = docker_host or DEFAULT_SOCKET
    return url[len(UNIX) :] if url.startswith(UNIX) else None


class _Valve:
    """What a `StreamReader` pauses and resumes when its buffer passes its limit."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()

    def pause_reading(self) -> None:
        self.open.clear()

    def resume_reading(self) -> None:
        self.open.set()


class _Stdin:
    """The exec's stdin: `write`, `drain`, `close` (a half-close: the process reads EOF)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        if not self._writer.is_closing() and self._writer.can_write_eof():
            self._writer.write_eof()


class ExecProcess:
    """An exec's process as asyncio's `Process` shows one."""

    pid = None  # in the container's namespace: nothing the host can signal

    def __init__(
        self,
        manager: SandboxManager,
        exec_id: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limit: int,
    ) -> None:
        self._manager = manager
        self._exec_id = exec_id
        self._writer = writer
        self.stdin = _Stdin(writer)
        self.stdout = asyncio.StreamReader(limit=limit)
        self.stderr = asyncio.StreamReader(limit=DEFAULT_LIMIT)
        self._valves = (_Valve(), _Valve())
        self.stdout.set_transport(self._valves[0])  # type: ignore[arg-type]
        self.stderr.set_transport(self._valves[1])  # type: ignore[arg-type]
        self.returncode: int | None = None
        self._cut = False
        self._ended = asyncio.Event()
        self._pump = asyncio.create_task(self._demux(reader), name="exec-stream")

    async def _demux(self, reader: asyncio.StreamReader) -> None:
        ended = False
        try:
            while True:
                head = await reader.readexactly(8)
                data = await reader.readexactly(int.from_bytes(head[4:], "big"))
                target, valve = (
                    (self.stderr, self._valves[1])
                    if head[0] == STDERR
                    else (self.stdout, self._valves[0])
                )
                target.feed_data(data)
                await valve.open.wait()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            # The stream ended: the process closed its output (exited), or it was cut.
            ended = not self._cut
        finally:
            self.stdout.feed_eof()
            self.stderr.feed_eof()
            self._writer.close()
            try:
                self.returncode = await self._exit_code(wait=ended)
            finally:
                if self.returncode is None:
                    self.returncode = -9  # cancelled while asking
                self._ended.set()

    async def _exit_code(self, *, wait: bool) -> int:
        """The exit status; -9 when the stream was cut before the process ended (its
        group is killed next) or the daemon cannot say. `wait`: the output ended on its
        own, and the daemon may record the exit a moment after the stream closes."""
        for _ in range(EXIT_POLLS if wait else 1):
            try:
                api: Any = self._manager.client().api  # raises when Docker went away
                info = await self._manager.call(api.exec_inspect, self._exec_id)
            except Exception as exc:
                log.info("exec status unknown", error=str(exc)[:200])
                return -9
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                return int(code)
            await asyncio.sleep(EXIT_POLL_S)
        return -9

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """Cut the stream (the caller kills the process's marker group)."""
        self._cut = True
        self._writer.close()


async def start_exec(
    manager: SandboxManager,
    socket_path: str,
    container: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    workdir: str,
    *,
    limit: int = DEFAULT_LIMIT,
) -> ExecProcess:
    """Create the exec (as root: `argv` drops to the member itself) and start it on a
    connection of its own. Raises OSError when the daemon refuses or cannot be reached."""
    api: Any = manager.client().api
    created = await manager.call(
        api.exec_create,
        container,
        list(argv),
        stdout=True,
        stderr=True,
        stdin=True,
        tty=False,
        user="0:0",
        workdir=workdir,
        environment=dict(env),
    )
    exec_id = str(created["Id"])
    reader, writer = await asyncio.open_unix_connection(socket_path, limit=HEAD_LIMIT)
    try:
        body = json.dumps({"Detach": False, "Tty": False}).encode()
        writer.write(
            (
                f"POST /v{api.api_version}/exec/{exec_id}/start HTTP/1.1\r\n"
                "Host: docker\r\nContent-Type: application/json\r\n"
                "Connection: Upgrade\r\nUpgrade: tcp\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise OSError(f"the daemon's answer to the exec's start was cut: {exc}") from None
        status = head.split(b" ", 2)[1] if head.startswith(b"HTTP/1.") else b""
        if status not in (b"101", b"200"):
            first = head.split(b"\r\n", 1)[0].decode(errors="replace")
            raise OSError(f"the daemon did not start the exec: {first}")
    except BaseException:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        raise
    return ExecProcess(manager, exec_id, reader, writer, limit)
