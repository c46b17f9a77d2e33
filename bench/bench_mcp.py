"""MCP benchmark: a tool call's round trip through Skald's client (`skald.mcp`) against the
same call written by hand on the server's stdio, as a ratio, in one run.

Run from the repository root (after ci/test.sh's prepare_mcp_npm, or with SKALD_MCP_NPM
naming where the npm packages of tests/mcp_npm are installed):

    .venv/bin/python bench/bench_mcp.py              # 2000 calls each way
    .venv/bin/python bench/bench_mcp.py --calls 300

Both sides talk to their own `@modelcontextprotocol/server-everything` over stdio and
call its `echo` tool one call after another. "raw" writes the JSON-RPC line itself and
reads lines until the answer with that id; "client" awaits `McpSession.call_tool`
(encoding, the reader task, the pending-request future, decoding into msgspec structs).
The two sides alternate in blocks of 100 calls, so drift in the machine's load hits
both alike. The ratio (client / raw, medians) is what Skald adds to a call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from mcp_support import child_env, everything_script, node

from skald.mcp import StdioTransport, connect

BLOCK = 100


class Raw:
    """The server's stdio, by hand: one line out, lines in until our id comes back."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    @classmethod
    async def start(cls) -> Raw:
        proc = await asyncio.create_subprocess_exec(
            node(),
            str(everything_script()),
            "stdio",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=child_env(),
        )
        raw = cls(proc)
        await raw.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        await raw.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return raw

    async def write(self, message: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        self.next_id += 1
        await self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            message = json.loads(await self.proc.stdout.readline())
            if message.get("id") == self.next_id and "method" not in message:
                result: dict[str, object] = message["result"]
                return result

    async def close(self) -> None:
        self.proc.kill()
        await self.proc.wait()


async def main(calls: int) -> None:
    raw = await Raw.start()
    session = await connect(
        StdioTransport([node(), str(everything_script()), "stdio"], env=child_env()), name="bench"
    )
    args = {"message": "hello"}
    raw_times: list[float] = []
    client_times: list[float] = []
    try:
        for _ in range(10):  # warm both up (JIT on the server side, imports on ours)
            await raw.request("tools/call", {"name": "echo", "arguments": args})
            await session.call_tool("echo", args)
        done = 0
        while done < calls:
            for _ in range(BLOCK):
                start = time.perf_counter()
                await raw.request("tools/call", {"name": "echo", "arguments": args})
                raw_times.append(time.perf_counter() - start)
            for _ in range(BLOCK):
                start = time.perf_counter()
                result = await session.call_tool("echo", args)
                client_times.append(time.perf_counter() - start)
            assert result.text() == "Echo: hello", result.text()
            done += BLOCK
    finally:
        await session.close()
        await raw.close()

    def row(name: str, times: list[float]) -> str:
        times = sorted(times)
        p95 = times[int(len(times) * 0.95)]
        return f"{name:8} {len(times):6} calls  median {statistics.median(times) * 1e3:7.3f} ms  p95 {p95 * 1e3:7.3f} ms"

    print(row("raw", raw_times))
    print(row("client", client_times))
    ratio = statistics.median(client_times) / statistics.median(raw_times)
    print(f"ratio (client / raw, medians): {ratio:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))
