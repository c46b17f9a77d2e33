"""Where a cold start of `skald serve` goes: imports, the first database open, the
Docker probe, and exec to the first answer of `/api/health`.

Run from the repository root:

    .venv/bin/python bench/bench_start.py            # 5 rounds of each
    .venv/bin/python bench/bench_start.py --rounds 2

Every figure is the median of `--rounds` fresh processes (each import measurement is a
new interpreter, so nothing is cached in `sys.modules`; the operating system's file cache
is warm after the first round, as it is on a server that restarts):

1. `python -X importtime -c "import skald.server, skald.cli"`: the self time of every
   module, summed per top-level package (skald's own modules by subpackage), and the
   wall time of that interpreter;
2. `Core.open` on a fresh data directory (creates and migrates the registry, SQLCipher)
   and on an existing one, in a new process each, timed in process;
3. the Docker probe the sandbox watcher makes at start (`SandboxManager.check`:
   connect, ping, image lookup), skipped without a Docker engine;
4. `skald serve` from exec to the first 200 of `/api/health` (polled every 10 ms), on a
   fresh data directory and again on the same (existing) one, with the environment of
   tests/harness.py (test KDF profile, sandbox off; `--sandbox`: on, so the start
   includes the sandbox watcher's first look at Docker). The first start is timed
   apart: it writes the bytecode (and, with `--pyz FILE`, extracts the built file from
   nothing), as a household's first start does; the rounds after it read them.
   `--pyz` times what ships: the checkout's environment has the test tools' packages,
   some of which Litestar loads when it finds them.

`--only PART` runs one of imports, database, docker, serve.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness import free_port, skald_env

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, *flags: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    return time.perf_counter() - started, done.stderr + done.stdout


def _group(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "skald":
        return ".".join(parts[:2])
    return parts[0]


def imports(rounds: int) -> None:
    walls: list[float] = []
    per: dict[str, list[float]] = defaultdict(list)
    totals: list[float] = []
    for _ in range(rounds):
        wall, err = _python("import skald.server, skald.cli", "-X", "importtime")
        walls.append(wall)
        sums: dict[str, float] = defaultdict(float)
        for line in err.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _, name = line[len("import time:") :].split("|")
            sums[_group(name.strip())] += int(self_us) / 1000
        totals.append(sum(sums.values()))
        for k, v in sums.items():
            per[k].append(v)
    print(f"imports (`import skald.server, skald.cli`), median of {rounds}:")
    print(f"  interpreter wall time {statistics.median(walls) * 1000:7.1f} ms")
    print(f"  sum of import self times {statistics.median(totals):7.1f} ms, by package:")
    ranked = sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))
    for name, values in ranked[:18]:
        print(f"    {name:<28} {statistics.median(values):7.1f} ms")
    rest = sum(statistics.median(v) for _, v in ranked[18:])
    print(f"    {'(the rest)':<28} {rest:7.1f} ms")


OPEN = """
import asyncio, sys, time
from pathlib import Path
from skald.config import load_config
from skald.core.context import Core
from skald.paths import DataLayout
async def main():
    layout = DataLayout(Path(sys.argv[1]))
    config = load_config(layout.root, {"SKALD_SECURITY_KDF_PROFILE": "test"})
    t = time.perf_counter()
    core = await Core.open(layout, config, create=True)
    opened = time.perf_counter() - t
    await core.close()
    print(f"OPEN {opened}")
asyncio.run(main())
"""

PROBE = """
import asyncio, time
from pathlib import Path
from skald.config import load_config
from skald.sandbox.manager import SandboxManager
async def main():
    config = load_config(Path("/nonexistent"), {})
    manager = SandboxManager(config.sandbox, instance_id="bench", homes_dir=Path("/tmp"),
                             docs_dir=Path("/tmp"), members=None)
    t = time.perf_counter()
    await manager.check()
    print(f"PROBE {time.perf_counter() - t} {manager.state}")
    await manager.close()
