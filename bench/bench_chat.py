"""Chat benchmark: Skald's own overhead on a streamed chat turn, and the server's memory
over many turns.

Run from the repository root:

    .venv/bin/python bench/bench_chat.py            # 100 turns per configuration, 1000 in all
    .venv/bin/python bench/bench_chat.py --quick    # 30 turns per configuration, 200 in all

It starts a real `skald serve` on a free port of 127.0.0.1 with a scratch data directory
(through tests/harness.py, as the end-to-end tests do), creates ten members with the
CLI, signs them in, opens one WebSocket per member, and points an OpenAI-compatible
provider at a fake model server that runs in this process. The fake streams every
answer as several SSE chunks: the headers and an empty role chunk at once, the first
token 10 ms later, then 19 more tokens 10 ms apart (`--tokens`, `--first-token`,
`--token-gap`), about 200 ms per answer.

Everything is timestamped in this process with `time.perf_counter()`; the server is only
ever observed from outside. For every turn:

(a) message in -> model request out: from just before the client writes
    `POST /api/conversations/{id}/messages` to the socket, to the fake receiving the
    first byte of the model request that turn caused;
(b) first token in -> WS frame out: from just before the fake writes the first token
    chunk to the socket, to the member's WebSocket client handing over the first
    `token_delta` event of that turn.

Both are measured with one member sending turns one after the other, then with all ten
sending at the same time. A member waits for `turn_done`, then 20 ms (plus 0-100 ms at
random with ten, `--pause`), then sends the next message; every ten turns it opens a new
conversation, so prompts do not grow through the run. Both figures include two loopback
hops and this process's own event loop; the script measures that floor (a write on one
loopback socket to the read on the other end, in the same event loop) and prints it
under the table.

Then it drives `POST /api/chat` (synchronous turns, five members at a time, a new
conversation every 20 turns) up to 1000 turns in all (200 with --quick) and prints the
server's resident memory (VmRSS in /proc/<pid>/status, read after a second at rest) at
checkpoints along the way.

`--profile DIR` records py-spy profiles (raw collapsed stacks) of the server during the
two measured phases; py-spy pauses the server for every sample, so the latencies of such
a run are not the benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness import ADMIN, ADMIN_PW, Api, ServerProcess

MEMBER_PW = "a member's long password"
MEMBER_COUNT = 10
MODEL = "bench-model"
TURNS_PER_CONVERSATION = 10  # a fresh conversation after this many, so prompts stay alike
CHAT_CONCURRENCY = 5  # members sending `POST /api/chat` at once in the memory phase
CHAT_TURNS_PER_CONVERSATION = 20
TURN_TIMEOUT_S = 60.0
THINK_S = 0.02  # the least time between the end of a member's turn and their next message
SETTLE_S = 1.0
BUDGET_P50_MS = 5.0
BUDGET_P99_MS = 25.0
TURN_TEXT = "bench turn {id}: what should we cook tonight?"
TURN_ID = re.compile(r"bench turn (\S+):")


def now() -> float:
    return time.perf_counter()


# -- the fake provider ------------------------------------------------------------------


@dataclass
class StreamPlan:
    """How the fake answers: seconds before the first token and between tokens."""

    first_token_delay: float
    token_gap: float
    count: int = 20

    @property
    def tokens(self) -> list[str]:
        words = ("Pasta", "with", "tomatoes,", "basil", "and", "garlic,", "and", "a", "salad.")
        return [f"{words[i % len(words)]} " for i in range(self.count)]


class FakeProvider:
    """A minimal OpenAI-compatible Chat Completions server on this process's event loop.

    It speaks just enough HTTP/1.1 (Content-Length requests, keep-alive, chunked
    responses) for Skald's httpx client, answers every streamed request with the plan's
    tokens in the shape OpenAI uses, and records, per turn (found in the last user
    message), when the request's first byte arrived and when the first token left.
    """

    def __init__(self) -> None:
        self.plan = StreamPlan(first_token_delay=0.0, token_gap=0.0)
        self.arrived: dict[str, float] = {}
        self.first_token: dict[str, float] = {}
        self.requests = 0
        self.errors: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _FakeConnection(self), "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def handle(
        self, conn: _FakeConnection, method: str, path: str, body: bytes, arrived: float
    ) -> None:
        self.requests += 1
        if method != "POST" or not path.endswith("/chat/completions"):
            self.errors.append(f"{method} {path}")
            conn.send_json(404, {"error": {"message": f"no route {method} {path}"}})
            return
        try:
            request = json.loads(body)
        except ValueError:
            self.errors.append("a body that is not JSON")
            conn.send_json(400, {"error": {"message": "not JSON"}})
            return
        turn = _turn_of(request)
        if turn is not None:
            self.arrived[turn] = arrived
        task = asyncio.create_task(self._stream(conn, request, turn, self.plan))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stream(
        self, conn: _FakeConnection, request: dict[str, Any], turn: str | None, plan: StreamPlan
    ) -> None:
        model = str(request.get("model", MODEL))
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        make = _ChunkMaker(model, usage)
        conn.write(head + make.event({"role": "assistant", "content": ""}))
        for index, token in enumerate(plan.tokens):
            wait = plan.first_token_delay if index == 0 else plan.token_gap
            if wait:
                await asyncio.sleep(wait)
            data = make.event({"content": token})
            if index == 0 and turn is not None:
                self.first_token[turn] = now()
            conn.write(data)
        tail = make.event({}, finish="stop")
        if usage:
            tail += make.usage(prompt_tokens=40, completion_tokens=len(plan.tokens))
        conn.write(tail + make.raw("[DONE]") + b"0\r\n\r\n")


def _turn_of(request: dict[str, Any]) -> str | None:
    """The benchmark's turn id, from the text of the last user message."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            match = TURN_ID.search(text)
            return match[1] if match else None
    return None


