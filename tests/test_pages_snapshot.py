"""The built-in pages and web folders stay byte-identical to the stored snapshot
(tests/data/pages_snapshot.json): `GET /api/pages` serves these `Page`s as they are, and
the web app has no table of its own, so one changed field moves, renames or hides an
entry for every member. A refactor of how features declare them must not show here.

To accept a deliberate change, rewrite the snapshot and review the diff:

    SKALD_REFRESH_PAGES_SNAPSHOT=1 python -m pytest tests/test_pages_snapshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from skald.plugins.manager import Plugins

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).parent / "data" / "pages_snapshot.json"
REFRESH = os.environ.get("SKALD_REFRESH_PAGES_SNAPSHOT") == "1"


def _table() -> bytes:
    plugins = Plugins.builtin()
    table = {
        # In the order the navigation sorts them, every field as the browser receives it.
        "pages": msgspec.to_builtins(plugins.pages()),
        "web_files": [
            {"name": part.name, "folder": part.folder.resolve().relative_to(ROOT).as_posix()}
            for part in plugins.web_files()
        ],
    }
    return msgspec.json.format(msgspec.json.encode(table), indent=2) + b"\n"


def test_the_built_in_pages_and_web_folders_are_the_snapshots() -> None:
    found = _table()
    if REFRESH:
        SNAPSHOT.write_bytes(found)
    assert found == SNAPSHOT.read_bytes()
