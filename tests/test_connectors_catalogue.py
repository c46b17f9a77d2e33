"""The connector catalogue: installing from a feed (digests, versions, retries), grants
by auto_grant rows and per member, who sees what, and secrets that never come back."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

import apsw
from conftest import PASSWORD, Client, signed_in
from connector_support import simple_feed

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.service import ConnectorsConfig

MakeClient = Callable[[], Awaitable[Client]]


def _use_feed(runtime: Runtime, feed: Path | str) -> service.Connectors:
    c = service.require(runtime.plugins)
    c.config = ConnectorsConfig(feed=str(feed), household_on_host=True)
    return c


async def test_an_installed_connector_reaches_auto_grant_members_now_and_later_never_children(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    _use_feed(runtime, simple_feed(tmp_path / "feed"))
    mum = await signed_in(make_client, "mum")
    r = await mum.call("POST", "/api/marketplace/clock/install")
    assert r.status_code == 201, r.text
    ada = await signed_in(make_client, "ada")
    assert [c["name"] for c in (await ada.call("GET", "/api/connectors")).json()] == ["clock"]
    # A member created after the install is granted by the row the trigger writes.
    await runtime.core.users.create("bob", PASSWORD, "member")
    bob = await signed_in(make_client, "bob")
    assert [c["name"] for c in (await bob.call("GET", "/api/connectors")).json()] == ["clock"]
    # A child's role has neither connectors.use nor auto_grant.
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("GET", "/api/connectors")).status_code == 403
    grants = (await mum.call("GET", "/api/connectors/clock/grants")).json()["users"]
    assert household["tim"] not in grants and household["ada"] in grants


async def test_a_revoked_member_no_longer_sees_or_activates_the_connector_and_admins_always_do(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    _use_feed(runtime, simple_feed(tmp_path / "feed"))
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("POST", "/api/marketplace/clock/install")).status_code == 201
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("POST", "/api/connectors/clock/activate")).json()["active"] is True
    r = await mum.call("DELETE", f"/api/connectors/clock/grants/{household['ada']}")
    assert r.status_code == 204
    assert (await ada.call("GET", "/api/connectors")).json() == []
    assert (await ada.call("GET", "/api/connectors/clock")).status_code == 404
    assert (await ada.call("POST", "/api/connectors/clock/activate")).status_code == 404
    # The revocation took the activation with it; a new grant starts switched off.
    await mum.call("PUT", f"/api/connectors/clock/grants/{household['ada']}")
    assert (await ada.call("GET", "/api/connectors/clock")).json()["active"] is False
    # Administrators hold every connector without a row.
    await mum.call("DELETE", f"/api/connectors/clock/grants/{household['mum']}")
    assert [c["name"] for c in (await mum.call("GET", "/api/connectors")).json()] == ["clock"]
    # Members cannot install, update or grant.
    assert (await ada.call("POST", "/api/marketplace/clock/update")).status_code == 403
    r = await ada.call("PUT", f"/api/connectors/clock/grants/{household['ada']}")
    assert r.status_code == 403


async def test_a_tampered_file_refuses_the_whole_item_and_nothing_is_installed(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    feed = simple_feed(tmp_path / "feed", ("clock", "other"))
    (feed / "clock" / "clock_server.py").write_text("print('not what was pinned')\n")
    _use_feed(runtime, feed)
    mum = await signed_in(make_client, "mum")
    listing = {i["folder"]: i for i in (await mum.call("GET", "/api/marketplace")).json()}
    assert "does not match its digest" in listing["clock"]["refused"]
    assert listing["other"]["refused"] is None
    r = await mum.call("POST", "/api/marketplace/clock/install")
    assert r.status_code == 400 and r.json()["error"]["code"] == "tampered"
    assert (await mum.call("GET", "/api/connectors")).json() == []
    assert not (runtime.core.layout.root / "connectors" / "clock").exists()


async def test_update_appears_only_for_a_higher_version_and_installs_the_new_files(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    feed = simple_feed(tmp_path / "feed")
    _use_feed(runtime, feed)
    mum = await signed_in(make_client, "mum")
    await mum.call("POST", "/api/marketplace/clock/install")
    item = (await mum.call("GET", "/api/marketplace")).json()[0]
    assert (item["installed_version"], item["update"]) == (1, False)
    assert (await mum.call("POST", "/api/marketplace/clock/update")).status_code == 409
    # A changed file with the same version is not an update.
    manifest = json.loads((feed / "clock" / "connector.json").read_text())
    manifest["description"] = "a better clock"
    (feed / "clock" / "connector.json").write_text(json.dumps(manifest))
    write_index(feed)
    assert (await mum.call("GET", "/api/marketplace")).json()[0]["update"] is False
    write_index(feed, bump=("clock",))
    item = (await mum.call("GET", "/api/marketplace")).json()[0]
    assert (item["version"], item["update"]) == (2, True)
    r = await mum.call("POST", "/api/marketplace/clock/update")
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 2 and r.json()["description"] == "a better clock"
    assert (await mum.call("GET", "/api/marketplace")).json()[0]["update"] is False


async def test_secrets_are_kept_in_the_members_own_database_and_never_answered(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    tmp_path: Path,
    logged: io.StringIO,
) -> None:
    key = "sk-live-VERYSECRET-1234567890"
    feed = simple_feed(
        tmp_path / "feed",
        clock={
            "scope": "personal",
            "env": {"CLOCK_KEY": "{SECRET:api_key}"},
            "auth": {"type": "api_key", "fields": [{"name": "api_key", "label": "API key"}]},
        },
    )
    _use_feed(runtime, feed)
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("POST", "/api/marketplace/clock/install")).status_code == 201
    ada = await signed_in(make_client, "ada")
    before = (await ada.call("GET", "/api/connectors/clock")).json()
    assert before["signed_in"] is False and before["secret_fields"][0]["name"] == "api_key"
    r = await ada.call("PUT", "/api/connectors/clock/secrets", json={"values": {"api_key": key}})
    assert r.status_code == 200 and key not in r.text
    assert r.json()["signed_in"] is True and r.json()["secrets_set"] == ["api_key"]
    r = await ada.call("PUT", "/api/connectors/clock/secrets", json={"values": {"other": "x"}})
    assert r.status_code == 400
    # Another member (even an administrator) sees only their own: nothing set.
    assert (await mum.call("GET", "/api/connectors/clock")).json()["secrets_set"] == []
    for client in (ada, mum):
        for path in ("/api/connectors", "/api/connectors/clock", "/api/marketplace"):
            assert key not in (await client.call("GET", path)).text
    # Not in the registry; in ada's owner database, which is encrypted.
    registry = runtime.core.layout.root / "database" / "system.db"
    owner_files = list((runtime.core.layout.root / "database").rglob("*.db*"))
    assert owner_files
    for path in owner_files:
        assert key.encode() not in path.read_bytes(), path
    assert key.encode() not in registry.read_bytes()
    # Nothing of it reached the log.
    assert "connector installed" in logged.getvalue()
    assert key not in logged.getvalue()


async def test_a_member_cannot_reach_a_connector_they_were_not_granted(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    _use_feed(runtime, simple_feed(tmp_path / "feed"))
    mum = await signed_in(make_client, "mum")
    await mum.call("POST", "/api/marketplace/clock/install")
    await mum.call("DELETE", f"/api/connectors/clock/grants/{household['ada']}")
    ada = await signed_in(make_client, "ada")
    for method, path, body in (
        ("GET", "/api/connectors/clock", None),
        ("POST", "/api/connectors/clock/activate", None),
        ("PUT", "/api/connectors/clock/secrets", {"values": {"x": "y"}}),
        ("DELETE", "/api/connectors/clock/secrets", None),
    ):
        r = await ada.call(method, path, json=body)
        assert r.status_code == 404, (method, path, r.status_code)


_INSTALL = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from skald.features.connectors.feed import Feed
    from skald.features.connectors.install import Installer
    from skald.features.connectors.store import ConnectorStore
    from skald.store.registry import Registry

    async def main():
        registry = await Registry.open(Path(sys.argv[1]))
        store = ConnectorStore(registry.db)
        await Installer(store, Path(sys.argv[2])).install(Feed(sys.argv[3]), "slow")
        print("installed", flush=True)
        await registry.close()

    asyncio.run(main())
    """
)


