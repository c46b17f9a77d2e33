"""Shared folders in real sandboxes (#26 item 1): read-only by the mount as well as by
the router, a writer's file seen at once by another member, access revoked without
killing a running command, links planted from a container refused on the host."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from conftest import PASSWORD, Client
from sandbox_support import (
    docker_fixture,  # noqa: F401
    sandbox_runtime_fixture,  # noqa: F401
    wait_for,
)

from skald.api.app import create_app
from skald.core.runtime import Runtime
from skald.features.shared_folders.store import SharedFolders
from skald.files.mounts import CONTAINER_HOME
from skald.sandbox.execute import CommandResult
from skald.sandbox.tool import in_sandbox

pytestmark = pytest.mark.docker


async def _member(rt: Runtime, name: str) -> str:
    return (await rt.core.users.create(name, PASSWORD, "member")).user.id


async def _photos(rt: Runtime, access: dict[str, str]) -> SharedFolders:
    """The shared folder Photos, with each member's `access` (user id -> read or write)."""
    sf = rt.server.state(SharedFolders)
    await sf.create("Photos")
    for user_id, given in access.items():
        await sf.set_member("photos", user_id, given)
    return sf


async def _run(rt: Runtime, user_id: str, command: str) -> CommandResult:
    assert rt.sandbox is not None
    result = await in_sandbox(
        rt.sandbox,
        lambda: rt.member(user_id),
        "refused",
        command,
        workdir=CONTAINER_HOME,
        timeout_s=60,
        max_bytes=65536,
    )
    assert isinstance(result, CommandResult), result
    return result


