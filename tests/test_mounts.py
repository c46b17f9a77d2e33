"""A member's mounts are one list: the path router and the sandbox both follow it, and
isolation holds for every entry (built-ins and a plugin's read-only shelf alike)."""

from __future__ import annotations

import io
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import PASSWORD, TEST_ENV
from plugins import sample_plugin
from sandbox_support import (
    SANDBOX_ENV,
    docker_fixture,  # noqa: F401
    run_in_sandbox,
    sandbox_ready,
)

from skald.approvals.rules import SEED_RULES
from skald.cli import plugin_sections
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.projects.store import Projects
from skald.features.shared_folders.store import SharedFolders
from skald.files.mounts import CONTAINER_HOME, MemberMount, check_mounts
from skald.files.router import PathDeniedError, PathRouter, Resolved, Virtual
from skald.paths import DataLayout

CONFIG = '[plugins]\nmodules = ["plugins.sample_plugin"]\n'


async def _boot(tmp_path: Path, env: dict[str, str]) -> Runtime:
    layout = DataLayout(tmp_path / "data")
    layout.root.mkdir(parents=True)
    (layout.root / "config.toml").write_text(CONFIG)
    return await Runtime.boot(
        layout, load_config(layout.root, env, plugin_sections), announce=io.StringIO()
    )


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await _boot(tmp_path, TEST_ENV)
    yield rt
    await rt.shutdown()


async def _mounts(rt: Runtime, username: str) -> list[MemberMount]:
    user = await rt.core.users.get(username)
    user, role = await rt.member(user.id)
    return rt.mounts_for(user, role)


async def test_the_list_holds_home_docs_notes_and_the_plugins_shelf(runtime: Runtime) -> None:
    await runtime.core.users.create("ada", PASSWORD, "member")
    mounts = await _mounts(runtime, "ada")
    assert [(m.name, m.prefix, m.container_path, m.read_only) for m in mounts] == [
        ("home", "~", CONTAINER_HOME, False),
        ("docs", "docs", f"{CONTAINER_HOME}/docs", True),
        ("user-memory", "user-memory", None, False),
        ("shared-memory", "shared-memory", None, False),
        ("skills/shared", "skills/shared", f"{CONTAINER_HOME}/skills/shared", True),
        ("skills/mine", "skills/mine", f"{CONTAINER_HOME}/skills/mine", True),
        ("user-memory-signpost", "user-memory-signpost", f"{CONTAINER_HOME}/user-memory", True),
        (
            "shared-memory-signpost",
            "shared-memory-signpost",
            f"{CONTAINER_HOME}/shared-memory",
            True,
        ),
        ("sample", "sample", sample_plugin.MOUNT_PATH, True),
    ]


async def _share_with_ada(rt: Runtime, ada: str, bob: str) -> None:
    """A shared folder Ada reads, one she writes, a project of hers, one of Bob's she
    is in, and one of Bob's she is not: every kind of place in her list."""
    folders = rt.server.state(SharedFolders)
    for name, access in (("Read", "read"), ("Write", "write")):
        await folders.create(name)
        await folders.set_member(name.lower(), ada, access)
    await folders.create("Bobs")
    await folders.set_member("bobs", bob, "write")
    projects = rt.server.state(Projects)
    await projects.create(ada, "Mine")
    await projects.set_member(await projects.create(bob, "Ours"), "ada", "read")
    await projects.create(bob, "Secret")