class _ChunkMaker:
    """SSE events of one `chat.completion.chunk` stream, each in one HTTP chunk."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.id = f"chatcmpl-bench{random.randrange(1 << 48):012x}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage

    def _base(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_bench",
        }
        if self.include_usage:
            out["usage"] = None
        return out

    def raw(self, data: str) -> bytes:
        frame = f"data: {data}\n\n".encode()
        return b"%x\r\n%s\r\n" % (len(frame), frame)

    def event(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        out = self._base()
        out["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return self.raw(json.dumps(out))

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        out = self._base()
        out["choices"] = []
        out["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return self.raw(json.dumps(out))


class _FakeConnection(asyncio.Protocol):
    def __init__(self, fake: FakeProvider) -> None:
        self.fake = fake
        self.buffer = bytearray()
        self.first_byte_at: float | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        at = now()
        if self.first_byte_at is None:
            self.first_byte_at = at
        self.buffer += data
        while self._one_request(at):
            pass

    def _one_request(self, at: float) -> bool:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "transfer-encoding":
                raise RuntimeError("the fake provider reads Content-Length bodies only")
        total = end + 4 + length
        if len(self.buffer) < total:
            return False
        body = bytes(self.buffer[end + 4 : total])
        del self.buffer[:total]
        arrived = self.first_byte_at if self.first_byte_at is not None else at
        self.first_byte_at = at if self.buffer else None
        self.fake.handle(self, method, path, body, arrived)
        return True

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def send_json(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.write(
            b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(body), body)
        )


# -- the client side --------------------------------------------------------------------


class HttpConnection:
    """A minimal HTTP/1.1 keep-alive client for JSON requests with Content-Length answers.

    `request` returns the moment just before the request went to the socket, so the
    client's own overhead is not in the measurement (httpx spends about a millisecond of
    its own per request on this machine).
    """

    def __init__(self, url: str, cookie: str, csrf: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host, self.port, self.netloc = parts.hostname, parts.port, parts.netloc
        self.cookie, self.csrf = cookie, csrf
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.answered_at = 0.0  # when the head of the last answer arrived

    async def request(self, method: str, path: str, payload: Any) -> tuple[float, int, Any]:
        if self.reader is None or self.reader.at_eof():
            # First use, or the server closed the connection after it sat idle.
            self.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.writer is not None
        body = json.dumps(payload).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.netloc}\r\n"
            f"Cookie: skald_session={self.cookie}\r\nX-CSRF-Token: {self.csrf}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        sent_at = now()
        self.writer.write(head + body)
        answer = await self.reader.readuntil(b"\r\n\r\n")
        self.answered_at = now()
        lines = answer.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "transfer-encoding":
                raise RuntimeError(f"unexpected Transfer-Encoding: {value.strip()}")
        data = await self.reader.readexactly(length)
        return sent_at, status, json.loads(data) if data else None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class Turn:
    id: str
    conversation_id: str
    sent_at: float = 0.0
    first_delta_at: float | None = None
    status: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Member:
    name: str
    cookie: str
    csrf: str
    http: HttpConnection
    ws: ClientConnection | None = None
    reader: asyncio.Task[None] | None = None
    turn: Turn | None = None
    conversation_id: str = ""
    conversation_turns: int = 0

    async def new_conversation(self) -> str:
        _, status, out = await self.http.request("POST", "/api/conversations", {})
        if status != 201:
            raise RuntimeError(f"creating a conversation: {status} {out}")
        self.conversation_id = str(out["id"])
        self.conversation_turns = 0
        return self.conversation_id

    async def read_events(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._read_events()

    async def _read_events(self) -> None:
        assert self.ws is not None
        async for raw in self.ws:
            at = now()
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "ping":  # the server's heartbeat: answer, or it closes the socket
                await self.ws.send(json.dumps({"type": "pong", "t": message.get("t", 0.0)}))
                continue
            turn = self.turn
            if turn is None:
                continue
            if kind != "chat":
                continue
            event = message["event"]
            if event.get("conversation_id") != turn.conversation_id:
                continue
            if event.get("depth", 0) != 0:
                continue
            if event["type"] == "token_delta" and turn.first_delta_at is None:
                turn.first_delta_at = at
            elif event["type"] == "turn_done":
                turn.status = str(event.get("status"))
                turn.done.set()


@dataclass
class Sample:
    request_out_s: float  # (a)
    frame_out_s: float  # (b)
    answered_s: float  # the 202 to the message POST, for comparison with (a)


@dataclass
class Phase:
    label: str
    users: int
    samples: list[Sample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0


async def ws_turn(member: Member, fake: FakeProvider, turn_id: str) -> Sample:
    """One turn through `POST .../messages`, watched on the member's WebSocket."""
    if not member.conversation_id or member.conversation_turns >= TURNS_PER_CONVERSATION:
        await member.new_conversation()
    member.conversation_turns += 1
    turn = Turn(id=turn_id, conversation_id=member.conversation_id)
    member.turn = turn
    try:
        path = f"/api/conversations/{member.conversation_id}/messages"
        text = TURN_TEXT.format(id=turn_id)
        turn.sent_at, status, out = await member.http.request("POST", path, {"text": text})
        if status != 202:
            raise RuntimeError(f"sending a message: {status} {out}")
        await asyncio.wait_for(turn.done.wait(), TURN_TIMEOUT_S)
    finally:
        member.turn = None
    if turn.status != "done":
        raise RuntimeError(f"turn {turn_id} ended {turn.status!r}")
    arrived = fake.arrived.pop(turn_id, None)
    first_token = fake.first_token.pop(turn_id, None)
    if arrived is None or first_token is None or turn.first_delta_at is None:
        raise RuntimeError(f"turn {turn_id}: a timestamp is missing")
    answered = member.http.answered_at - turn.sent_at
    return Sample(arrived - turn.sent_at, turn.first_delta_at - first_token, answered)