async def test_a_read_only_member_cannot_write_in_the_container_and_sees_a_writers_file_at_once(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ada, bob = await _member(rt, "ada"), await _member(rt, "bob")
    await _photos(rt, {ada: "write", bob: "read"})
    wrote = await _run(rt, ada, "echo sunny > ~/shared/photos/beach.txt && echo WROTE")
    assert "WROTE" in wrote.output
    seen = await _run(rt, bob, "cat ~/shared/photos/beach.txt; touch ~/shared/photos/x 2>&1")
    assert "sunny" in seen.output and "Read-only file system" in seen.output, seen.output
    assert sorted(p.name for p in (rt.core.layout.root / "shared/photos").iterdir()) == [
        "beach.txt"
    ]


async def test_revoking_access_remounts_between_commands_and_never_kills_a_running_one(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = await _member(rt, "ada")
    sf = await _photos(rt, {ada: "write"})
    await _run(rt, ada, "echo kept > ~/shared/photos/a.txt")
    long = asyncio.create_task(_run(rt, ada, "sleep 3; cat ~/shared/photos/a.txt; echo SURVIVED"))
    await asyncio.sleep(1)
    before = await rt.sandbox.container_id(ada)
    await sf.remove_member("photos", ada)
    done = await long
    assert done.exit_code == 0 and "kept" in done.output and "SURVIVED" in done.output
    await rt.sandbox.refreshed()
    assert await rt.sandbox.container_id(ada) != before  # remade once the command ended
    after = await _run(rt, ada, "ls ~/shared/photos/a.txt 2>&1 || echo GONE")
    assert "GONE" in after.output, after.output
    assert (rt.core.layout.root / "shared/photos/a.txt").read_text() == "kept\n"
    # Nothing can be kept under the old path: ~/shared is read-only (no stale mountpoint
    # left either), and so are ~/projects and ~/skills apart from their places.
    tried = await _run(
        rt,
        ada,
        "echo LS; ls -A ~/shared; echo TRY; mkdir ~/shared/photos 2>&1; "
        "touch ~/shared/x ~/projects/x ~/skills/x 2>&1; echo DONE",
    )
    listed = tried.output.split("LS", 1)[1].split("TRY", 1)[0]
    assert listed.strip() == "", tried.output
    assert tried.output.count("Read-only file system") == 4, tried.output
    home = rt.core.layout.home(ada)
    assert not [p for p in home.rglob("*") if p.name == "x"]
    assert not [p for p in (rt.core.layout.root / "shared").rglob("x")]


async def test_a_homes_own_shared_folder_moves_aside_and_the_sandbox_shows_only_the_places(
    sandbox_runtime: Runtime,
) -> None:
    """A home made by an older version with its own `shared/` and `projects/` folders:
    the files move to `shared (own)`, `projects (own)` (the same paths), the sandbox
    shows only the member's places under `~/shared`, and the file tools reach the moved
    files."""
    rt = sandbox_runtime
    ada = await _member(rt, "ada")
    home = rt.core.layout.home(ada)
    (home / "shared/recipes").mkdir(parents=True)
    (home / "shared/recipes/pie.md").write_text("mine")
    (home / "projects/app").mkdir(parents=True)
    (home / "projects/app/main.py").write_text("print()")
    await _photos(rt, {ada: "read"})
    out = await _run(
        rt,
        ada,
        "ls -A ~/shared ~/projects; cat ~/'shared (own)'/recipes/pie.md; echo; "
        "cat ~/'projects (own)'/app/main.py",
    )
    assert (
        "recipes" not in out.output.split("mine")[0] and "app" not in out.output.split("mine")[0]
    ), out.output
    assert "photos" in out.output and "mine" in out.output and "print()" in out.output
    user, role = await rt.member(ada)
    router = rt.router_for(user, role)
    assert router.physical("shared (own)/recipes/pie.md").path.read_text() == "mine"


async def test_remount_cost_is_measured(sandbox_runtime: Runtime, capsys: Any) -> None:
    """Not an assertion on time: the figure for bench/README.md (printed)."""
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = await _member(rt, "ada")
    sf = await _photos(rt, {})
    await _run(rt, ada, "true")
    user, role = await rt.member(ada)
    figures = []
    for access in ("write", "read", "write"):
        await sf.set_member("photos", ada, access)
        await rt.sandbox.refreshed()
        start = time.perf_counter()
        await sf.remove_member("photos", ada)
        await rt.sandbox.refreshed()
        figures.append(time.perf_counter() - start)
    start = time.perf_counter()
    await rt.sandbox.ensure(user, role)
    unchanged = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nremount: {[round(f, 2) for f in figures]} s; unchanged ensure {unchanged:.3f} s")
    assert await rt.sandbox.container_id(ada) is not None


async def test_links_planted_from_a_container_are_refused_for_every_member(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ada, bob = await _member(rt, "ada"), await _member(rt, "bob")
    sf = await _photos(rt, {ada: "write", bob: "write"})
    await sf.create("Vault")
    (rt.core.layout.root / "shared/vault/v.txt").write_text("VAULT-SECRET")
    bob_home = rt.core.layout.home(bob)
    bob_home.mkdir(exist_ok=True)
    (bob_home / "diary.txt").write_text("BOB-SECRET")
    planted = await _run(
        rt,
        ada,
        f"cd ~/shared/photos && ln -s ../../homes/{bob} to_bob && ln -s ../.. to_data && "
        "ln -s ../vault to_vault && ln -s /home/skald to_home && ln -s / to_root && echo OK",
    )
    assert "OK" in planted.output, planted.output
    transport = httpx.ASGITransport(app=create_app(rt), client=("127.0.0.1", 50000))
    for name in ("ada", "bob"):
        http = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        client = Client(http)
        await client.login(name)
        for path in (
            "shared/photos/to_bob/diary.txt",
            "shared/photos/to_data/database/system.db",
            "shared/photos/to_vault/v.txt",
            "shared/photos/to_home",
            "shared/photos/to_root/etc/passwd",
        ):
            r = await client.call("GET", f"/api/file?path={path}")
            assert r.status_code in (403, 404), (name, path, r.status_code)
            assert "SECRET" not in r.text
            w = await client.call("POST", "/api/file", json={"path": f"{path}/x", "content": "x"})
            assert w.status_code in (403, 404), (name, path, w.status_code)
        z = await client.call("GET", "/api/files/zip?path=shared/photos")
        assert z.status_code == 200 and b"SECRET" not in z.content
        await http.aclose()
    # The sign-ins' sandbox probes end before the runtime stops (or they race its cleanup).
    assert rt.sandbox is not None
    commands = rt.sandbox.commands

    async def probed() -> bool:
        return ada in commands and bob in commands

    await wait_for(probed, 60)
    assert (bob_home / "diary.txt").read_text() == "BOB-SECRET"
    assert not list(bob_home.rglob("x")) and not list((rt.core.layout.root / "shared").rglob("x"))


async def test_a_projects_reader_cannot_write_in_the_container_and_its_writer_can(
    sandbox_runtime: Runtime,
) -> None:
    from skald.features.projects.store import Projects

    rt = sandbox_runtime
    ada, bob = await _member(rt, "ada"), await _member(rt, "bob")
    projects = rt.server.state(Projects)
    made = await projects.create(ada, "Kitchen")
    await projects.set_member(made, "bob", "read")
    wrote = await _run(rt, ada, "echo tiles > ~/projects/ada/kitchen/PROJECT.md && echo WROTE")
    assert "WROTE" in wrote.output, wrote.output
    seen = await _run(
        rt, bob, "cat ~/projects/ada/kitchen/PROJECT.md; touch ~/projects/ada/kitchen/x 2>&1"
    )
    assert "tiles" in seen.output and "Read-only file system" in seen.output, seen.output
    assert rt.sandbox is not None
    await rt.sandbox.refreshed()


async def test_signposts_say_notes_are_no_files_and_are_rewritten_at_every_ensure(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ada = await _member(rt, "ada")
    out = await _run(
        rt,
        ada,
        "head -1 ~/user-memory/README.md; grep -c approval ~/shared-memory/README.md; "
        "{ echo note > ~/user-memory/ada.md; } 2>&1; ls ~/user-memory",  # one stream: in order
    )
    assert out.output.startswith("This is not a folder"), out.output
    assert "Read-only file system" in out.output and "ada.md" not in out.output.split("\n")[-2]
    readme = rt.core.layout.root / "signposts" / "user-memory" / "README.md"
    readme.write_text("tampered")
    again = await _run(rt, ada, "head -1 ~/user-memory/README.md")
    assert again.output.startswith("This is not a folder"), again.output
    # The file tools still reach the note store at that path, not the signpost.
    user, role = await rt.member(ada)
    router = rt.router_for(user, role)
    assert router.resolve("/home/skald/user-memory/x.md").virtual
