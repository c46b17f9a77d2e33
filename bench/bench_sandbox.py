"""Sandbox and Files benchmark: what Skald's exec path adds to a Docker exec, and how fast
a folder streams out as a ZIP with the server's memory staying flat.

Run from the repository root (Docker running, the runtime image built):

    .venv/bin/python bench/bench_sandbox.py            # 300 execs each, a 500 MB folder
    .venv/bin/python bench/bench_sandbox.py --quick    # 60 execs each, a 100 MB folder

Part 1, exec round trip. A runtime is booted in this process on a scratch data directory
with the sandbox on; the sandbox manager creates the container of a throwaway member.
The same trivial command (`echo x`) then runs, alternately:
- through `skald.sandbox.execute.run_command`, the function the `execute_cmd` tool calls
  (exec create, streamed output through the manager's pools, exec inspect; in the
  container: `setsid -w bash -c WRAPPER` with its pidfile, then `bash -c "echo x"`);
- through a bare Docker Engine API exec with the docker SDK, `container.exec_run`, on a
  client of its own, as the same uid:gid;
- the same bare exec of `bash -c "echo x"`, which tells how much of the difference is
  the shells that Skald's wrapper starts.
Each figure is the wall time of one call, from this process, one call at a time.
DESIGN.md §5: Skald's exec round trip within 1.5x of a bare Docker exec.

Part 2, ZIP streaming. A real `skald serve` (tests/harness.py, sandbox off) with a
member whose home holds `bigfolder`: a few large random files (media suffixes, stored
as they are, and one `.bin`, compressed) and many small text files in subfolders. The
member signs in and downloads `GET /api/files/zip?path=~/bigfolder` with httpx as a
stream, writing it to a file. A thread polls the server's VmRSS every 20 ms during the
download; the ZIP's central directory is checked against the folder afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness import Api, ServerProcess

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.client import DockerUnavailable, connect
from skald.sandbox.execute import run_command
from skald.sandbox.image import has_image, image_tag
from skald.sandbox.manager import CONTAINER_HOME, LABEL_INSTANCE

# Without compression, then as a browser asks for it (the server's gzip middleware).
ENCODINGS = ("identity", "gzip, deflate")
MB = 1_000_000
MIB = 1024 * 1024
MEMBER = "ada"
MEMBER_PW = "a member's long password"
COMMAND = "echo x"
SANDBOX_ENV = {
    "SKALD_SECURITY_KDF_PROFILE": "test",
    "SKALD_SANDBOX_ENABLED": "true",
    "SKALD_SANDBOX_MEMORY_MB": "512",
}


@dataclass(frozen=True)
class Plan:
    execs: int
    warmup: int
    folder_mb: int


FULL = Plan(execs=300, warmup=20, folder_mb=500)
QUICK = Plan(execs=60, warmup=10, folder_mb=100)


# -- part 1: exec round trip ----------------------------------------------------------------


@dataclass
class ExecTimes:
    skald: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    bare_bash: list[float] = field(default_factory=list)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]


async def wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def remove_instance(client: Any, instance_id: str) -> None:
    label = f"{LABEL_INSTANCE}={instance_id}"
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True)
    for network in client.networks.list(filters={"label": label}):
        network.remove()


async def bench_exec(plan: Plan, scratch: Path) -> ExecTimes:
    docker = connect(os.environ.get("DOCKER_HOST", ""))
    if not has_image(docker, image_tag()):
        raise SystemExit(f"the runtime image {image_tag()} is missing: run `skald image build`")
    layout = DataLayout(scratch / "exec-data")
    rt = await Runtime.boot(layout, load_config(layout.root, SANDBOX_ENV), announce=io.StringIO())
    manager = rt.sandbox
    assert manager is not None
    instance = manager.instance_id
    times = ExecTimes()
    try:
        await wait_until(lambda: manager.state == "ok", 60, "the sandbox manager")
        created = await rt.core.users.create("benchuser", MEMBER_PW, "member")
        user, role = await rt.member(created.user.id)
        container_id = await manager.ensure(user, role)
        container = docker.containers.get(container_id)

        async def skald_once() -> float:
            started = time.perf_counter()
            result = await run_command(
                manager,
                container_id,
                COMMAND,
                workdir=CONTAINER_HOME,
                timeout_s=30,
                max_bytes=64 * 1024,
            )
            elapsed = time.perf_counter() - started
            if result.exit_code != 0 or result.output != "x\n":
                raise RuntimeError(f"unexpected result through Skald: {result}")
            return elapsed

        def bare_once(cmd: str | list[str]) -> float:
            # Blocking on purpose: this is the plain SDK call, nothing around it.
            started = time.perf_counter()
            code, output = container.exec_run(cmd, user=manager.exec_user)
            elapsed = time.perf_counter() - started
            if code != 0 or output != b"x\n":
                raise RuntimeError(f"unexpected bare result: {code} {output!r}")
            return elapsed

        bash_cmd = ["bash", "-c", COMMAND]
        for _ in range(plan.warmup):
            await skald_once()
            bare_once(COMMAND)
            bare_once(bash_cmd)
        for i in range(plan.execs):
            # Rotate the order so that neither side always follows the other.
            async def skald_step() -> None:
                times.skald.append(await skald_once())

            async def bare_step() -> None:
                times.bare.append(bare_once(COMMAND))

            async def bash_step() -> None:
                times.bare_bash.append(bare_once(bash_cmd))

            steps: list[Callable[[], Awaitable[None]]] = [skald_step, bare_step, bash_step]
            shift = i % 3
            for step in steps[shift:] + steps[:shift]:
                await step()
    finally:
        await rt.shutdown()
        try:
            await asyncio.to_thread(remove_instance, docker, instance)
        except Exception as exc:  # never hide the run's own error behind the cleanup's
            print(f"could not remove the containers of {instance}: {exc}", file=sys.stderr)
        docker.close()
    return times


# -- part 2: ZIP streaming ------------------------------------------------------------------


@dataclass(frozen=True)
class Folder:
    files: int
    dirs: int
    bytes: int
    large: list[tuple[str, int]]
    small_files: int
    small_bytes: int


TEXT = (
    "the household assistant keeps notes about shopping lists recipes school trips "
    "appointments garden plans holiday photos invoices letters from the bank and the "
    "music lessons of the children while the kettle boils and the cat sleeps on the sofa "
    "remember to water the tomatoes call grandma on sunday and renew the car insurance"
)


def text_pool(rng: random.Random, size: int) -> str:
    words = TEXT.split()
    lines = []
    total = 0
    while total < size:
        line = " ".join(rng.choices(words, k=rng.randint(6, 16))).capitalize() + ".\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def make_folder(root: Path, total_mb: int) -> Folder:
    """`total_mb` of content: 90 % in four large random files, 10 % in small texts."""
    rng = random.Random(42)
    root.mkdir(parents=True)
    total = total_mb * MB
    large_total = total * 9 // 10
    # Stored media (no compression, like real photos and videos) and one file that the
    # server deflates although it cannot shrink: the worst case for its CPU.
    shares = (("holiday.mp4", 0.4), ("photos.zip", 0.2), ("scan.jpg", 0.1), ("disk.bin", 0.3))
    large = []
    for name, share in shares:
        size = int(large_total * share)
        with (root / name).open("wb") as out:
            left = size
            while left > 0:
                block = os.urandom(min(4 * MIB, left))
                out.write(block)
                left -= len(block)
        large.append((name, size))
    pool = text_pool(rng, 2 * MIB)
    small_total = total - sum(size for _, size in large)
    small_files = small_bytes = 0
    dirs = 0
    while small_bytes < small_total:
        sub = root / "notes" / f"year-{2000 + small_files // 200}"
        if not sub.exists():
            sub.mkdir(parents=True)
            dirs += 1
        size = min(rng.randint(2_000, 40_000), small_total - small_bytes)
        start = rng.randrange(0, len(pool) - size)
        (sub / f"note-{small_files:05d}.txt").write_text(pool[start : start + size])
        small_files += 1
        small_bytes += size
    dirs += 1  # notes/
    return Folder(
        files=len(large) + small_files,
        dirs=dirs,
        bytes=sum(size for _, size in large) + small_bytes,
        large=large,
        small_files=small_files,
        small_bytes=small_bytes,
    )


def proc_status(pid: int, key: str) -> int:
    """A memory figure from /proc/<pid>/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(key)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssPoller(threading.Thread):
    """Samples a process's VmRSS (KiB) until stopped, with the bytes received so far."""

    def __init__(self, pid: int, progress: Callable[[], int], every_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.progress = progress
        self.every_s = every_s
        self.samples: list[tuple[int, int]] = []  # (bytes received, VmRSS KiB)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((self.progress(), proc_status(self.pid, "VmRSS")))
            self.done.wait(self.every_s)

    def stop(self) -> None:
        self.done.set()
        self.join()

    @property
    def peak_kib(self) -> int:
        return max(rss for _, rss in self.samples)

    def at_fraction(self, fraction: float, total: int) -> int:
        """The RSS sampled when the download had reached `fraction` of `total` bytes."""
        for received, rss in self.samples:
            if received >= fraction * total:
                return rss
        return self.samples[-1][1]


@dataclass
class ZipRun:
    folder: Folder
    encoding: str
    content_encoding: str = ""
    zip_bytes: int = 0
    wire_bytes: int = 0
    seconds: float = 0.0
    first_byte_s: float = 0.0
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    hwm_before_kib: int = 0
    hwm_after_kib: int = 0
    rss_peak_kib: int = 0
    rss_quartiles_kib: list[int] = field(default_factory=list)
    samples: int = 0
    server_cpu_s: float = 0.0


def bench_zip(plan: Plan, scratch: Path) -> list[ZipRun]:
    server = ServerProcess(scratch / "zip-server")
    try:
        server.create_admin()
        r = server.cli(
            "user", "add", MEMBER, "--role", "member", "--password-stdin", stdin=MEMBER_PW + "\n"
        )
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        server.start()
        assert server.proc is not None
        api = Api(server.url)
        me = api.login(MEMBER, MEMBER_PW)
        home = server.data / "homes" / str(me["id"])
        home.mkdir(mode=0o700, exist_ok=True)
        print(f"  writing a {plan.folder_mb} MB folder ...", file=sys.stderr)
        folder = make_folder(home / "bigfolder", plan.folder_mb)
        runs = []
        for encoding in ENCODINGS:
            print(f"  downloading, Accept-Encoding: {encoding} ...", file=sys.stderr)
            runs.append(download(api, server.proc.pid, encoding, scratch / "download.zip", folder))
        api.close()
        return runs
    finally:
        server.close()


def download(api: Api, pid: int, encoding: str, target: Path, folder: Folder) -> ZipRun:
    """One streamed download of the folder's ZIP, with the server's RSS polled."""
    run = ZipRun(folder=folder, encoding=encoding)
    time.sleep(1.0)  # let the server settle
    run.rss_before_kib = proc_status(pid, "VmRSS")
    run.hwm_before_kib = proc_status(pid, "VmHWM")
    response: httpx.Response | None = None
    poller = RssPoller(pid, lambda: response.num_bytes_downloaded if response else 0)
    cpu_before = proc_cpu_s(pid)
    poller.start()
    started = time.perf_counter()
    try:
        with (
            api.http.stream(
                "GET",
                "/api/files/zip",
                params={"path": "~/bigfolder"},
                headers={"Accept-Encoding": encoding},
                timeout=httpx.Timeout(60.0),
            ) as response,
            target.open("wb") as out,
        ):
            if response.status_code != 200:
                response.read()
                raise RuntimeError(f"zip download: {response.status_code} {response.text}")
            run.content_encoding = response.headers.get("content-encoding", "identity")
            for chunk in response.iter_bytes(256 * 1024):
                if not run.first_byte_s:
                    run.first_byte_s = time.perf_counter() - started
                out.write(chunk)
                run.zip_bytes += len(chunk)
        run.seconds = time.perf_counter() - started
    finally:
        poller.stop()
    run.wire_bytes = response.num_bytes_downloaded
    run.server_cpu_s = proc_cpu_s(pid) - cpu_before
    run.rss_peak_kib = poller.peak_kib
    run.rss_quartiles_kib = [poller.at_fraction(f, run.wire_bytes) for f in (0.25, 0.5, 0.75, 1)]
    run.samples = len(poller.samples)
    time.sleep(1.0)
    run.rss_after_kib = proc_status(pid, "VmRSS")
    run.hwm_after_kib = proc_status(pid, "VmHWM")
    check_zip(target, folder)
    target.unlink()
    return run


def check_zip(path: Path, folder: Folder) -> None:
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    files = [i for i in infos if not i.is_dir()]
    content = sum(i.file_size for i in files)
    if len(files) != folder.files or content != folder.bytes:
        raise RuntimeError(
            f"the ZIP holds {len(files)} files, {content} bytes; "
            f"the folder {folder.files} files, {folder.bytes} bytes"
        )


# -- report ---------------------------------------------------------------------------------


def row(name: str, value: str, unit: str = "") -> None:
    print(f"  {name:<44}{value:>12}  {unit}")


def report(args: argparse.Namespace, times: ExecTimes | None, zruns: list[ZipRun]) -> None:
    print()
    print(f"skald sandbox benchmark, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.2f}; {'quick' if args.quick else 'full'} run"
    )
    if times is not None:
        print()
        print(f"exec round trip of `{COMMAND}`, {len(times.skald)} calls each")
        for name, values in (
            ("Skald run_command", times.skald),
            ("bare exec_run", times.bare),
            ("bare exec_run of bash -c", times.bare_bash),
        ):
            row(f"{name} p50", f"{statistics.median(values) * 1000:.2f}", "ms")
            row(f"{name} p99", f"{p99(values) * 1000:.2f}", "ms")
        ratio50 = statistics.median(times.skald) / statistics.median(times.bare)
        ratio99 = p99(times.skald) / p99(times.bare)
        verdict = "within" if ratio50 <= 1.5 else "OVER"
        row("ratio Skald / bare, p50", f"{ratio50:.2f}", f"x ({verdict} the 1.5x budget)")
        row("ratio Skald / bare, p99", f"{ratio99:.2f}", "x")
    if zruns:
        f = zruns[0].folder
        print()
        large = ", ".join(f"{name} {size / MB:.0f} MB" for name, size in f.large)
        print(
            f"ZIP of ~/bigfolder: {f.bytes / MB:.0f} MB in {f.files} files, {f.dirs} folders "
            f"({large}; {f.small_files} text files, {f.small_bytes / MB:.0f} MB)"
        )
    for zr in zruns:
        print(f"  Accept-Encoding: {zr.encoding} (answered: {zr.content_encoding})")
        row("download time", f"{zr.seconds:.2f}", "s")
        row("first byte after", f"{zr.first_byte_s * 1000:.0f}", "ms")
        row("throughput, folder content", f"{f.bytes / MB / zr.seconds:.1f}", "MB/s")
        row("throughput, bytes on the wire", f"{zr.wire_bytes / MB / zr.seconds:.1f}", "MB/s")
        row(
            "ZIP size / bytes on the wire",
            f"{zr.zip_bytes / MB:.1f} / {zr.wire_bytes / MB:.1f}",
            "MB",
        )
        row("server CPU during the download", f"{zr.server_cpu_s / zr.seconds * 100:.0f}", "% core")
        row("server RSS before", f"{zr.rss_before_kib / 1024:.1f}", "MiB")
        quartiles = " / ".join(f"{k / 1024:.1f}" for k in zr.rss_quartiles_kib)
        row("server RSS at 25/50/75/100 %", quartiles, "MiB")
        row(
            f"server peak RSS during ({zr.samples} samples)", f"{zr.rss_peak_kib / 1024:.1f}", "MiB"
        )
        row("server RSS after", f"{zr.rss_after_kib / 1024:.1f}", "MiB")
        row(
            "server VmHWM before / after",
            f"{zr.hwm_before_kib / 1024:.1f} / {zr.hwm_after_kib / 1024:.1f}",
            "MiB",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer execs, a 100 MB folder")
    parser.add_argument("--only", choices=("exec", "zip"), help="run one part only")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    times: ExecTimes | None = None
    zruns: list[ZipRun] = []
    with tempfile.TemporaryDirectory(prefix="skald-bench-sandbox-") as tmp:
        scratch = Path(tmp)
        if args.only in (None, "exec"):
            print("part 1: exec round trip ...", file=sys.stderr)
            try:
                times = asyncio.run(bench_exec(plan, scratch))
            except DockerUnavailable as exc:
                print(f"Docker is not reachable: {exc}", file=sys.stderr)
                return 2
        if args.only in (None, "zip"):
            print("part 2: ZIP streaming ...", file=sys.stderr)
            zruns = bench_zip(plan, scratch)
    report(args, times, zruns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
