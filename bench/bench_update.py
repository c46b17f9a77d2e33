"""Update downtime and rollback time, on a real systemd (the end-to-end test box).

Run from the repository root as root, with Docker running and the box image built
(`tests/e2e/build-systemd-image.sh`), and a cp313 pyz (`ci/build.sh --python-version
3.13`, passed as SKALD_TEST_PYZ_313 or built here):

    .venv/bin/python bench/bench_update.py            # 5 updates, 3 rollbacks
    .venv/bin/python bench/bench_update.py --quick    # 2 updates, 1 rollback

The box installs 1.0.0 through `curl | bash` as alice; every round publishes the next
version (rewritten from one build) and runs `update.sh`. While it runs, a thread on the
host polls `/api/health` every 20 ms and records which version answered when. Figures:

- downtime: last answer of the old version -> first answer of the new one (what a
  household notices: stop, snapshot, switch, start, boot to healthy);
- update.sh: the script's wall time (download, verify and selftest happen while the old
  version still serves, so they are not downtime);
- rollback: for a build that never becomes healthy, last answer of the old version ->
  first answer of the old version again (stop, snapshot, switch, failed start detected,
  restore, switch back, start).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import free_port
from release_support import build_pyz, make_variant, package_and_publish, serve_tree
from systemd_support import SystemdBox

HOME = "/home/alice/.local/share/skald"


class Poller:
    """Polls /api/health; `answers` holds (monotonic time, version or None)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answers: list[tuple[float, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=0.5) as http:
            while not self._stop.is_set():
                try:
                    r = http.get(f"http://127.0.0.1:{self.port}/api/health")
                    version = r.json().get("version") if r.status_code == 200 else None
                except httpx.HTTPError:
                    version = None
                self.answers.append((time.monotonic(), version))
                time.sleep(0.02)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def gap(self, old: str, new: str) -> float:
        """Seconds between the last `old` answer and the first `new` answer after it."""
        last_old = max(t for t, v in self.answers if v == old)
        first_new = min(t for t, v in self.answers if v == new and t > last_old - 1e-9)
        if old == new:
            # Rollback: the last answer before the outage, the first one after it.
            outage = [t for t, v in self.answers if v != old]
            start = max(t for t, v in self.answers if v == old and t < min(outage))
            end = min(t for t, v in self.answers if v == old and t > max(outage))
            return end - start
        return first_new - last_old


def _base_pyz() -> Path:
    given = os.environ.get("SKALD_TEST_PYZ_313")
    if given:
        return Path(given)
    return build_pyz("3.13", "0.0.1", Path(tempfile.mkdtemp(prefix="bench-update-")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 updates and 1 rollback")
    args = parser.parse_args()
    updates, rollbacks = (2, 1) if args.quick else (5, 3)

    base = _base_pyz()
    work = Path(tempfile.mkdtemp(prefix="bench-update-"))
    tree = work / "tree"
    tree.mkdir()
    url, stop = serve_tree(tree)
    port = free_port()

    def publish(version: str, broken: bool = False) -> None:
        pyz = make_variant(base, work / "builds" / version, version, broken=broken)
        package_and_publish([pyz], version, "stable", tree)

    downtime: list[float] = []
    script: list[float] = []
    rollback: list[float] = []
    try:
        with SystemdBox() as box:
            publish("1.0.0")
            box.exec(
                f"curl -fsSL {url}/install.sh | SKALD_RELEASES_URL={url} SKALD_PORT={port} bash",
                user="alice",
                timeout=300,
            )
            current = "1.0.0"
            for n in range(1, updates + 1):
                new = f"1.{n}.0"
                publish(new)
                with Poller(port) as poller:
                    began = time.monotonic()
                    box.exec(f"{HOME}/update.sh", user="alice", timeout=300)
                    script.append(time.monotonic() - began)
                    time.sleep(0.3)
                downtime.append(poller.gap(current, new))
                current = new
                print(f"update {new}: down {downtime[-1]:.2f} s, update.sh {script[-1]:.1f} s")
            for n in range(rollbacks):
                bad = f"{updates}.{n + 1}.0"
                publish(bad, broken=True)
                with Poller(port) as poller:
                    proc = box.exec(f"{HOME}/update.sh", user="alice", timeout=300, check=False)
                    assert proc.returncode != 0, proc.stdout
                    time.sleep(0.3)
                rollback.append(poller.gap(current, current))
                print(f"broken {bad}: back on {current} after {rollback[-1]:.2f} s")
    finally:
        stop()

    def line(name: str, values: list[float]) -> str:
        return (
            f"{name:<12} median {statistics.median(values):6.2f} s   "
            f"min {min(values):6.2f} s   max {max(values):6.2f} s   (n={len(values)})"
        )

    print()
    print(line("downtime", downtime))
    print(line("update.sh", script))
    print(line("rollback", rollback))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
