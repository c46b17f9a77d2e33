"""What reading a model's streamed answer costs the event loop, by HTTP client.

Skald's model requests go through httpx's client (`skald/llm/wire.py`, `post_stream`).
A profile of the server with ten members streaming at once
(`bench_chat.py --profile`) put 45 % of the loop's busy time in that client. This script
measures, in one process on one loop, the CPU time of one streamed answer (a POST, then
`--events` SSE events in chunked encoding, read line by line) through:

- httpx: `AsyncClient.stream` and `aiter_lines` on httpx's own transport (httpcore over
  anyio), as Skald read a provider before its own transport;
- httpx on `ModelTransport`: the same calls on `skald/llm/transport.py` (h11 on asyncio
  streams under httpx's client API), as Skald reads a provider now;
- h11 on asyncio streams: the same requests on one kept-alive connection, framed by h11
  (the HTTP/1.1 state machine httpcore itself uses), with no anyio layer;
- raw: the socket read until the terminating chunk, no HTTP parsing (the floor: the
  local server's own share and the loop's).

The local server is the same asyncio one for all four and is counted in every row.

    .venv/bin/python bench/bench_sse_client.py            # 500 answers per client
    .venv/bin/python bench/bench_sse_client.py --quick    # 150
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import h11
import httpx

from skald.llm.transport import ModelTransport

BODY = b'{"model":"m","messages":[{"role":"user","content":"hello"}],"stream":true}' * 20
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def _server(events: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(HEAD)
                for i in range(events):
                    data = b'data: {"choices":[{"delta":{"content":"token%d "}}]}\n\n' % i
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                    await writer.drain()
                    await asyncio.sleep(0)  # one event per loop turn, as a model sends them
                writer.write(LAST_CHUNK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return serve


async def _httpx(url: str, answers: int, transport: httpx.AsyncBaseTransport | None = None) -> None:
    async with httpx.AsyncClient(transport=transport) as http:
        for _ in range(answers):
            async with http.stream(
                "POST", url, content=BODY, headers={"content-type": "application/json"}
            ) as response:
                async for _line in response.aiter_lines():
                    pass


class _H11Client:
    """One kept-alive connection; enough HTTP/1.1 for this measurement, no more."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def lines(self, path: str, body: bytes) -> AsyncIterator[bytes]:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        headers = [
            ("host", self.host),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ]
        out = self.conn.send(h11.Request(method="POST", target=path, headers=headers)) or b""
        out += (self.conn.send(h11.Data(data=body)) or b"") + (
            self.conn.send(h11.EndOfMessage()) or b""
        )
        self.writer.write(out)
        rest = b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(await self.reader.read(65536))
            elif isinstance(event, h11.Data):
                *whole, rest = (rest + bytes(event.data)).split(b"\n")
                for line in whole:
                    yield line
            elif isinstance(event, h11.EndOfMessage):
                self.conn.start_next_cycle()
                return


async def _h11(host: str, port: int, answers: int) -> None:
    client = _H11Client(host, port)
    for _ in range(answers):
        async for _line in client.lines("/v1/chat/completions", BODY):
            pass
    if client.writer is not None:
        client.writer.close()


async def _raw(host: str, port: int, answers: int) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % (host.encode(), len(BODY))
    ) + BODY
    for _ in range(answers):
        writer.write(request)
        seen = b""
        while not seen.endswith(LAST_CHUNK):
            seen = (seen + await reader.read(65536))[-len(LAST_CHUNK) :]
    writer.close()


async def measure(events: int, answers: int, rounds: int) -> dict[str, list[float]]:
    server = await asyncio.start_server(_server(events), "127.0.0.1", 0)
    host, port = "127.0.0.1", server.sockets[0].getsockname()[1]
    url = f"http://{host}:{port}/v1/chat/completions"
    clients: dict[str, Callable[[int], Awaitable[None]]] = {
        "httpx on httpcore": lambda n: _httpx(url, n),
        "httpx on ModelTransport": lambda n: _httpx(url, n, ModelTransport()),
        "h11 on asyncio streams": lambda n: _h11(host, port, n),
        "raw socket (floor)": lambda n: _raw(host, port, n),
    }
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):  # interleaved, so a busy moment hits every client alike
        for name, run in clients.items():
            await run(10)  # warm: connection made, code paths taken
            started = time.process_time()
            await run(answers)
            cpu[name].append((time.process_time() - started) / answers * 1000)
    await asyncio.sleep(0.1)  # the server's handlers see their clients gone and end
    server.close()
    await server.wait_closed()
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="150 answers per client and round")
    parser.add_argument("--events", type=int, default=40, help="SSE events per answer (40)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    args = parser.parse_args(argv)
    answers = 150 if args.quick else 500
    cpu = asyncio.run(measure(args.events, answers, args.rounds))
    print(f"CPU per streamed answer of {args.events} events, server included (median of")
    print(f"{args.rounds} rounds of {answers} answers; all rounds in brackets):")
    for name, values in cpu.items():
        rounds = " ".join(f"{v:.3f}" for v in values)
        print(f"  {name:<24} {statistics.median(values):7.3f} ms   [{rounds}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
