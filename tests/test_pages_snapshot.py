"""The built-in pages and web folders stay byte-identical to the stored snapshot
(tests/data/pages_snapshot.json): `GET /api/pages` serves these `Page`s as they are, and
the web app has no table of its own, so one changed field moves, renames or hides an
entry for every member. A refactor of how features declare them must not show here.
The built-ins declare them with `FeatureWeb` (skald/plugins/specs.py): its conventions
and its bound hooks are tested below on a feature of their own.

To accept a deliberate change, rewrite the snapshot and review the diff:

    SKALD_REFRESH_PAGES_SNAPSHOT=1 python -m pytest tests/test_pages_snapshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from skald.plugins.manager import Plugins
from skald.plugins.specs import FeatureWeb, Page, WebFiles

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


def test_a_feature_web_derives_what_the_built_ins_always_wrote_and_takes_what_differs(
    tmp_path: Path,
) -> None:
    web = FeatureWeb(str(tmp_path / "jar" / "hooks.py"), "jar", "coin-jar")
    web.page("/admin/coin-jars", "AdminCoinJarsPage", order=130)
    web.page("/jar", "JarPage", module="main.js", title="nav.mine", say_not_allowed=False)
    assert web.skald_web_files() == [WebFiles("coin-jar", tmp_path / "jar")]
    assert web.skald_pages() == [
        Page(
            path="/admin/coin-jars",
            title="nav.coin_jars",
            module="plugins/coin-jar/admin-coin-jars.js",
            component="AdminCoinJarsPage",
            order=130,
            testid="nav-admin-coin-jars",
            say_not_allowed=True,
        ),
        Page(
            path="/jar",
            title="nav.mine",
            module="plugins/coin-jar/main.js",
            component="JarPage",
            testid="nav-jar",
        ),
    ]


def test_a_hooks_module_binding_a_feature_webs_hooks_is_collected_like_one_defining_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "jar_hooks.py").write_text(
        "from skald.plugins.specs import FeatureWeb\n"
        "WEB = FeatureWeb(__file__, 'jar')\n"
        "WEB.page('/jar', 'JarPage')\n"
        "skald_pages = WEB.skald_pages\n"
        "skald_web_files = WEB.skald_web_files\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = Plugins.load(["jar_hooks"], entry_points=False)
    assert [p.path for p in plugins.pages() if p.component == "JarPage"] == ["/jar"]
    assert plugins.web_files()[-1] == WebFiles("jar", tmp_path / "jar")
