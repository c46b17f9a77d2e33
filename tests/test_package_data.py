"""Every file the package holds besides its Python modules is shipped: a prompt or a page
left out of `[tool.setuptools.package-data]` works from a checkout (the tests' editable
install) and breaks the zipapp a household installs, at the first import that reads it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "skald"


def _regex(pattern: str) -> re.Pattern[str]:
    """setuptools' glob: `**/` spans any folders, `*` stays within one name."""
    out = ""
    for piece in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
            piece, re.escape(piece)
        )
    return re.compile(out)


def _shipped(relative: str, patterns: list[str]) -> bool:
    return any(_regex(p).fullmatch(relative) for p in patterns)


def test_every_data_file_in_the_package_is_named_by_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["skald"]
    files = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert files, "no data files found: the walk is wrong"
    assert [f for f in files if not _shipped(f, patterns)] == []
