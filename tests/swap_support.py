"""A member who keeps swapping a folder of their home for a link, in their own process
(their own CPU, like a sandbox): the attacker of the race tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The member's side: swap ~/<name> for a link to `target` and back, as fast as it can,
# in its own process (its own CPU, like a sandbox) until `stop` exists.
SWAPPER = r"""
import os, sys
home, name, target, stop = sys.argv[1:5]
swap = os.path.join(home, name)
real = os.path.join(home, "." + name + "-real")
n = 0
while not os.path.exists(stop):
    os.rename(swap, real)
    for j in range(100):
        try:
            os.symlink(target, swap)
            break
        except FileExistsError:  # the server made something there meanwhile: set it aside
            try:
                os.rename(swap, os.path.join(home, f".{name}-made-{n}-l{j}"))
            except FileNotFoundError:
                pass
    for _ in range(20):
        os.stat(swap)  # keep the link in place a little
    os.unlink(swap)
    for k in range(100):
        try:
            os.rename(real, swap)
            break
        except OSError:  # the server made a folder there while it was missing: set it aside
            try:
                os.rename(swap, os.path.join(home, f".{name}-made-{n}-{k}"))
            except FileNotFoundError:
                pass
    for _ in range(100):
        os.stat(swap)  # mostly a folder: the walker lists it, then meets the link inside
    n += 1
print(n)
"""


Swapper = Callable[[Path, str, Path], None]


@pytest.fixture(name="swapper")
def swapper_fixture(tmp_path: Path) -> Iterator[Swapper]:
    """Start the member's swapping process on (home, folder name, link target); it is
    stopped at the end of the test."""
    started: list[tuple[subprocess.Popen[str], Path]] = []

    def start(home: Path, name: str, target: Path) -> None:
        stop = tmp_path / f"stop-{len(started)}"
        proc = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(home), name, str(target), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append((proc, stop))

    yield start
    for proc, stop in started:
        stop.touch()
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert int(out) > 0, "the swapper never swapped"
