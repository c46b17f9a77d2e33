"""`ci/screenshots.py` (the manual's pictures) still works: run for one page, one width
and one language into a scratch folder, it writes a PNG of exactly that viewport.

The full run is not part of the suite (about two minutes); this keeps the script from
rotting silently when a page, a test id or the seeding API changes. It needs the same
Chromium and Playwright as the browser tests (skip, or fail under `SKALD_CI`).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from ui_support import browser_or_skip

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@pytest.mark.timeout(180)
def test_the_screenshot_script_writes_a_picture_of_the_asked_page_at_the_asked_size(
    tmp_path: Path,
) -> None:
    browser_or_skip()
    out = tmp_path / "images"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(ROOT / "ci" / "screenshots.py"), "--out", str(out),
         "--scratch", str(tmp_path / "scratch"), "--pages", "files", "--widths", "375", "--langs", "it"],
        capture_output=True, text=True, env=env, timeout=170, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [p.name for p in out.iterdir()] == ["files-375-it.png"]
    picture = out / "files-375-it.png"
    assert _png_size(picture) == (375, 812)
    assert picture.stat().st_size > 5_000  # a rendered page, not a blank canvas
    assert "1 screenshots" in done.stdout
    assert not (tmp_path / "scratch" / "it").exists()  # the household is gone again


def test_the_screenshot_script_refuses_a_page_it_does_not_know() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "ci" / "screenshots.py"), "--pages", "nowhere"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown: nowhere" in done.stderr