async def test_kill_9_during_an_install_leaves_the_databases_consistent_and_it_can_be_retried(
    runtime: Runtime, tmp_path: Path
) -> None:
    """A real process installs a household connector whose pip dependency install is
    slow (a local package whose build sleeps); it is killed with SIGKILL in the middle."""
    feed = tmp_path / "feed"
    folder = feed / "slow"
    folder.mkdir(parents=True)
    pkg = tmp_path / "slowpkg"
    pkg.mkdir()
    flag = tmp_path / "building"
    (pkg / "setup.py").write_text(
        "import os, time\n"
        f"flag = {str(flag)!r}\n"
        "if not os.path.exists(flag):\n"
        "    open(flag, 'w').close(); time.sleep(60)\n"
        "from setuptools import setup\nsetup(name='slowpkg', version='1.0', py_modules=[])\n"
    )
    (folder / "requirements.txt").write_text(f"slowpkg @ file://{pkg}\n")
    (folder / "connector.json").write_text(
        json.dumps(
            {
                "name": "slow",
                "transport": "stdio",
                "command": [sys.executable, "-c", "pass"],
                "dependencies": "pip",
                "scope": "household",
            }
        )
    )
    write_index(feed, 1)
    await runtime.shutdown()  # one process per data directory: the installer is alone
    db = runtime.core.layout.root / "database" / "system.db"
    root = runtime.core.layout.root / "connectors"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(  # noqa: ASYNC220 - a real process to kill
        [sys.executable, "-c", _INSTALL, str(db), str(root), str(feed)],
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(600):
            if flag.exists():
                break
            await asyncio.sleep(0.1)
        assert flag.exists(), "the dependency build never started"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    rows = conn.execute("SELECT name, status FROM connectors").fetchall()
    conn.close()
    assert rows == [("slow", "installing")]
    assert not (root / "deps").exists() or not [
        p for p in (root / "deps").iterdir() if not p.name.startswith(".staging-")
    ]
    # Retried (the flag now exists, so the build is quick): installed, staging gone.
    done = subprocess.run(  # noqa: ASYNC221
        [sys.executable, "-c", _INSTALL, str(db), str(root), str(feed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT status FROM connectors").fetchall() == [("installed",)]
    conn.close()
    leftovers = list(root.rglob(".staging-*"))
    assert leftovers == []
    assert len(list((root / "deps").iterdir())) == 1
