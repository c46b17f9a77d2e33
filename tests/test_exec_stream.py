"""The Docker API exec stream (skald/sandbox/exec_stream.py) against a daemon double: a
unix socket speaking the Engine API's upgrade and its multiplexed frames, so the edges
the real daemon shows only now and then are shown every time: the first frames in the
same packet as the 101's head, stderr interleaved with stdout, a refusal, an exit the
daemon records a moment after the stream ends, and a connector that writes faster than
it is read. tests/test_connectors_procs.py runs the real thing in a container."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from skald.sandbox.exec_stream import ExecProcess, start_exec

UPGRADED = (
    b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
    b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
)


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


class Api:
    """The SDK calls `start_exec` makes, recorded; `running` inspections before the exit."""

    api_version = "1.43"

    def __init__(self, running: int = 0, code: int = 0) -> None:
        self.created: list[dict[str, Any]] = []
        self.running, self.code = running, code

    def exec_create(self, container: str, cmd: list[str], **kw: Any) -> dict[str, str]:
        self.created.append({"container": container, "cmd": cmd, **kw})
        return {"Id": "e1"}

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        if self.running > 0:
            self.running -= 1
            return {"Running": True, "ExitCode": None}
        return {"Running": False, "ExitCode": self.code}


class Manager:
    """`clients`: how many times `client()` answers before Docker is gone."""

    def __init__(self, api: Api, clients: int = 1000) -> None:
        self.api = api
        self.clients = clients

    def client(self) -> Any:
        if self.clients <= 0:
            raise RuntimeError("the sandbox is not available right now")
        self.clients -= 1
        return self

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)


class Daemon:
    """One exec per connection: reads the start request, then plays `script`, a list of
    bytes to send or "echo" (send back as stdout what arrives on stdin until EOF)."""

    def __init__(self, path: Path, head: bytes, script: list[bytes | str]) -> None:
        self.path, self.head, self.script = path, head, script
        self.requests: list[bytes] = []
        self.stdin = b""

    async def __aenter__(self) -> Daemon:
        self.server = await asyncio.start_unix_server(self._serve, str(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        self.requests.append(request + await reader.readexactly(length))
        first = self.script[0] if self.script and isinstance(self.script[0], bytes) else b""
        writer.write(self.head + first)  # the head and the first frames in one packet
        for step in self.script[1 if first else 0 :]:
            if step == "echo":
                while data := await reader.read(4096):
                    self.stdin += data
                    writer.write(frame(1, data))
            else:
                assert isinstance(step, bytes)
                writer.write(step)
            await writer.drain()
        writer.close()


async def _start(
    tmp_path: Path, api: Api, limit: int = 65536, manager: Manager | None = None
) -> ExecProcess:
    return await start_exec(
        manager or Manager(api),  # type: ignore[arg-type]
        str(tmp_path / "d.sock"),
        "box",
        ["setpriv", "--", "server"],
        {"TOKEN": "s3cret", "HOME": "/home/member"},
        "/home/member/c",
        limit=limit,
    )


async def test_frames_in_the_upgrades_packet_and_interleaved_stderr_are_read_apart(
    tmp_path: Path,
) -> None:
    script: list[bytes | str] = [
        frame(1, b'{"a":') + frame(2, b"warming up\n"),
        frame(1, b"1}\n") + frame(2, b"ready\n"),
    ]
    api = Api(running=3, code=7)  # the exit is recorded a moment after the stream ends
    async with Daemon(tmp_path / "d.sock", UPGRADED, script) as daemon:
        proc = await _start(tmp_path, api)
        assert await proc.stdout.readline() == b'{"a":1}\n'
        assert await proc.stderr.read() == b"warming up\nready\n"
        assert await proc.wait() == 7
    assert proc.pid is None
    # The environment went in the exec's body, as root dropping to the member.
    (created,) = api.created
    assert created["environment"] == {"TOKEN": "s3cret", "HOME": "/home/member"}
    assert created["user"] == "0:0" and created["stdin"] and not created["tty"]
    assert created["workdir"] == "/home/member/c"
    (request,) = daemon.requests
    assert request.startswith(b"POST /v1.43/exec/e1/start HTTP/1.1\r\n")
    assert b"Upgrade: tcp" in request and b"s3cret" not in request
    assert json.loads(request.split(b"\r\n\r\n", 1)[1]) == {"Detach": False, "Tty": False}


async def test_stdin_reaches_the_process_and_its_close_is_an_eof(tmp_path: Path) -> None:
    async with Daemon(tmp_path / "d.sock", UPGRADED, ["echo"]) as daemon:
        proc = await _start(tmp_path, Api())
        proc.stdin.write(b'{"jsonrpc":"2.0"}\n')
        await proc.stdin.drain()
        assert await proc.stdout.readline() == b'{"jsonrpc":"2.0"}\n'
        proc.stdin.close()  # half-close: the daemon's read ends, the process exits
        assert await proc.wait() == 0
    assert daemon.stdin == b'{"jsonrpc":"2.0"}\n'


async def test_a_refused_start_is_an_oserror_naming_the_answer(tmp_path: Path) -> None:
    refused = b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}"
    async with Daemon(tmp_path / "d.sock", refused, []):
        with pytest.raises(OSError, match="409 Conflict"):
            await _start(tmp_path, Api())


async def test_a_cut_stream_is_not_a_clean_exit(tmp_path: Path) -> None:
    async with Daemon(tmp_path / "d.sock", UPGRADED, ["echo"]):
        proc = await _start(tmp_path, Api(running=100))
        proc.kill()
        # Still running when cut: no status to report but "killed" (its group goes next).
        assert await asyncio.wait_for(proc.wait(), 5) == -9


async def test_a_connector_writing_faster_than_it_is_read_is_held_at_the_limit(
    tmp_path: Path,
) -> None:
    chunk = b"x" * 4096
    script: list[bytes | str] = [frame(1, chunk) for _ in range(64)]  # 256 KiB, no reader
    async with Daemon(tmp_path / "d.sock", UPGRADED, script):
        proc = await _start(tmp_path, Api(), limit=8192)
        await asyncio.sleep(0.5)
        # Held: the reader's buffer stops near twice its limit, the rest waits in the
        # socket (and in the daemon) until it is read.
        assert len(proc.stdout._buffer) <= 2 * 8192 + len(chunk)
        got = 0
        while data := await proc.stdout.read(65536):
            got += len(data)
        assert got == 64 * len(chunk)
        assert await proc.wait() == 0


async def test_docker_gone_before_the_status_is_asked_is_reported_as_killed(
    tmp_path: Path,
) -> None:
    async with Daemon(tmp_path / "d.sock", UPGRADED, [frame(1, b"bye\n")]):
        api = Api()
        proc = await _start(tmp_path, api, manager=Manager(api, clients=1))  # the create
        assert await proc.stdout.read() == b"bye\n"
        assert await asyncio.wait_for(proc.wait(), 5) == -9
    # Said, not raised: no task is left with an exception nobody reads.
    assert proc._pump.done() and proc._pump.exception() is None
