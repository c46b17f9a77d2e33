"""The transport interface and the stdio transport (a child process speaking JSON lines).

Rule (stdio): the server is a child process in its own process group (session); its
stdin/stdout carry newline-delimited JSON-RPC and nothing else, its stderr is kept in a
bounded ring buffer for diagnostics (`stderr_tail`). Closing kills the whole process
group and reaps the child, so nothing the server started outlives the session and no
zombie or pipe fd is left behind. `docker exec -i -u UID container cmd` is just another
argv; a caller may instead hand over `start`, which makes a process-like object
(`ProcessLike`: a command started through the Docker API, with no client process) that
the transport reads the same way and stops with its `kill()`.

Traps:
- A line on stdout that is not a JSON-RPC message is a protocol error: the server is
  killed. Servers that log to stdout are broken; they must log to stderr.
- stdout lines are bounded (`MAX_MESSAGE_BYTES`); a longer line is a protocol error,
  not a memory problem.
- Killing the docker CLI (`docker exec`) does not kill the process inside the container;
  whoever spawns through docker must also stop the process in the container (or the
  container).
- The child's environment is exactly `env`: nothing of ours (keys, tokens) is inherited
  unless the caller puts it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec

from skald.mcp.errors import TransportClosed
from skald.mcp.wire import RpcMessage

# One message; tool results with images can be large, but not unbounded.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
STDERR_LINES = 200
STDERR_LINE_CHARS = 2000
# After stdin is closed, a polite server exits by itself; then the group is killed.
EXIT_GRACE_SECONDS = 0.5

_decoder = msgspec.json.Decoder(RpcMessage)


def decode_message(data: bytes | str) -> RpcMessage:
    """One JSON-RPC message, or `TransportClosed("protocol error: ...")`."""
    try:
        message = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        excerpt = text.strip()[:80]
        raise TransportClosed(
            f"protocol error: the server sent something that is not a JSON-RPC message "
            f"({exc}): {excerpt!r}"
        ) from None
    if message.jsonrpc != "2.0" or not (
        message.is_request or message.is_notification or message.is_response
    ):
        raise TransportClosed("protocol error: the server sent an invalid JSON-RPC message")
    return message


@dataclass(frozen=True, slots=True)
class Origin:
    """Which of our requests a server message came with, as far as the transport knows.

    `known`: the transport can tell (streamable HTTP: a message on a request's POST
    stream relates to that request, one on the GET stream to none); stdio cannot.
    `request_id`: the related request, None for none."""

    known: bool
    request_id: int | str | None = None


UNKNOWN_ORIGIN: Final = Origin(known=False)


class Transport(ABC):
    """Carries JSON-RPC messages to and from one server.

    The session calls `open`, then `send`/`receive` from any tasks, and `close` once.
    `receive` raises `TransportClosed(reason)` when no more messages will come.
    """

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def send(self, message: RpcMessage) -> None: ...

    @abstractmethod
    async def receive(self) -> RpcMessage: ...

    async def receive_with_origin(self) -> tuple[RpcMessage, Origin]:
        """`receive`, and which request of ours the message came with (`Origin`)."""
        return await self.receive(), UNKNOWN_ORIGIN

    @abstractmethod
    async def close(self, *, grace: bool = True) -> None:
        """Release everything (idempotent): processes, connections, tasks. `grace=False`
        when the server is already known broken: no waiting for a polite exit."""

    async def initialized(self, protocol_version: str) -> None:  # noqa: B027 - optional hook
        """Called once the initialize answer is in, before `notifications/initialized`
        goes out (HTTP sends the version header from then on and opens its GET stream
        first, so what the server sends on `initialized` has somewhere to go)."""

    def forget(self, request_id: int | str) -> None:  # noqa: B027 - optional hook
        """The session no longer waits for the answer to this request (cancelled)."""

    def stderr_tail(self, n: int = 20) -> list[str]:
        """The last `n` diagnostic lines (stderr of a process; empty for HTTP)."""
        return []


class ProcessLike(Protocol):
    """What the stdio transport reads: asyncio's `Process`, or a command somewhere else
    shown the same way (`pid` None: `kill()` stops it, there is no group to signal)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdin(self) -> Any: ...  # write(), drain(), close()

    @property
    def stdout(self) -> asyncio.StreamReader | None: ...

    @property
    def stderr(self) -> asyncio.StreamReader | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...


class StdioTransport(Transport):
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        *,
        start: Callable[[int], Awaitable[ProcessLike]] | None = None,
    ) -> None:
        """`start`: makes the process instead of `argv` (given the stdout line limit)."""
        if not argv:
            raise ValueError("argv must name a command")
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self._start = start
        self._proc: ProcessLike | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def open(self) -> None:
        try:
            if self._start is not None:
                self._proc = await self._start(MAX_MESSAGE_BYTES)
            else:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,  # its own process group: killpg reaches its children
                    limit=MAX_MESSAGE_BYTES,
                )
        except OSError as exc:
            what = "it" if self._start is not None else repr(self.argv[0])
            raise TransportClosed(f"cannot start {what}: {exc.strerror or exc}") from None
        self._stderr_task = asyncio.create_task(self._read_stderr(), name="mcp-stderr")

    async def _read_stderr(self) -> None:
        assert self._proc and self._proc.stderr
        stream = self._proc.stderr
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over the limit: keep its start, drop the rest
                chunk = await stream.read(STDERR_LINE_CHARS)
                line = chunk + b"..."
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CHARS])

    def stderr_tail(self, n: int = 20) -> list[str]:
        return list(self._stderr)[-n:] if n > 0 else []

    async def send(self, message: RpcMessage) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or self._closed:
            raise TransportClosed("the server process is not running")
        data = msgspec.json.encode(message) + b"\n"
        async with self._write_lock:
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (ConnectionError, BrokenPipeError, RuntimeError) as exc:
                reason = await _ended_reason(proc, f"cannot write to it ({exc})")
                raise TransportClosed(reason) from None

    async def receive(self) -> RpcMessage:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise TransportClosed("the server process is not running")
        while True:
            try:
                line = await proc.stdout.readline()
            except ValueError:
                raise TransportClosed(
                    f"protocol error: a message longer than {MAX_MESSAGE_BYTES} bytes"
                ) from None
            if not line:
                raise TransportClosed(await _ended_reason(proc, "it closed its output"))
            if line.strip():
                return decode_message(line)

    async def close(self, *, grace: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        cancelled = False
        if grace and proc.returncode is None:
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), EXIT_GRACE_SECONDS)
            except asyncio.CancelledError:
                # A stop arriving while an instance closes a session of its own: finish
                # the close first (kill, reap, pipes), then let the cancellation go on;
                # else the process outlives the connector with its pipes open.
                cancelled = True
        # Whatever the leader did, its group goes: children it forked must not linger.
        if proc.pid is None:
            proc.kill()
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._stderr_task, 1.0)
        # Drop the pipe transports now rather than at garbage collection (fd count).
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        if cancelled:
            raise asyncio.CancelledError


async def _ended_reason(proc: ProcessLike, default: str) -> str:
    """Why a server's pipe broke. Its end (EOF, or a write refused) comes before its exit
    status can be read: a moment is given for the exit, so the reason can say how the
    process ended. Without that wait, a server that exits at once was reported either
    way, depending on which of the two came first."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 1.0)
    # Not the stderr lines: this text reaches the model, and a server's stderr may
    # hold anything (tokens in a traceback); `stderr_tail` is for the admins.
    code = proc.returncode
    if code is None:
        return default
    if code < 0:
        return f"the process was killed by signal {-code}"
    return f"the process exited with status {code}"
