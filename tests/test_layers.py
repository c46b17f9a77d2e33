"""The layer contracts of docs/dev/architecture.md hold, and the checker notices a break.

The bad import is planted in a copy of the package in a temporary folder, never in the
product; the copy is checked with the project's own contracts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "skald", tmp_path / "skald", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_product_keeps_every_layer_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract"),
    [
        ("agent/_planted.py", "import skald.store.database\n", "The agent library knows nothing"),
        ("agent/_planted.py", "import httpx\n", "The agent library knows nothing"),
        ("store/_planted.py", "import skald.core.users\n", "Storage imports no core"),
        ("core/_planted.py", "import skald.api.app\n", "Layers of docs/dev/architecture.md"),
        (
            "features/schedule/_planted.py",
            "import skald.features.notifications.batch\n",
            "A feature does not import another feature's modules",
        ),
        (
            "features/schedule/_planted.py",
            "import skald.core.user_runtime\n",
            "Features do not import the runtimes",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tree: Path, module: str, bad_import: str, contract: str
) -> None:
    (tree / "skald" / module).write_text(bad_import, encoding="utf-8")
    result = lint(tree)
    assert result.returncode != 0
    # A contract with ignored imports says "BROKEN (n ignored imports)".
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout


def test_an_import_cycle_between_subpackages_is_refused(tree: Path) -> None:
    # files already imports store; store importing files closes a cycle.
    (tree / "skald" / "store" / "_planted.py").write_text("import skald.files.router\n")
    result = lint(tree)
    assert result.returncode != 0
    assert "No import cycles between the subpackages of a package BROKEN" in result.stdout


def test_the_architecture_picture_is_the_code_s() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "ci" / "import_graph.py"),
            "--check",
            "docs/dev/architecture.md",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
