"""What a cold start loads (issue 22, goal 3): counted in a fresh interpreter, never timed."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_ENV

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.manager import SandboxManager, SandboxUnavailable

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ["click", "greenlet", "pygments", "rich"]


def _fresh(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_server_and_cli_load_no_command_line_extras_of_their_libraries() -> None:
    # httpx's CLI, structlog's dev and threadlocal modules pull these in when installed;
    # Skald uses none.
    loaded = _fresh(
        "import sys, json, skald.server, skald.cli;"
        f"print(json.dumps([m for m in {EXTRAS!r} if m in sys.modules]))"
    )
    assert json.loads(loaded) == []


def _booted(then: str, served: str = "") -> str:
    """`then`'s output, run after a fresh interpreter booted a runtime and built the app,
    with the server's entry point imported first (as `skald serve` does); `served`: lines
    of `main()` run with the app built (`rt`, `app`), before the runtime shuts down."""
    return _fresh(
        "import asyncio, io, sys, tempfile\n"
        "import skald.server\n"
        "from pathlib import Path\n"
        "from skald.api.app import create_app\n"
        "from skald.config import load_config\n"
        "from skald.core.runtime import Runtime\n"
        "from skald.paths import DataLayout\n"
        "async def main():\n"
        "    layout = DataLayout(Path(tempfile.mkdtemp()) / 'data')\n"
        f"    config = load_config(layout.root, {TEST_ENV!r})\n"
        "    rt = await Runtime.boot(layout, config, announce=io.StringIO())\n"
        "    app = create_app(rt)\n" + served + "    await rt.shutdown()\n"
        "asyncio.run(main())\n" + then
    )


def test_a_served_app_never_loads_yaml_yet_yaml_works_for_whoever_asks() -> None:
    # Litestar imports PyYAML for a schema renderer Skald does not mount (skald/lean.py).
    out = _booted(
        "print('loaded' if 'yaml.error' in sys.modules else 'not loaded')\n"
        "import yaml\n"
        "print(yaml.safe_load('a: [1, 2]'), yaml.dump({'b': 3}).strip())\n"
        "import yaml.constructor\n"
        "print(sys.modules['yaml'].__file__ is not None)"
    )
    assert out.splitlines()[-3:] == ["not loaded", "{'a': [1, 2]} b: 3", "True"], out


def test_a_served_app_never_loads_the_debugger_yet_pdb_works_for_whoever_asks() -> None:
    # Litestar imports pdb as the default of a debug option Skald never turns on.
    out = _booted(
        "print('loaded' if 'bdb' in sys.modules else 'not loaded')\n"
        "import pdb\n"
        "print(pdb.Pdb.__name__, callable(pdb.post_mortem))\n"
        "print('bdb' in sys.modules and sys.modules['pdb'].__dict__.get('__file__') is not None)"
    )
    assert out.splitlines()[-3:] == ["not loaded", "Pdb True", "True"], out


# Libraries a feature needs only when it is used: the server holds none of them at rest.
AT_FIRST_USE = (
    "pydantic",  # Litestar loads its pydantic plugins whenever it can import it
    "packaging",  # reading an uploaded plugin's wheels
    "py_vapid",  # signing a push message
    "http_ece",  # encrypting a push message
    "httpcore",  # the push client's pinned transport (models have their own)
)


def test_building_the_app_imports_no_library_a_feature_needs_only_at_first_use() -> None:
    # The shipped file has no pydantic, so the app must not use it either
    # (docs/dev/api.md); the others cost memory a household without plugins or push
    # devices would hold for nothing (bench/README.md, goal 5).
    for name in AT_FIRST_USE:  # installed here, else this proves nothing
        assert importlib.util.find_spec(name) is not None, name
    loaded = _booted(f"print([m for m in {AT_FIRST_USE!r} if m in sys.modules])")
    assert loaded.splitlines()[-1] == "[]", loaded


# Skald's own modules a household without connectors never needs until a connector is
# added, listed or runs (docs/dev/connectors.md, "What loads at first use").
SKALD_AT_FIRST_USE = (
    "skald.mcp",  # the MCP client library, every module of it
    "skald.features.connectors.feed",
    "skald.features.connectors.install",
    "skald.features.connectors.own",
    "skald.features.connectors.trial",
    "skald.features.connectors.oauth",
    "skald.features.connectors.providers",
    "skald.features.connectors.resources",
    "skald.features.connectors.tools",
    "skald.features.connectors.content",
    "skald.features.connectors.household_box",
    "skald.features.connectors.home_files",
)


def test_a_booted_app_holds_no_connector_machinery_and_no_mime_table_before_their_first_use() -> (
    None
):
    # ~1.3 MiB of the connectors' and the MCP client's code, and the mimetypes table
    # (~300 KiB), held for nothing by a household without connectors (bench/README.md).
    out = _booted(
        f"print(sorted(m for m in sys.modules if m.startswith({SKALD_AT_FIRST_USE!r})))\n"
        "import mimetypes\n"
        "from skald.files import router\n"
        "print([k for k, v in vars(router).items() if isinstance(v, mimetypes.MimeTypes)])"
    )
    assert out.splitlines()[-2:] == ["[]", "[]"], out


# `served` lines that sign an administrator in: `http` is their client, in a block.
SIGNED_IN = (
    "    await rt.core.users.create('mum', 'a household password', 'admin')\n"
    "    import httpx\n"
    "    transport = httpx.ASGITransport(app=app, client=('127.0.0.1', 50000))\n"
    "    async with httpx.AsyncClient(transport=transport, base_url='http://t') as http:\n"
    "        r = await http.post('/api/auth/login',\n"
    "            json={'username': 'mum', 'password': 'a household password'})\n"
    "        assert r.status_code == 200, r.text\n"
    "        http.headers['X-CSRF-Token'] = r.json()['csrf_token']\n"
)


def test_the_connector_routes_and_a_guessed_type_work_at_their_first_use() -> None:
    # In a fresh interpreter, as a served app meets them: nothing imported beforehand (a
    # test run's own imports would hide an import missing from a handler).
    out = _booted(
        "from skald.files.router import guess_mime\n"
        "print(guess_mime('a.PDF'), guess_mime('b.md'), guess_mime('c.nothing-knows-this'))",
        served=(
            f"    before = [m for m in sys.modules if m.startswith({SKALD_AT_FIRST_USE!r})]\n"
            + SIGNED_IN
            + "        market = (await http.get('/api/marketplace')).json()\n"
            "        mine = (await http.get('/api/connectors')).json()\n"
            "        providers = (await http.get('/api/sign-in-providers')).json()\n"
            "    print(before, mine, providers)\n"
            "    print(sorted({i['reach'] for i in market}), "
            "any(i['source'] == 'shipped' for i in market))\n"
        ),
    )
    lines = out.splitlines()  # the served lines print before the runtime's last log lines
    assert "[] [] []" in lines, out
    reaches, shipped = lines[lines.index("[] [] []") + 1].rsplit(" ", 1)
    assert shipped == "True" and "'personal'" in reaches, out
    assert lines[-1] == "application/pdf text/markdown None", out


# Skald's own modules a household needs only when a backup, drill or restore runs, a
# Telegram bot is set up, or someone asks for the doctor's checks (docs/dev/web.md, "What
# loads at first use"), and the libraries only they use.
FEATURE_AT_FIRST_USE = (
    "skald.features.backups.archive",  # tarfile and the manifest's checks
    "skald.features.backups.backup",
    "skald.features.backups.restore",
    "tarfile",
    "skald.features.telegram.botapi",  # a bridge with a bot token only
    "skald.features.telegram.turns",
    "skald.features.telegram.render",
    "skald.features.telegram.texts",
    "skald.features.telegram.tool",
    "skald.ops.doctor",  # the setup checklist, the health lines, the privacy check
    "skald.ops.checks_host",
    "skald.ops.checks_data",
    "skald.ops.checks_setup",
    "difflib",  # the first write preview
    "cryptography.hazmat.primitives.asymmetric.ec",  # the VAPID key, a push subscription
    "cryptography.hazmat.primitives.serialization",
)


def test_a_booted_app_holds_no_backup_telegram_doctor_or_push_key_code_before_their_first_use() -> (
    None
):
    # About 1.5 MiB at rest otherwise (bench/README.md, goal 5).
    for name in FEATURE_AT_FIRST_USE:  # they exist, else this proves nothing
        # Loaded in this process already (another test used it) is proof enough; asking
        # `find_spec` then fails for a module whose `__spec__` is None (CI met one).
        assert name in sys.modules or importlib.util.find_spec(name) is not None, name
    out = _booted(f"print([m for m in {FEATURE_AT_FIRST_USE!r} if m in sys.modules])")
    assert out.splitlines()[-1] == "[]", out


def test_backups_the_doctors_checks_and_a_preview_work_at_their_first_use() -> None:
    # In a fresh interpreter, as a served app meets them: a backup, its contents, the
    # drill, the checklist, the health lines and the privacy check, then a diff.
    out = _booted(
        "from skald.tools.preview import unified_diff\n"
        "print(unified_diff('a.txt', 'one\\n', 'two\\n').splitlines()[2:])",
        served=(
            f"    before = [m for m in {FEATURE_AT_FIRST_USE!r} if m in sys.modules]\n"
            + SIGNED_IN
            + "        run = (await http.post('/api/backups/run')).json()\n"
            "        assert run.get('ok'), run\n"
            "        name = Path(run['path']).name\n"
            "        contents = (await http.get(f'/api/backups/archives/{name}')).json()\n"
            "        drill = (await http.post('/api/backups/drill')).json()\n"
            "        listed = (await http.get('/api/backups')).json()['archives']\n"
            "        checklist = await http.get('/api/setup/checklist')\n"
            "        health = await http.get('/api/dashboard/health')\n"
            "        privacy = await http.get('/api/privacy')\n"
            "    print('first use:', before, run['ok'], contents['name'] == name, drill['ok'],"
            " len(listed))\n"
            "    print('first use:', checklist.status_code, health.status_code,"
            " privacy.status_code)\n"
            "    print('first use:', sorted(line['name'] for line in health.json()))\n"
        ),
    )
    # The served lines print before the runtime's last log lines.
    seen = [line.removeprefix("first use: ") for line in out.splitlines() if "first use:" in line]
    assert seen[0] == "[] True True True 1", out
    assert seen[1] == "200 200 200", out
    assert {"backups", "disk", "docker"} <= set(eval(seen[2])), out  # noqa: S307
    assert out.splitlines()[-1] == "['@@ -1 +1 @@', '-one', '+two']", out


def test_the_hidden_extras_are_real_modules_for_whoever_imports_them_later() -> None:
    out = _fresh(
        "import skald.server, rich.console, click, pygments.lexers;"
        "print(rich.console.Console.__name__, click.command.__name__)"
    )
    assert out == "Console command"


def test_console_logging_still_prints_a_redacted_traceback_after_a_lean_start() -> None:
    out = _fresh(
        "import io, skald.server\n"
        "from skald.log import configure_logging, get_logger\n"
        "buf = io.StringIO()\n"
        "configure_logging('info', 'console', buf)\n"
        "try:\n"
        "    raise ValueError('token=sk-abcdefghijklmnopqrstuvwxyz0123')\n"
        "except ValueError:\n"
        "    get_logger('t').exception('failed')\n"
        "print(buf.getvalue())"
    )
    assert "failed" in out and "Traceback" in out and "ValueError" in out
    assert "sk-abcdefghijklmnopqrstuvwxyz0123" not in out


async def test_the_first_look_at_docker_waits_until_the_web_app_is_built_and_callers_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks: list[str] = []

    async def look(self: SandboxManager) -> bool:
        looks.append(self.state)
        self._lost("no daemon in this test")
        return False

    monkeypatch.setattr(SandboxManager, "_check", look)
    env = {**TEST_ENV, "SKALD_SANDBOX_ENABLED": "true"}
    layout = DataLayout(tmp_path / "data")
    config = load_config(layout.root, env)
    # As `skald serve` boots it: with an address, the app still to be built.
    rt = await Runtime.boot(layout, config, announce=io.StringIO(), listen=("127.0.0.1", 1))
    try:
        assert rt.sandbox is not None
        created = await rt.core.users.create("ada", "a household password", "member")
        user, role = await rt.member(created.user.id)
        # A sandbox user meanwhile (a sign-in's probe, a connector) waits for the look
        # instead of being refused with "connecting to Docker".
        waiting = asyncio.create_task(rt.sandbox.ensure(user, role))
        for _ in range(20):
            await asyncio.sleep(0)
        assert looks == [] and not waiting.done()
        rt.app_built.set()
        with pytest.raises(SandboxUnavailable) as refused:
            await asyncio.wait_for(waiting, 10)
        assert looks == ["starting"] and rt.sandbox.state == "unreachable"
        assert "no daemon in this test" in str(refused.value)
    finally:
        await rt.shutdown()


def test_the_start_is_frozen_for_the_collector() -> None:
    # A full collection walked the whole heap (a 50-60 ms pause in a turn); what the start
    # built is moved out of its sight.
    out = _fresh(
        "import gc\n"
        "from skald.server import _freeze_the_start\n"
        "class Node: pass\n"
        "kept = Node(); kept.me = kept\n"
        "_freeze_the_start()\n"
        "print(gc.get_freeze_count() > 1000, any(o is kept for o in gc.get_objects()))"
    )
    assert out.splitlines()[-1] == "True False", out