async def test_every_mount_keeps_paths_inside_it(runtime: Runtime, tmp_path: Path) -> None:
    ada = (await runtime.core.users.create("ada", PASSWORD, "member")).user.id
    bob = (await runtime.core.users.create("bob", PASSWORD, "member")).user.id
    await _share_with_ada(runtime, ada, bob)
    mounts = await _mounts(runtime, "ada")
    router = PathRouter(mounts=mounts)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours\n")
    for bob_mount in await _mounts(runtime, "bob"):  # Bob's own places exist
        if bob_mount.host_path is not None and not bob_mount.read_only:
            bob_mount.host_path.mkdir(parents=True, exist_ok=True)
    checked = 0
    for m in mounts:
        top = "~" if m.is_home else m.prefix
        with pytest.raises(InvalidInputError):
            router.resolve(f"{top}/../x")
        if m.virtual:
            assert isinstance(router.resolve(f"{m.prefix}/a.md"), Virtual), m.name
            continue
        if m.sandbox_only:  # a signpost: the router sends its container path to the notes
            assert isinstance(router.resolve(f"{m.container_path}/a.md"), Virtual), m.name
            continue
        assert m.host_path is not None
        found = router.resolve(top)
        assert isinstance(found, Resolved) and found.mount == m.name
        if m.container_path is not None:  # the sandbox's spelling names the same place
            inside = router.resolve(f"{m.container_path}/x")
            assert isinstance(inside, Resolved) and inside.mount == m.name, m.name
        if m.host_path.is_relative_to(runtime.core.layout.root):  # ours to plant links in
            m.host_path.mkdir(parents=True, exist_ok=True)
            (m.host_path / "escape").symlink_to(outside)
            home_of_bob = runtime.core.layout.home(bob)
            (m.host_path / "to-bob").symlink_to(home_of_bob)
            for path in (f"{top}/escape/secret.txt", f"{top}/to-bob"):
                with pytest.raises(PathDeniedError):
                    router.resolve(path)
            checked += 1
    # The home, the shelf, the two skill trees, two shared folders, two projects; the
    # manual is the shipped asset folder.
    assert checked == 8
    assert {m.prefix for m in mounts} >= {"shared/read", "projects/ada/mine", "projects/bob/ours"}
    assert not {"shared/bobs", "projects/bob/secret"} & {m.prefix for m in mounts}
    for m in mounts:
        if m.prefix in ("shared/read", "projects/bob/ours"):
            assert m.read_only, m.prefix
        if m.prefix in ("shared/write", "projects/ada/mine"):
            assert not m.read_only, m.prefix
    assert ada != bob


def home_at(host: Path) -> MemberMount:
    """A member's home over host: every list check_mounts accepts holds exactly one."""
    return MemberMount(
        name="home", prefix="~", label="Home", host_path=host, container_path=CONTAINER_HOME,
        read_only=False,
    )  # fmt: skip


def shelf_at(
    host: Path, name: str = "s", prefix: str = "s", label: str = "S", *, indexed: bool = False
) -> MemberMount:
    """A read-only place over host, outside the sandbox: the other mount of a checked list."""
    return MemberMount(
        name=name, prefix=prefix, label=label, host_path=host, container_path=None,
        read_only=True, indexed=indexed,
    )  # fmt: skip


def test_a_list_without_exactly_one_home_is_refused(tmp_path: Path) -> None:
    shelf = shelf_at(tmp_path)
    with pytest.raises(ValueError, match="exactly one home"):
        check_mounts([shelf])
    home = home_at(tmp_path)
    with pytest.raises(ValueError, match="share the name"):
        check_mounts([home, shelf, shelf])
    for prefix in ("a/../b", "a//b", "a/.b", "a/b/c/d"):
        bad = shelf_at(tmp_path, "b", prefix, "B")
        with pytest.raises(ValueError, match="one plain name"):
            check_mounts([home, bad])
    # A grouped prefix is a place of a group (`shared/photos`, `projects/ada/kitchen`):
    # never another name, never a group's name alone (it is no folder of anyone's).
    for prefix in ("shared/photos", "projects/ada/kitchen", "skills/mine"):
        grouped = msgspec.structs.replace(shelf, name="g", prefix=prefix)
        assert check_mounts([home, grouped])[1].prefix == prefix
    for prefix in ("s/photos", "shared", "shared/a/b", "projects/ada", "skills"):
        bad = msgspec.structs.replace(shelf, name="g", prefix=prefix)
        with pytest.raises(ValueError, match="place of a group"):
            check_mounts([home, bad])


