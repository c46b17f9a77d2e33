"""Web server benchmark: requests per second and latency of a signed-in API call, and the
server's memory at rest.

Run from the repository root:

    .venv/bin/python bench/bench_web.py            # 10 s of load (about 25 s in all)
    .venv/bin/python bench/bench_web.py --quick    # 3 s of load (about 15 s in all)

It starts a real `skald serve` on a free port of 127.0.0.1 with a scratch data directory
(the same way the end-to-end tests do, through tests/harness.py), with the default
(memory-hard) KDF. It creates an administrator and four encrypted members, signs each
one in (so five users are unlocked, as in the budget of DESIGN.md §5), then:

1. reads the server process's resident memory (VmRSS in /proc/<pid>/status, with its
   anonymous and file-backed parts, RssAnon and RssFile) at rest;
2. runs 50 concurrent clients, each looping on `GET /api/auth/me` with one of the five
   session cookies over its own keep-alive connection, for a fixed time after a short
   warm-up (asyncio in this process, with a minimal HTTP/1.1 client: see `Connection`);
3. reads the resident memory again once the server has been idle for two seconds, and
   its peak (VmHWM).

The server logs every request (its access log) at the default level, as in production.
The load generator shares the machine's cores with the server: the table shows the CPU
time each of them used, so a client-bound figure can be told from a server-bound one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness import ADMIN, ADMIN_PW, Api, ServerProcess

MEMBERS = ("ada", "bo", "cy", "di")
MEMBER_PW = "a member's long password"
PATH = "/api/auth/me"
SETTLE_S = 2.0


@dataclass
class Load:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0


class Connection:
    """A minimal HTTP/1.1 keep-alive client for one small GET at a time.

    On a two-core machine the load generator shares the cores with the server; httpx
    spends about as much CPU time per request as the server does, so with it this would
    measure the client. This reads a status line, the headers and a Content-Length body:
    all that the answers to this benchmark's request contain.
    """

    def __init__(self, host: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.host = host
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(parts.netloc, reader, writer)

    async def exchange(self, request: bytes) -> int:
        """Send `request`, read the whole answer; its status code."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "transfer-encoding":
                raise RuntimeError(f"unexpected Transfer-Encoding: {value.strip()}")
        if length is None:
            raise RuntimeError("the answer has no Content-Length")
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


