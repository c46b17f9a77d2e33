"""`skald selftest`: prove this artefact works on this host before anyone relies on it.

The installer and updater run it on a freshly downloaded build before switching to it,
so it must need nothing but the build itself: no data directory, no network, no Docker.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import apsw

import skald
from skald.core import keys
from skald.core.users import UserManager
from skald.paths import DataLayout
from skald.store.registry import Registry

Check = Callable[[], str]


def _import_everything() -> str:
    names = [m.name for m in pkgutil.walk_packages(skald.__path__, "skald.")]
    for name in names:
        importlib.import_module(name)
    return f"{len(names)} modules import"


async def _encrypted_round_trip(root: Path) -> str:
    layout = DataLayout(root / "data").ensure()
    registry = await Registry.open(layout.system_db)
    users = UserManager(registry, layout, keys.TEST_KDF)
    try:
        created = await users.create("selftest", "selftest password", "member")
        handle = await users.unlock("selftest", "selftest password")
        await handle.store.note_put("check.md", "plaintext marker 7f3a")
        await users.lock(created.user.id)
        path = layout.user_db(created.user.id)
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3") or b"plaintext marker" in data:
            raise RuntimeError("the owner database was written in clear text")
        handle = await users.unlock("selftest", "selftest password")
        hits = await handle.store.note_search("marker")
        cipher = await handle.db.call(_cipher_settings)
        if [h.path for h in hits] != ["check.md"]:
            raise RuntimeError("full-text search did not find the note it wrote")
        if cipher != ("sqlcipher", "4"):
            raise RuntimeError(f"unexpected cipher settings {cipher}")
    finally:
        await users.lock_all()
        await registry.close()
    return "encrypted database round trip (SQLCipher 4, FTS5)"


def _cipher_settings(conn: apsw.Connection) -> tuple[str, str]:
    cipher = conn.execute("PRAGMA cipher").fetchall()[0][0]
    legacy = conn.execute("PRAGMA legacy").fetchall()[0][0]
    return str(cipher), str(legacy)


def _default_kdf() -> str:
    # The memory-hard profile needs 256 MiB: a small board without it must fail here,
    # not at the first login.
    started = time.perf_counter()
    keys.burn_time(keys.DEFAULT_KDF)
    return f"argon2id default profile ({time.perf_counter() - started:.2f} s)"


def _assets() -> str:
    # A build without its assets would start and then serve nothing.
    from skald.agent.prompts import load_agents
    from skald.assets import asset_dir

    index = asset_dir("web") / "index.html"
    if not index.is_file():
        raise RuntimeError(f"the web UI is missing ({index})")
    agents = load_agents(asset_dir("agents"))
    if "assistant" not in agents:
        raise RuntimeError("the assistant agent is missing")
    pages = _feature_pages(asset_dir("web"))
    return f"web UI, {pages} feature pages and {len(agents)} agents present"


def _feature_pages(web: Path) -> int:
    # Each feature ships its pages and translations beside its module (package data):
    # every built-in page's module is there, and the translations merge cleanly.
    from skald.plugins.manager import Plugins
    from skald.plugins.web import Catalogues

    plugins = Plugins.builtin()
    parts = {part.name: part.folder / "web" for part in plugins.web_files()}
    Catalogues(web, list(plugins.web_files()))
    pages = plugins.pages()
    for page in pages:
        _, name, file = (page.module or "//").split("/", 2)
        if name not in parts or not (parts[name] / file).is_file():
            raise RuntimeError(f"the module of page {page.path} is missing ({page.module})")
    return len(pages)


def run_selftest(out: TextIO) -> int:
    def round_trip() -> str:
        with tempfile.TemporaryDirectory(prefix="skald-selftest-") as tmp:
            return asyncio.run(_encrypted_round_trip(Path(tmp)))

    checks: list[Check] = [_import_everything, _assets, round_trip, _default_kdf]
    failed = 0
    for check in checks:
        try:
            out.write(f"ok    {check()}\n")
        except Exception as exc:
            failed += 1
            out.write(f"FAIL  {check.__name__.strip('_')}: {type(exc).__name__}: {exc}\n")
    out.write(
        f"skald {skald.__version__}: {'selftest passed' if not failed else f'{failed} check(s) failed'}\n"
    )
    return 1 if failed else 0