asyncio.run(main())
"""


def _timed(code: str, *argv: str) -> tuple[float, str]:
    done = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    # The last line is ours; anything before it is the code's own log output.
    words = [ln for ln in done.stdout.splitlines() if ln.startswith(("OPEN ", "PROBE "))][-1]
    parts = words.split()
    return float(parts[1]), " ".join(parts[2:])


def database(rounds: int) -> None:
    fresh, existing = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            fresh.append(_timed(OPEN, f"{tmp}/data")[0])
            existing.append(_timed(OPEN, f"{tmp}/data")[0])
    print(f"first database open (Core.open: registry, SQLCipher, migrations), median of {rounds}:")
    print(f"  fresh data directory (create + migrate) {statistics.median(fresh) * 1000:7.1f} ms")
    print(f"  existing data directory                 {statistics.median(existing) * 1000:7.1f} ms")


def docker(rounds: int) -> None:
    times, state = [], ""
    for _ in range(rounds):
        took, state = _timed(PROBE)
        times.append(took)
    print(f"Docker probe (SandboxManager.check: connect, ping, image), median of {rounds}:")
    print(f"  {statistics.median(times) * 1000:7.1f} ms (state: {state})")


def _serve_once(root: Path, sandbox: bool = False, pyz: Path | None = None) -> dict[str, float]:
    """Exec `skald serve` and poll `/api/health` every 10 ms until it answers 200; the
    server's own log lines ("boot", "listening") split the time. `pyz`: the built file
    instead of this checkout, extracted once beforehand (as the installer does)."""
    port = free_port()
    argv = ["--data", str(root / "data"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    log_path = root / "serve.log"
    wall = time.time()
    started = time.perf_counter()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            [*_skald(pyz), *argv],
            env=_serve_env(root, sandbox, pyz),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = started + 60
        while time.perf_counter() < deadline:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1)
                if r.status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.01)
        else:
            raise RuntimeError("the server did not answer within 60 s")
        total = time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    marks: dict[str, float] = {}
    for line in log_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("event") in ("boot", "listening") and entry["event"] not in marks:
            stamp = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
            marks[entry["event"]] = stamp.timestamp() - wall
    return {
        "exec -> runtime booted (imports, config, Core.open, boot work)": marks["boot"],
        "booted -> listening (services started, app built)": marks["listening"] - marks["boot"],
        "listening -> first 200 (Granian starts, first request)": total - marks["listening"],
        "total": total,
    }


def _skald(pyz: Path | None) -> list[str]:
    return [sys.executable, "-m", "skald"] if pyz is None else [sys.executable, str(pyz)]


def _serve_env(root: Path, sandbox: bool, pyz: Path | None) -> dict[str, str]:
    env = skald_env(root, SKALD_SANDBOX_ENABLED="true" if sandbox else "false")
    # A service writes its bytecode at its first start and reads it at every later one.
    # A shell that sets this (the development machines do) made every timed start
    # compile all of skald from source: about 0.5 s of the 1.3 s measured before.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pyz is not None:
        # The checkout must not shadow the file's own copy of skald; the extraction is
        # kept beside the file, so only the first start of a new build pays it.
        env.pop("PYTHONPATH", None)
        env["SHIV_ROOT"] = str(pyz.parent / ".shiv")
    return env


def serve(rounds: int, sandbox: bool = False, pyz: Path | None = None) -> None:
    runs: dict[str, list[dict[str, float]]] = {"fresh": [], "existing": []}
    # One start first, timed apart: the file's extraction (from nothing) and the bytecode
    # of everything a start imports are written then, as at a household's first start.
    if pyz is not None:
        shutil.rmtree(pyz.parent / ".shiv", ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        first = _serve_once(Path(tmp), sandbox, pyz)["total"]
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            runs["fresh"].append(_serve_once(Path(tmp), sandbox, pyz))
            runs["existing"].append(_serve_once(Path(tmp), sandbox, pyz))
    where = "on: Docker probed during the start" if sandbox else "off"
    what = "this checkout" if pyz is None else pyz.name
    wrote = "bytecode" if pyz is None else "extraction and bytecode"
    print(f"`skald serve` ({what}, sandbox {where}) exec -> first 200 of /api/health:")
    print(f"  first start ({wrote} written, fresh data directory) {first * 1000:9.1f} ms")
    print(f"  then, median of {rounds}:")
    for kind, results in runs.items():
        print(f"  {kind} data directory:")
        for key in results[0]:
            value = statistics.median(r[key] for r in results) * 1000
            print(f"    {key:<66} {value:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="serve with the sandbox on (needs Docker and the runtime image)",
    )
    parser.add_argument("--only", choices=["imports", "database", "docker", "serve"])
    parser.add_argument(
        "--pyz",
        type=Path,
        help="serve from this built file (ci/build.sh) instead of the checkout: what ships, "
        "without the development tools' packages (Litestar loads some when they are there)",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"skald cold start, python {sys.version.split()[0]}, load average {load:.2f}\n")
    parts: dict[str, Callable[[], None]] = {
        "imports": lambda: imports(args.rounds),
        "database": lambda: database(args.rounds),
        "docker": lambda: docker(args.rounds),
        "serve": lambda: serve(args.rounds, args.sandbox, args.pyz),
    }
    for name, part in parts.items():
        if args.only in (None, name):
            part()
            print()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
