"""A personal connector's real start (the member's container, `docker exec`) with links
planted in her home: nothing outside the home changes (issue 20, item 1). The placement
functions by themselves, every planted name and a racing member are in
tests/test_home_links.py; this is the whole path, `Supervisor.launch_for`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import PASSWORD
from connector_support import python_connector
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.home_files import HomeLinkError
from skald.features.connectors.supervisor import ConnectorInstance, Supervisor
from skald.paths import DataLayout

CA = b"-----BEGIN CERTIFICATE-----\nOPERATOR-CA\n-----END CERTIFICATE-----\n"


MADE_AT_ENSURE = ("signposts", "skills", "mountpoints")


def _outside(layout: DataLayout, bob: str) -> dict[str, Any]:
    """What must not change: Bob's database and home, the key, a canary, the names in
    the data directory (the server's own databases change as it runs: left out)."""
    bob_home = layout.home(bob)
    return {
        "bob-db": layout.user_db(bob).read_bytes(),
        "key": layout.instance_key.read_bytes(),
        "canary": (layout.root / "canary").read_bytes(),
        # The launch's first sandbox ensure makes the read-only folders it mounts (the
        # notes' signposts, the skills trees, the folders of mountpoints over ~/shared,
        # ~/projects and ~/skills): made by Skald beside the data, not
        # through a link.
        "root": sorted(p.name for p in layout.root.iterdir() if p.name not in MADE_AT_ENSURE),
        "users": sorted(p.name for p in layout.users_db_dir.iterdir() if ".db" in p.name),
        "bob-home": sorted(
            (str(p.relative_to(bob_home)), p.read_bytes() if p.is_file() else None)
            for p in bob_home.rglob("*")
        ),
    }


async def _member_known(sup: Supervisor, user_id: str) -> None:
    for _ in range(200):
        if user_id in sup.members:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the member's connector service never started")


@pytest.mark.docker
async def test_a_personal_connector_start_never_writes_through_links_in_the_home(
    sandbox_runtime: Runtime, tmp_path: Path
) -> None:
    rt = sandbox_runtime
    layout = rt.core.layout
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user.id
    (layout.home(bob) / "private").mkdir(parents=True)
    (layout.home(bob) / "private" / "notes.txt").write_bytes(b"BOB-SECRET")
    (layout.root / "canary").write_bytes(b"canary")
    if not layout.instance_key.exists():
        layout.instance_key.write_bytes(os.urandom(32))
    feed = tmp_path / "feed"
    folder = python_connector(feed, "clock", "clock_server.py", extra={"scope": "personal"})
    # pip dependencies (none listed): the start places the CA, then installs in the sandbox.
    (folder / "requirements.txt").write_text("# nothing\n")
    manifest = (folder / "connector.json").read_text()
    (folder / "connector.json").write_text(manifest[:-1] + ', "dependencies": "pip"}')
    write_index(feed, 1)
    ca = tmp_path / "ca.pem"
    ca.write_bytes(CA)
    c = service.require(rt.server)
    c.config = msgspec.structs.replace(c.config, feed=str(feed), extra_ca_file=str(ca))
    row = await c.installer.install(c.feed(), "clock")
    sup = c.supervisor
    assert sup is not None
    await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
    await _member_known(sup, ada)
    inst = ConnectorInstance(sup, ada, row)
    home = layout.home(ada)
    home.mkdir(exist_ok=True)
    before = _outside(layout, bob)

    for rel, target in (
        (".skald", layout.root),
        (".skald/connectors", layout.home(bob)),
        (".skald/connectors/clock", layout.users_db_dir),
    ):
        link = home / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        with pytest.raises(HomeLinkError, match="never writes through links"):
            await sup.launch_for(inst)
        assert _outside(layout, bob) == before, rel
        link.unlink()

    # A link where a file goes is replaced by the file, inside the home.
    (home / ".skald" / "extra-ca.pem").symlink_to(layout.user_db(bob))
    launch = await sup.launch_for(inst)
    assert launch.argv is not None and launch.argv[:2] == ["docker", "exec"]
    assert _outside(layout, bob) == before
    placed = home / ".skald" / "extra-ca.pem"
    assert not placed.is_symlink() and placed.read_bytes() == CA
    version = Path(row.install_dir or "").name
    copied = home / ".skald" / "connectors" / "clock" / version / "clock_server.py"
    assert copied.read_bytes() == (folder / "clock_server.py").read_bytes()
