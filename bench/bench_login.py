"""Login storm benchmark: how much a storm of wrong passwords slows an unrelated member,
and how much memory it costs the server.

Run from the repository root:

    .venv/bin/python bench/bench_login.py            # 10 s per phase (about 1 min in all)
    .venv/bin/python bench/bench_login.py --quick    # 4 s per phase

It starts a real `skald serve` (tests/harness.py) with the default, memory-hard KDF
(256 MiB per Argon2id check, as in production), creates an administrator and a member
`bo`, and signs `bo` in. Then, for each phase, `bo` lists their home folder
(`GET /api/files/dir?path=~`) over a keep-alive connection, one request every 20 ms, and
the benchmark records each latency:

1. idle: nothing else happens;
2. storm from one address: 100 attackers, each on its own connection, sign in as `ada`
   from 127.0.0.1 with a wrong password, again as soon as the answer comes (after a
   refusal, 429 or 503, they pause 0.25 s: a script that ignores Retry-After but does
   not spin), so about 100 wrong sign-ins are always in flight;
3. storm from 100 addresses: the same, but attacker i signs in as `stranger-i` from
   127.0.1.i (127.0.0.0/8 is all loopback), so no per-account or per-address budget
   stops it: only the key-derivation pool's bound does.

Before the phases, five members are signed in (so five are unlocked, as in a household in
the evening), and the "timing" line compares sign-ins, one at a time from addresses of
their own, for a name that does not exist and for a member with a wrong password
(median, 10th and 90th percentile): the two must not be told apart.

During each storm a browser that signed `bo` in before (it holds the device cookie)
signs in once more with the right password; the table shows its answer and time. A
thread reads the server's VmRSS every 20 ms; VmHWM is read at the end. The table gives
p50/p99 of `bo`'s listing in each phase and the p99 ratio to idle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_web import Connection, percentile, proc_cpu_s, proc_status
from harness import Api, ServerProcess

MEMBER_PW = "a member's long password"
# Signed in before the phases: five members unlocked. The last three also take the wrong
# passwords of the timing comparison (five free attempts each, so no 429; `ada` is left
# for the one-address storm).
MEMBERS = ("bo", "ada", "cy", "di", "ed")
TIMING_ACCOUNTS = MEMBERS[2:]
TIMING_ROUNDS = 15  # 5 per account
ATTACKERS = 100
LIST_PATH = "/api/files/dir?path=~"
GAP_S = 0.02
SETTLE_S = 2.0
REFUSED_PAUSE_S = 0.25
KNOWN_TIMEOUT_S = 120.0


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    peak_rss_kib: int = 0
    known_browser: str = ""


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            try:
                self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
            except (OSError, KeyError):
                return
            time.sleep(0.02)


def login_request(host: str, username: str, password: str) -> bytes:
    body = json.dumps({"username": username, "password": password}).encode()
    head = (
        f"POST /api/auth/login HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def attacker(url: str, index: int, spread: bool, phase: Phase, stop: asyncio.Event) -> None:
    host_port = url.split("//", 1)[1]
    host, port = host_port.split(":")
    local = (f"127.0.1.{index + 1}", 0) if spread else None
    reader, writer = await asyncio.open_connection(host, int(port), local_addr=local)
    conn = Connection(host_port, reader, writer)
    username = f"stranger-{index}" if spread else "ada"
    request = login_request(host_port, username, "a wrong password")
    try:
        while not stop.is_set():
            status = await conn.exchange(request)
            phase.answers[status] += 1
            if status in (429, 503):
                # A script that ignores Retry-After, but does not spin.
                await asyncio.sleep(REFUSED_PAUSE_S)
    finally:
        conn.close()


async def run_phase(
    url: str, pid: int, cookie: str, device: str | None, phase: Phase, storm: str, seconds: float
) -> None:
    stop = asyncio.Event()
    attackers = []
    if storm != "idle":
        attackers = [
            asyncio.create_task(attacker(url, i, storm == "spread", phase, stop))
            for i in range(ATTACKERS)
        ]
    conn = await Connection.open(url)
    request = (
        f"GET {LIST_PATH} HTTP/1.1\r\nHost: {conn.host}\r\n"
        f"Cookie: skald_session={cookie}\r\nAccept: application/json\r\n\r\n"
    ).encode()
    sampler = RssSampler(pid)
    sampler.start()
    cpu = proc_cpu_s(pid)
    started = time.perf_counter()
    known_task = None
    if storm != "idle":
        known_task = asyncio.create_task(known_browser_login(url, device, seconds / 3))
    while time.perf_counter() - started < seconds:
        t0 = time.perf_counter()
        status = await conn.exchange(request)
        if status == 200:
            phase.latencies.append(time.perf_counter() - t0)
        else:
            phase.errors += 1
        await asyncio.sleep(GAP_S)
    phase.seconds = time.perf_counter() - started
    phase.server_cpu_s = proc_cpu_s(pid) - cpu
    conn.close()
    if known_task is not None:  # the storm goes on until the known browser has its answer
        phase.known_browser = await known_task
    stop.set()
    for task in attackers:  # those still waiting for an answer give up
        task.cancel()
    await asyncio.gather(*attackers, return_exceptions=True)
    sampler.stop = True
    sampler.join()
    phase.peak_rss_kib = sampler.peak


async def known_browser_login(url: str, device: str | None, after_s: float) -> str:
    await asyncio.sleep(after_s)
    cookies = {"skald_device": device} if device else {}
    async with httpx.AsyncClient(base_url=url, cookies=cookies, timeout=KNOWN_TIMEOUT_S) as http:
        t0 = time.perf_counter()
        try:
            r = await http.post("/api/auth/login", json={"username": "bo", "password": MEMBER_PW})
        except httpx.TimeoutException:
            return f"no answer in {KNOWN_TIMEOUT_S:.0f} s"
        return f"{r.status_code} in {time.perf_counter() - t0:.2f} s"


def sign_in_times(url: str, rounds: int) -> dict[str, list[float]]:
    """Alternate a name that does not exist and a wrong password, each from its own address."""
    times: dict[str, list[float]] = {"unknown name": [], "wrong password": []}
    for i in range(rounds):
        for kind, username, third in (
            ("unknown name", f"nobody-{i}", 2),
            ("wrong password", TIMING_ACCOUNTS[i % len(TIMING_ACCOUNTS)], 3),
        ):
            transport = httpx.HTTPTransport(local_address=f"127.0.{third}.{i + 1}")
            with httpx.Client(transport=transport, timeout=60) as http:
                t0 = time.perf_counter()
                r = http.post(
                    f"{url}/api/auth/login", json={"username": username, "password": "wrong!"}
                )
                elapsed = time.perf_counter() - t0
            if r.status_code != 401:
                raise SystemExit(f"timing: {username} got {r.status_code}, not 401")
            times[kind].append(elapsed)
    return times


def report_times(times: dict[str, list[float]]) -> None:
    for kind, values in times.items():
        ms = sorted(v * 1000 for v in values)
        print(
            f"  timing, {kind:<15} n={len(ms):<3} p10 {percentile(ms, 10):7.1f} ms  "
            f"median {statistics.median(ms):7.1f} ms  p90 {percentile(ms, 90):7.1f} ms"
        )


def report(args: argparse.Namespace, phases: list[Phase], memory: dict[str, int]) -> None:
    print(f"skald login storm benchmark, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
        f"{args.seconds:g} s per phase, {ATTACKERS} parallel wrong sign-ins"
    )
    print()
    idle_p99 = percentile(sorted(phases[0].latencies), 99) * 1000
    print(
        f"  {'phase':<22} {'lists':>6} {'p50 ms':>8} {'p99 ms':>8} {'p99/idle':>9} "
        f"{'srv CPU':>8} {'peak RSS':>9}  answers to the attackers; known browser"
    )
    for p in phases:
        ms = sorted(v * 1000 for v in p.latencies)
        p99 = percentile(ms, 99)
        answers = ", ".join(f"{n} x {s}" for s, n in sorted(p.answers.items())) or "-"
        extra = f"; known browser {p.known_browser}" if p.answers else ""
        print(
            f"  {p.name:<22} {len(ms):>6} {statistics.median(ms):>8.2f} {p99:>8.2f} "
            f"{p99 / idle_p99:>8.1f}x {100 * p.server_cpu_s / p.seconds:>7.0f}% "
            f"{p.peak_rss_kib / 1024:>7.0f} M  {answers}{extra}"
        )
        if p.errors:
            print(f"    {p.errors} listings failed")
    print()
    print(f"  server RSS at rest before the phases   {memory['rest'] / 1024:7.1f} MiB")
    print(f"  server VmHWM before the phases         {memory['hwm_before'] / 1024:7.1f} MiB")
    print(f"  server VmHWM after the phases          {memory['hwm_after'] / 1024:7.1f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 s per phase instead of 10 s")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per phase")
    args = parser.parse_args(argv)
    if args.seconds is None:
        args.seconds = 4.0 if args.quick else 10.0

    with tempfile.TemporaryDirectory(prefix="skald-bench-login-") as tmp:
        server = ServerProcess(Path(tmp), SKALD_SECURITY_KDF_PROFILE="default")
        try:
            server.create_admin()
            for name in MEMBERS:
                server.add_user(name, MEMBER_PW)
            server.start()
            assert server.proc is not None
            pid = server.proc.pid
            signed_in = {name: Api(server.url) for name in MEMBERS}
            for name, api in signed_in.items():
                api.login(name, MEMBER_PW)
            bo = signed_in["bo"]
            cookie = bo.session_cookie
            device = bo.http.cookies.get("skald_device")
            time.sleep(SETTLE_S)
            memory = {"rest": proc_status(pid, "VmRSS"), "hwm_before": proc_status(pid, "VmHWM")}
            times = sign_in_times(server.url, 6 if args.quick else TIMING_ROUNDS)
            time.sleep(SETTLE_S)
            phases = [
                Phase("idle"),
                Phase("storm, one address"),
                Phase("storm, 100 addresses"),
            ]
            for phase, storm in zip(phases, ("idle", "one", "spread"), strict=True):
                asyncio.run(run_phase(server.url, pid, cookie, device, phase, storm, args.seconds))
                time.sleep(SETTLE_S)
            memory["hwm_after"] = proc_status(pid, "VmHWM")
            for api in signed_in.values():
                api.close()
            report(args, phases, memory)
            report_times(times)
            try:
                server.stop()
            except subprocess.TimeoutExpired:
                print("\nthe server did not stop within 15 s of SIGTERM (still busy)")
        finally:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
