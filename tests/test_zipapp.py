"""The shipped artefact: the zipapp built by ci/build.sh, run the way an install runs it.

The pyz comes from `$SKALD_TEST_PYZ` (ci/test.sh builds it and sets the variable). It is
copied into an empty directory outside the repository and run by the system interpreter
(not this venv), with a clean environment, so nothing from the checkout or the venv can
leak in and hide a missing file or dependency.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest
from prerequisites import (
    built_pyz_fixture,  # noqa: F401  (the `built_pyz` fixture)
    unavailable,
)
from release_support import pyz_env

import skald

REPO = Path(__file__).resolve().parents[1]


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"zipapp tests: {reason}")


@pytest.fixture(scope="module")
def system_python() -> str:
    system = Path("/usr/bin/python3")
    if system.is_file():
        return str(system)
    found = shutil.which("python3")
    if found is None:
        _unavailable("no system python3 (/usr/bin/python3 or python3 on PATH)")
    return found


@dataclass(frozen=True)
class Sandbox:
    """An empty working directory holding only the pyz, plus its SHIV_ROOT and HOME."""

    cwd: Path
    pyz: Path
    shiv_root: Path
    home: Path
    python: str
    env: dict[str, str] = field(repr=False)  # keep the environment out of reports

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.python, str(self.pyz), *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def sandbox(built_pyz: Path, system_python: str) -> Iterator[Sandbox]:
    with tempfile.TemporaryDirectory(prefix="skald-pyz-") as tmp:
        base = Path(tmp).resolve()
        assert not base.is_relative_to(REPO), f"temp dir {base} is inside the repository"
        cwd, shiv_root, home = base / "run", base / "shiv", base / "home"
        for d in (cwd, shiv_root, home):
            d.mkdir()
        # Same name as in an install (releases/<version>/skald.pyz).
        pyz = cwd / "skald.pyz"
        shutil.copy2(built_pyz, pyz)
        yield Sandbox(
            cwd=cwd,
            pyz=pyz,
            shiv_root=shiv_root,
            home=home,
            python=system_python,
            env=pyz_env(shiv_root, home),
        )


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def test_version_runs_from_an_empty_dir_with_the_system_python(sandbox: Sandbox) -> None:
    proc = sandbox.run("version", timeout=120)
    assert proc.returncode == 0, _describe(proc)
    assert proc.stdout.strip() == f"skald {skald.__version__}", _describe(proc)
    # Extraction honours SHIV_ROOT (the wrapper relies on it) and nothing lands in ~/.shiv.
    assert any(sandbox.shiv_root.iterdir()), "nothing was extracted into SHIV_ROOT"
    assert not (sandbox.home / ".shiv").exists()


def test_selftest_passes(sandbox: Sandbox) -> None:
    proc = sandbox.run("selftest", timeout=600)
    assert proc.returncode == 0, _describe(proc)


def test_sha256_file_matches_the_pyz(built_pyz: Path) -> None:
    sha_file = built_pyz.with_name(built_pyz.name + ".sha256")
    assert sha_file.is_file(), f"{sha_file} is missing"
    content = sha_file.read_text(encoding="ascii")
    # `sha256sum` format with the bare file name, so `sha256sum -c` works in its directory.
    match = re.fullmatch(r"([0-9a-f]{64})  (\S+)\n", content)
    assert match, f"not in sha256sum format: {content!r}"
    assert match.group(2) == built_pyz.name
    digest = hashlib.sha256()
    with built_pyz.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    assert match.group(1) == digest.hexdigest()