async def test_the_mounts_whose_writes_need_approval_are_those_the_seeded_rules_require(
    runtime: Runtime,
) -> None:
    await runtime.core.users.create("ada", PASSWORD, "member")
    mounts = await _mounts(runtime, "ada")
    required = {
        r.path_pattern
        for r in SEED_RULES
        if r.tool_pattern == "@fs_write" and r.action == "require" and r.path_pattern
    }
    assert {f"{m.prefix}/**" for m in mounts if m.approval} == required
    assert [m.name for m in mounts if m.approval] == ["shared-memory"]


def test_only_a_note_store_keeps_an_index(tmp_path: Path) -> None:
    shelf = shelf_at(tmp_path, "shelf", "shelf", "Shelf", indexed=True)
    with pytest.raises(ValueError, match="only a note store keeps an index"):
        check_mounts([home_at(tmp_path), shelf])


@pytest.fixture
async def sandbox_runtime(tmp_path: Path, docker: Any) -> AsyncIterator[Runtime]:
    rt = await _boot(tmp_path, SANDBOX_ENV)
    async with sandbox_ready(rt, docker):
        yield rt


async def _run(rt: Runtime, username: str, command: str) -> str:
    user = await rt.core.users.get(username)
    return (await run_in_sandbox(rt, user.id, command, workdir=CONTAINER_HOME)).output


@pytest.mark.docker
async def test_every_mount_is_in_the_sandbox_as_the_list_says_and_no_one_elses(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ids = [(await rt.core.users.create(n, PASSWORD, "member")).user.id for n in ("ada", "bob")]
    await _share_with_ada(rt, *ids)
    marks: dict[str, dict[str, str]] = {"ada": {}, "bob": {}}
    both = {m.host_path for m in await _mounts(rt, "ada")} & {
        m.host_path for m in await _mounts(rt, "bob")
    }
    for name in marks:
        for m in await _mounts(rt, name):
            if m.host_path is None or not m.host_path.is_relative_to(rt.core.layout.root):
                continue  # virtual, or the shipped manual (checked below by its README)
            if m.host_path in both or m.sandbox_only:
                continue  # the household's skills, a project both are in, the signposts
            m.host_path.mkdir(parents=True, exist_ok=True)
            mark = secrets.token_hex(12)
            (m.host_path / f"mark-{m.name.replace('/', '_')}.txt").write_text(mark + "\n")
            marks[name][m.name] = mark
    assert set(marks["ada"]) == {
        "home", "sample", "skills/mine", "shared/read", "shared/write", "projects/ada/mine",
    }  # fmt: skip

    checks = []
    for m in await _mounts(rt, "ada"):
        if m.container_path is None:
            continue
        readme = m.name == "docs" or m.sandbox_only
        mark = f"mark-{m.name.replace('/', '_')}.txt"
        probe = f"{m.container_path}/{'README.md' if readme else mark}"
        checks.append(
            f"echo '== {m.name}'; head -c 200 {probe}; echo; "
            f"touch {m.container_path}/.w 2>&1 && echo WRITABLE"
        )
    out = await _run(rt, "ada", "; ".join(checks))
    sections = {block.split("\n", 1)[0].strip(): block for block in out.split("== ")[1:]}
    for m in await _mounts(rt, "ada"):
        if m.container_path is None:
            assert m.name not in sections
            continue
        text = sections[m.name]
        if m.name in marks["ada"]:
            assert marks["ada"][m.name] in text, (m.name, text)
        elif m.sandbox_only:
            assert "This is not a folder" in text, (m.name, text)
        elif m.name == "docs":
            assert "Skald" in text or "#" in text, (m.name, text)
        if m.read_only:
            assert "Read-only file system" in text and "WRITABLE" not in text, (m.name, text)
        else:
            assert "WRITABLE" in text, (m.name, text)
    # None of Bob's places, by any of his marks, is anywhere in Ada's sandbox.
    look = await _run(
        rt,
        "ada",
        "grep -rslF -e "
        + " -e ".join(marks["bob"].values())
        + " / --exclude-dir=proc --exclude-dir=sys; echo done",
    )
    assert all(mark not in look for mark in marks["bob"].values())
    assert look.strip().endswith("done") and "mark-" not in look, look