async def run_phase(
    label: str,
    members: list[Member],
    fake: FakeProvider,
    turns: int,
    pid: int,
    *,
    warmup: int,
    pause_s: float,
    profile: Path | None = None,
) -> Phase:
    """`turns` measured turns spread over `members`, all sending at once."""
    phase = Phase(label=label, users=len(members))
    share = {m.name: turns // len(members) for m in members}
    for m in members[: turns % len(members)]:
        share[m.name] += 1

    async def one(member: Member, n: int, keep: bool) -> None:
        turn_id = f"{label}-{member.name}-{n}"
        try:
            sample = await ws_turn(member, fake, turn_id)
        except (RuntimeError, TimeoutError) as exc:
            phase.failures.append(f"{turn_id}: {exc}")
            return
        if keep:
            phase.samples.append(sample)

    # Warm-up: every member once (connection pools, caches), not measured.
    for n in range(warmup):
        await asyncio.gather(*(one(m, -1 - n, False) for m in members))

    async def user(member: Member) -> None:
        for n in range(share[member.name]):
            # A person reads the answer before writing again: without this floor the
            # next message would race the end of the previous turn (its last writes).
            await asyncio.sleep(THINK_S + random.uniform(0, pause_s))
            await one(member, n, True)

    spy = start_profiler(pid, profile / f"{label}.txt") if profile else None
    cpu_client, cpu_server, started = own_cpu_s(), proc_cpu_s(pid), now()
    await asyncio.gather(*(user(m) for m in members))
    phase.seconds = now() - started
    phase.client_cpu_s = own_cpu_s() - cpu_client
    phase.server_cpu_s = proc_cpu_s(pid) - cpu_server
    if spy is not None:
        await asyncio.to_thread(stop_profiler, spy)
    return phase


def start_profiler(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling the server's on-CPU stacks (collapsed format) until stopped."""
    output.parent.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--pid", str(pid), "--rate", "500", "--format", "raw"]
    with output.with_suffix(".log").open("wb") as log:
        proc = subprocess.Popen(  # noqa: S603 (our own venv's py-spy, fixed arguments)
            [*command, "--output", str(output)], stdout=log, stderr=subprocess.STDOUT
        )
    time.sleep(0.5)  # attach before the phase starts
    return proc


def stop_profiler(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def chat_turns(
    members: list[Member], fake: FakeProvider, count: int, failures: list[str]
) -> None:
    """`count` synchronous turns through `POST /api/chat`, a few members at a time."""
    todo = list(range(count))
    conversations: dict[str, tuple[str | None, int]] = {m.name: (None, 0) for m in members}

    async def worker(member: Member) -> None:
        while todo:
            todo.pop()
            conversation_id, used = conversations[member.name]
            if used >= CHAT_TURNS_PER_CONVERSATION:
                conversation_id, used = None, 0
            payload: dict[str, Any] = {"text": "What is on the calendar tomorrow?"}
            if conversation_id is not None:
                payload["conversation_id"] = conversation_id
            _, status, out = await member.http.request("POST", "/api/chat", payload)
            if status != 200 or out.get("status") != "done":
                failures.append(f"/api/chat: {status} {out}")
                continue
            conversations[member.name] = (str(out["conversation_id"]), used + 1)

    await asyncio.gather(*(worker(m) for m in members[:CHAT_CONCURRENCY]))


async def loopback_floor(count: int) -> list[float]:
    """One loopback hop as this script sees it: a write on one socket to the read on the
    other end, in this event loop (the same machinery that timestamps the turns)."""
    loop = asyncio.get_running_loop()
    got: asyncio.Queue[float] = asyncio.Queue()

    class Sink(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            got.put_nowait(now())

    server = await loop.create_server(Sink, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    hops = []
    try:
        for _ in range(count):
            await asyncio.sleep(0.002)
            sent = now()
            writer.write(b"x" * 200)
            hops.append(await got.get() - sent)
    finally:
        writer.close()
        server.close()
    return hops


# -- the server -------------------------------------------------------------------------


def proc_status(pid: int, key: str) -> int:
    """A memory figure from /proc/<pid>/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(key)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def create_members(server: ServerProcess) -> list[str]:
    names = [f"member{i:02d}" for i in range(MEMBER_COUNT)]
    for name in names:
        r = server.cli("user", "add", name, "--role", "member", "--password-stdin", stdin=MEMBER_PW)
        if r.returncode != 0:
            raise RuntimeError(f"skald user add {name}: {r.stderr}")
    return names


def configure_model(server: ServerProcess, fake: FakeProvider) -> None:
    admin = Api(server.url)
    try:
        admin.login(ADMIN, ADMIN_PW)
        body = {"name": "Bench fake", "kind": "openai_compatible", "base_url": fake.base_url}
        r = admin.post("/api/llm/providers", json=body)
        assert r.status_code == 201, r.text
        provider_id = r.json()["id"]
        r = admin.post(
            "/api/llm/models", json={"provider_id": provider_id, "model": MODEL, "name": MODEL}
        )
        assert r.status_code == 201, r.text
    finally:
        admin.close()


def sign_in(server: ServerProcess, name: str) -> Member:
    api = Api(server.url)
    try:
        api.login(name, MEMBER_PW)
        cookie, csrf = api.session_cookie, api.csrf
        return Member(name, cookie, csrf, HttpConnection(server.url, cookie, csrf))
    finally:
        api.close()


async def open_socket(server: ServerProcess, member: Member) -> None:
    uri = server.url.replace("http://", "ws://", 1) + "/api/ws"
    member.ws = await connect(
        uri, additional_headers={"Cookie": f"skald_session={member.cookie}"}, origin=server.url
    )
    member.reader = asyncio.create_task(member.read_events())


# -- the run ----------------------------------------------------------------------------


@dataclass
class Results:
    phases: list[Phase] = field(default_factory=list)
    memory: list[tuple[int, int]] = field(default_factory=list)  # (turns so far, KiB)
    peak_kib: int = 0
    floor: list[float] = field(default_factory=list)
    chat_failures: list[str] = field(default_factory=list)
    chat_seconds: float = 0.0
    chat_turns: int = 0
    ws_extensions: str = ""


async def bench(server: ServerProcess, names: list[str], args: argparse.Namespace) -> Results:
    assert server.proc is not None
    pid = server.proc.pid
    results = Results()
    fake = FakeProvider()
    await fake.start()
    members: list[Member] = []
    try:
        configure_model(server, fake)
        for name in names:
            members.append(await asyncio.to_thread(sign_in, server, name))
        for member in members:
            await open_socket(server, member)
        first_ws = members[0].ws
        assert first_ws is not None
        extensions = (
            first_ws.response.headers.get("Sec-WebSocket-Extensions") if first_ws.response else None
        )
        results.ws_extensions = extensions or "none"

        async def rest_and_read_memory() -> None:
            await asyncio.sleep(SETTLE_S)
            results.memory.append((fake.requests, proc_status(pid, "VmRSS")))

        # The first ten turns, one per member, then the memory baseline.
        fake.plan = StreamPlan(
            first_token_delay=args.first_token / 1000,
            token_gap=args.token_gap / 1000,
            count=args.tokens,
        )
        await run_phase("start", members, fake, 0, pid, warmup=1, pause_s=0.0)
        await rest_and_read_memory()

        results.floor = await loopback_floor(200)
        results.phases.append(
            await run_phase(
                "1user",
                members[:1],
                fake,
                args.turns,
                pid,
                warmup=5,
                pause_s=0.0,
                profile=args.profile,
            )
        )
        results.phases.append(
            await run_phase(
                "10users",
                members,
                fake,
                args.turns,
                pid,
                warmup=1,
                pause_s=args.pause / 1000,
                profile=args.profile,
            )
        )
        await rest_and_read_memory()

        # Up to the total number of turns through `POST /api/chat`, answered at once.
        fake.plan = StreamPlan(first_token_delay=0.0, token_gap=0.0, count=args.tokens)
        remaining = args.total - fake.requests
        steps = 4
        started = now()
        for step in range(steps):
            count = remaining // steps + (1 if step < remaining % steps else 0)
            if count > 0:
                await chat_turns(members, fake, count, results.chat_failures)
                results.chat_turns += count
                await rest_and_read_memory()
        results.chat_seconds = now() - started - steps * SETTLE_S
        results.peak_kib = proc_status(pid, "VmHWM")
        if fake.errors:
            raise RuntimeError(f"the fake provider saw unexpected requests: {fake.errors[:5]}")
    finally:
        for member in members:
            if member.ws is not None:
                await member.ws.close()
            if member.reader is not None:
                member.reader.cancel()
            member.http.close()
        await asyncio.gather(*(m.reader for m in members if m.reader), return_exceptions=True)
        await fake.stop()
    return results


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest rank: with 100 values, p99 is the 99th smallest."""
    index = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def report(args: argparse.Namespace, results: Results) -> None:
    print(f"skald chat benchmark, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at the end; "
        f"WebSocket extensions: {results.ws_extensions}"
    )
    print()
    budget = f"p50 < {BUDGET_P50_MS:g} ms, p99 < {BUDGET_P99_MS:g} ms"
    header = (
        f"  {'':<44} {'turns':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}   budget (DESIGN §5)"
    )
    print(header)
    for phase in results.phases:
        users = "1 user" if phase.users == 1 else f"{phase.users} users"
        print(f"  {users}:")
        for name, attribute in (
            ("(a) message in -> model request out", "request_out_s"),
            ("(b) first token in -> WS frame out", "frame_out_s"),
            ("    for comparison: message POST -> 202", "answered_s"),
        ):
            values = sorted(getattr(s, attribute) * 1000 for s in phase.samples)
            if not values:
                print(f"    {name:<42} no samples")
                continue
            p50, p99 = statistics.median(values), percentile(values, 99)
            verdict = "ok" if p50 < BUDGET_P50_MS and p99 < BUDGET_P99_MS else "OVER"
            print(
                f"    {name:<42} {len(values):>5} {p50:>8.2f} {p99:>8.2f} {values[-1]:>8.2f}"
                + ("" if attribute == "answered_s" else f"   {budget}: {verdict}")
            )
        print(
            f"    {'server CPU / bench CPU during the phase':<42} "
            f"{100 * phase.server_cpu_s / phase.seconds:>5.0f} % / "
            f"{100 * phase.client_cpu_s / phase.seconds:.0f} % of a core, "
            f"{len(phase.samples) / phase.seconds:.1f} turns/s"
        )
        for failure in phase.failures[:5]:
            print(f"    FAILED {failure}")
    floor = sorted(v * 1000 for v in results.floor)
    print(
        f"  one loopback hop seen by this script (floor; (a) and (b) each contain two): "
        f"p50 {statistics.median(floor):.3f} ms, p99 {percentile(floor, 99):.3f} ms"
    )
    print()
    print(f"  server memory (VmRSS at rest)  {'turns':>6} {'MiB':>8}")
    for turns, kib in results.memory:
        print(f"  {'':<30} {turns:>6} {kib / 1024:>8.1f}")
    first, last = results.memory[0], results.memory[-1]
    growth = (last[1] - first[1]) / 1024
    per_1000 = growth / max(1, last[0] - first[0]) * 1000
    print(
        f"  growth from {first[0]} to {last[0]} turns: {growth:+.1f} MiB "
        f"({per_1000:+.1f} MiB per 1000 turns); peak (VmHWM) {results.peak_kib / 1024:.1f} MiB; "
        f"budget (idle, 5 users unlocked): < 150 MB"
    )
    if results.chat_seconds > 0:
        print(
            f"  POST /api/chat turns: {results.chat_turns} at {CHAT_CONCURRENCY} at a time, "
            f"{results.chat_turns / results.chat_seconds:.1f} turns/s"
        )
    for failure in results.chat_failures[:5]:
        print(f"  FAILED {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="30 turns per configuration, 200 in all"
    )
    parser.add_argument("--turns", type=int, help="measured turns per configuration (100)")
    parser.add_argument("--total", type=int, help="turns in all, for the memory figure (1000)")
    parser.add_argument("--tokens", type=int, default=20, help="token chunks in every answer (20)")
    parser.add_argument(
        "--first-token",
        type=float,
        default=10.0,
        help="ms from the headers to the first token (10)",
    )
    parser.add_argument(
        "--token-gap", type=float, default=10.0, help="ms between token chunks (10)"
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=100.0,
        help="with 10 users, each waits 0 to this many ms before its next message (100)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record py-spy profiles of the server during the two measured phases in DIR",
    )
    args = parser.parse_args(argv)
    args.turns = args.turns or (30 if args.quick else 100)
    args.total = args.total or (200 if args.quick else 1000)

    with tempfile.TemporaryDirectory(prefix="skald-bench-chat-") as tmp:
        server = ServerProcess(Path(tmp))
        try:
            server.create_admin()
            names = create_members(server)
            server.start()
            results = asyncio.run(bench(server, names, args))
        except BaseException:
            print(server.log()[-4000:], file=sys.stderr)
            raise
        finally:
            server.close()
    report(args, results)
    failed = any(p.failures for p in results.phases) or results.chat_failures
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