def proc_status(pid: int, key: str) -> int:
    """A memory figure from /proc/<pid>/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(key)


def proc_cpu_s(pid: int) -> float:
    """User plus system CPU time of a process, in seconds."""
    # The command name (field 2) may contain spaces; everything after its ")" is fixed.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def prepare(server: ServerProcess) -> list[str]:
    """Sign in the admin and four new encrypted members; their session cookies."""
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    for name in MEMBERS:
        r = admin.post(
            "/api/users", json={"username": name, "password": MEMBER_PW, "role": "member"}
        )
        assert r.status_code == 201, r.text
    cookies = [admin.session_cookie]
    for name in MEMBERS:
        member = Api(server.url)
        member.login(name, MEMBER_PW)
        cookies.append(member.session_cookie)
        member.close()
    admin.close()
    return cookies


async def run_load(
    url: str, pid: int, cookies: list[str], clients: int, warmup_s: float, duration_s: float
) -> Load:
    load = Load()
    measuring = False
    stop = False

    async def client(cookie: str) -> None:
        # One keep-alive connection per client, like a browser tab.
        conn = await Connection.open(url)
        request = (
            f"GET {PATH} HTTP/1.1\r\nHost: {conn.host}\r\n"
            f"Cookie: skald_session={cookie}\r\nAccept: application/json\r\n\r\n"
        ).encode()
        try:
            while not stop:
                started = time.perf_counter()
                status = await conn.exchange(request)
                elapsed = time.perf_counter() - started
                if measuring:
                    if status == 200:
                        load.latencies.append(elapsed)
                    else:
                        load.errors += 1
        finally:
            conn.close()

    tasks = [asyncio.create_task(client(cookies[i % len(cookies)])) for i in range(clients)]
    await asyncio.sleep(warmup_s)
    measuring = True
    cpu_client, cpu_server = own_cpu_s(), proc_cpu_s(pid)
    started = time.perf_counter()
    await asyncio.sleep(duration_s)
    measuring = False
    load.seconds = time.perf_counter() - started
    load.client_cpu_s = own_cpu_s() - cpu_client
    load.server_cpu_s = proc_cpu_s(pid) - cpu_server
    stop = True
    await asyncio.gather(*tasks)
    return load


def percentile(sorted_values: list[float], p: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def report(args: argparse.Namespace, load: Load, memory: dict[str, int]) -> None:
    lat = sorted(load.latencies)
    ms = [v * 1000 for v in lat]
    print(f"skald web benchmark, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"GET {PATH}, {args.clients} concurrent clients (keep-alive), 5 users signed in, "
        f"{args.duration:g} s after {args.warmup:g} s of warm-up"
    )
    print()
    rows: list[tuple[str, str, str]] = [
        ("requests", f"{len(lat):,}", ""),
        ("non-200 answers", f"{load.errors:,}", ""),
        ("throughput", f"{len(lat) / load.seconds:,.0f}", "req/s"),
        ("latency p50", f"{statistics.median(ms):.2f}", "ms"),
        ("latency p99", f"{percentile(ms, 99):.2f}", "ms"),
        ("latency max", f"{ms[-1]:.2f}", "ms"),
        (
            "server CPU during the load",
            f"{100 * load.server_cpu_s / load.seconds:.0f}",
            "% of a core",
        ),
        (
            "client CPU during the load",
            f"{100 * load.client_cpu_s / load.seconds:.0f}",
            "% of a core",
        ),
        ("server RSS at rest, before the load", f"{memory['before'] / 1024:.1f}", "MiB"),
        # The file-backed part is the code of the shared libraries and extension modules
        # the server touched: the kernel may drop and reread it; the anonymous part not.
        ("  of which anonymous (RssAnon)", f"{memory['anon'] / 1024:.1f}", "MiB"),
        ("  of which file-backed (RssFile)", f"{memory['file'] / 1024:.1f}", "MiB"),
        ("server RSS at rest, after the load", f"{memory['after'] / 1024:.1f}", "MiB"),
        ("server peak RSS (VmHWM)", f"{memory['peak'] / 1024:.1f}", "MiB"),
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, value, unit in rows:
        print(f"  {name:<{width}}  {value:>10}  {unit}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 s of load instead of 10 s")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (50)")
    parser.add_argument("--duration", type=float, default=None, help="seconds of load")
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = 3.0 if args.quick else 10.0
    args.warmup = 1.0 if args.quick else 2.0

    with tempfile.TemporaryDirectory(prefix="skald-bench-web-") as tmp:
        # The default KDF, as in production: sign-ins cost what they really cost.
        server = ServerProcess(Path(tmp), SKALD_SECURITY_KDF_PROFILE="default")
        try:
            server.create_admin()
            server.start()
            assert server.proc is not None
            pid = server.proc.pid
            cookies = prepare(server)
            time.sleep(SETTLE_S)
            memory = {
                "before": proc_status(pid, "VmRSS"),
                "anon": proc_status(pid, "RssAnon"),
                "file": proc_status(pid, "RssFile"),
            }
            load = asyncio.run(
                run_load(server.url, pid, cookies, args.clients, args.warmup, args.duration)
            )
            time.sleep(SETTLE_S)
            memory["after"] = proc_status(pid, "VmRSS")
            memory["peak"] = proc_status(pid, "VmHWM")
            server.stop()
        finally:
            server.close()
    if not load.latencies:
        print("no request succeeded", file=sys.stderr)
        return 1
    report(args, load, memory)
    return 0 if load.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
