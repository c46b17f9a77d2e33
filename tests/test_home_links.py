"""What the server writes into a member's home never goes through a link she put there.

The attack (issue 20, item 1): a member has root in a sandbox whose home is bind-mounted
from `data/homes/<id>/`, and reads the data directory's host path from
`/proc/self/mountinfo`. She plants a link at a name the server writes when a personal
connector starts (`~/.skald/extra-ca.pem`, `~/.skald/connectors/<name>/<version>`, ...)
or at the sandbox's mount point `~/docs`, pointing at another member's database, at
`instance.key`, at a canary in the data directory, or at a folder of them. A server
that writes by path string overwrites those files (the server then refuses to start
for everyone) or fills another member's home.

Each test compares every byte outside the member's home before and after, and checks
the write either failed with a clear error or landed inside the home.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from swap_support import Swapper, swapper_fixture  # noqa: F401  (registers `swapper`)

from skald import walk
from skald.config import SandboxConfig
from skald.features.connectors import home_files
from skald.files import router as fs
from skald.files import tools as file_tools
from skald.paths import DataLayout
from skald.sandbox.manager import SandboxManager, SandboxUnavailable

ALI = "ali1"
BOB = "bob1"
CA = b"-----BEGIN CERTIFICATE-----\nOPERATOR-CA\n-----END CERTIFICATE-----\n"
SERVER = b"print('the connector')\n"
VERSION = "v3"
SECRET = b"BOB-SECRET-notes"

# Every name the server writes in a home when a personal connector starts or the
# sandbox is made; a link is planted at one of them at a time.
PLANTED = [
    ".skald",
    ".skald/connectors",
    ".skald/connectors/clock",
    f".skald/connectors/clock/{VERSION}",
    f".skald/connectors/clock/{VERSION}.copying",
    ".skald/extra-ca.pem",
    "docs",
]
TARGETS = ["bob-db", "instance-key", "canary", "data-dir", "bob-home"]


class Data:
    """A data directory with Ali's home, Bob's database and home, the instance key and
    a canary, an installed connector and the operator's CA bundle."""

    def __init__(self, tmp_path: Path) -> None:
        self.layout = DataLayout(tmp_path / "data").ensure()
        lay = self.layout
        lay.users_db_dir.mkdir(parents=True, exist_ok=True)
        lay.user_db(BOB).write_bytes(os.urandom(4096))
        lay.instance_key.write_bytes(os.urandom(32))
        (lay.root / "canary").write_bytes(b"canary")
        (lay.home(BOB) / "private").mkdir(parents=True)
        (lay.home(BOB) / "private" / "notes.txt").write_bytes(SECRET)
        self.home = lay.home(ALI)
        self.home.mkdir()
        self.src = lay.root / "connectors" / "clock" / VERSION
        (self.src / "lib").mkdir(parents=True)
        (self.src / "server.py").write_bytes(SERVER)
        (self.src / "lib" / "helper.py").write_bytes(b"X = 1\n")
        self.ca = tmp_path / "operator-ca.pem"
        self.ca.write_bytes(CA)

    def target(self, which: str) -> Path:
        return {
            "bob-db": self.layout.user_db(BOB),
            "instance-key": self.layout.instance_key,
            "canary": self.layout.root / "canary",
            "data-dir": self.layout.root,
            "bob-home": self.layout.home(BOB),
        }[which]

    def outside(self) -> dict[str, bytes | None]:
        """Every entry of the data directory outside Ali's home: its bytes (files),
        None (folders), its target (links)."""
        seen: dict[str, bytes | None] = {}
        for top, dirs, files in os.walk(self.layout.root):
            here = Path(top)
            if here == self.home:
                dirs[:] = []
                continue
            for name in dirs + files:
                path = here / name
                rel = str(path.relative_to(self.layout.root))
                if path.is_symlink():
                    seen[rel] = str(path.readlink()).encode()
                elif path.is_file():
                    seen[rel] = path.read_bytes()
                elif path != self.home:
                    seen[rel] = None
        return seen

    def plant(self, rel: str, which: str) -> None:
        link = self.home / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(self.target(which))

    def start_connector(self) -> dict[str, str | None]:
        """What a personal connector's start writes, in order: the error each step met."""
        homes = self.layout.homes_dir
        steps: dict[str, Callable[[], str]] = {
            "files": lambda: home_files.place_files(homes, ALI, "clock", self.src),
            "ca": lambda: home_files.place_ca(homes, ALI, self.ca),
        }
        errors: dict[str, str | None] = {}
        for name, step in steps.items():
            try:
                step()
                errors[name] = None
            except home_files.HomeLinkError as exc:
                errors[name] = str(exc)
        return errors


@pytest.fixture
def data(tmp_path: Path) -> Data:
    return Data(tmp_path)


@pytest.mark.parametrize("which", TARGETS)
@pytest.mark.parametrize("rel", PLANTED)
def test_a_link_planted_in_a_home_never_redirects_a_connector_write(
    data: Data, rel: str, which: str
) -> None:
    data.plant(rel, which)
    before = data.outside()
    errors = data.start_connector()
    assert data.outside() == before
    ca = data.home / ".skald" / "extra-ca.pem"
    copied = data.home / ".skald" / "connectors" / "clock" / VERSION / "server.py"
    for step, placed, content in (("files", copied, SERVER), ("ca", ca, CA)):
        message = errors[step]
        if message is not None:  # failed cleanly, saying why
            assert "never writes through links" in message and "~/.skald" in message
            continue
        # or wrote inside the home: a regular file, in real folders.
        on_the_way = [placed, *placed.parents[: len(placed.relative_to(data.home).parts) - 1]]
        assert not [p for p in on_the_way if p.is_symlink()], step
        assert placed.read_bytes() == content
    if rel == ".skald/extra-ca.pem" or not rel.startswith(".skald"):
        assert errors == {"files": None, "ca": None}  # a link at a file's place is replaced


def test_a_connector_start_copies_its_files_and_the_ca_into_the_home(data: Data) -> None:
    assert data.start_connector() == {"files": None, "ca": None}
    placed = data.home / ".skald" / "connectors" / "clock" / VERSION
    assert (placed / "server.py").read_bytes() == SERVER
    assert (placed / "lib" / "helper.py").read_bytes() == b"X = 1\n"
    assert (data.home / ".skald" / "extra-ca.pem").read_bytes() == CA
    # Placed once per version: what the member changed there stays hers.
    (placed / "server.py").write_bytes(b"mine")
    assert data.start_connector() == {"files": None, "ca": None}
    assert (placed / "server.py").read_bytes() == b"mine"


@pytest.mark.parametrize("which", TARGETS)
@pytest.mark.parametrize(
    "rel",
    [
        ".skald",
        ".skald/connectors",
        ".skald/connectors/deps",
        ".skald/connectors/deps/h1",
        ".skald/connectors/deps/h1/.ready",
    ],
)
def test_the_dependency_check_is_not_fooled_by_a_link(data: Data, rel: str, which: str) -> None:
    ready = data.layout.root / ".ready"
    ready.write_bytes(b"")
    for folder in (data.layout.root, data.layout.home(BOB)):
        (folder / "h1").mkdir(exist_ok=True)
        (folder / "h1" / ".ready").write_bytes(b"")
    data.plant(rel, which)
    # A link on the way is "not installed": the install runs again in the sandbox, as
    # the member; nothing outside the home is ever taken for hers.
    assert home_files.deps_ready(data.layout.homes_dir, ALI, "h1") is (rel.endswith(".ready"))


def test_a_connector_copy_raced_by_a_swapping_member_never_writes_outside(
    data: Data, swapper: Swapper
) -> None:
    """The member swaps ~/.skald for a link to the data directory and back, as fast as
    she can, while the server places the connector again and again."""
    homes = data.layout.homes_dir
    (data.home / ".skald").mkdir()
    versions = data.layout.root.parent / "versions"  # new versions, outside data/
    before = data.outside()
    swapper(data.home, ".skald", data.layout.root)
    placed = failed = 0
    # Until the swapper has won and lost at least once (a busy machine may starve it for
    # a while), at most 3000 placements.
    for n in range(3000):
        if placed >= 50 and failed >= 50:
            break
        src = versions / f"v{n}"
        src.mkdir(parents=True)
        (src / "server.py").write_bytes(SERVER)
        try:
            home_files.place_files(homes, ALI, "clock", src)
            home_files.place_ca(homes, ALI, data.ca)
            placed += 1
        except home_files.HomeLinkError:
            failed += 1
    assert data.outside() == before
    assert placed and failed, (placed, failed)  # the race was run both ways


def test_a_link_at_the_sandboxs_mount_point_is_refused_not_followed(data: Data) -> None:
    data.plant("docs", "bob-home")
    # At a group's name (`~/shared`, where the sandbox binds its folder of mountpoints)
    # a link is moved aside, to `~/shared (own)`, never followed.
    data.plant("shared", "bob-home")
    data.plant("projects/bob/secret", "bob-home")
    before = data.outside()
    manager = SandboxManager(
        SandboxConfig(),
        instance_id="links",
        homes_dir=data.layout.homes_dir,
        docs_dir=data.layout.root.parent / "docs-src",
        members=_no_members,
        # Skald's own folders of mountpoints, outside the data folder watched here.
        mountpoints_dir=data.layout.root.parent / "mountpoints",
    )
    try:
        user = SimpleNamespace(id=ALI)
        role = SimpleNamespace(attributes=SimpleNamespace(sandbox_network="none"))
        spec = manager.spec_for(user, role)  # type: ignore[arg-type]
        with pytest.raises(SandboxUnavailable, match="symbolic link"):
            manager._prepare_host_dirs(spec)
        (data.home / "docs").unlink()
        (data.home / "sub").symlink_to(data.layout.root)
        manager._prepare_host_dirs(spec)
        assert stat.S_ISDIR((data.home / "docs").lstat().st_mode)
        for group in ("shared", "projects", "skills"):
            assert stat.S_ISDIR((data.home / group).lstat().st_mode), group
        assert (data.home / "shared (own)").is_symlink()
        assert (data.home / "projects (own)/bob/secret").is_symlink()
        assert not list((data.home / "shared").iterdir())
    finally:
        manager._pool.shutdown()
        manager.stream_pool.shutdown()
    assert data.outside() == before


async def _no_members() -> list[Any]:
    return []


# -- the file tools' own looks at a file ------------------------------------------------


def _swapped_after_resolving(data: Data) -> fs.Resolved:
    """~/swap/notes.txt resolved while ~/swap was a folder, then ~/swap swapped for a
    link to Bob's private folder (what the swapper does between two system calls)."""
    (data.home / "swap").mkdir()
    (data.home / "swap" / "notes.txt").write_bytes(b"mine")
    found = fs.PathRouter(data.home).resolve("~/swap/notes.txt")
    assert isinstance(found, fs.Resolved)
    (data.home / "swap").rename(data.home / "swap-real")
    (data.home / "swap").symlink_to(data.layout.home(BOB) / "private")
    return found


def test_a_write_preview_never_reads_through_a_folder_swapped_for_a_link(data: Data) -> None:
    found = _swapped_after_resolving(data)
    shown = file_tools._text_for_preview(found)
    assert shown is None or SECRET.decode() not in shown


def test_the_quota_never_counts_a_file_outside_the_home_as_the_one_replaced(
    data: Data,
) -> None:
    (data.layout.home(BOB) / "private" / "notes.txt").write_bytes(b"x" * 100_000)
    found = _swapped_after_resolving(data)
    assert file_tools._existing_size(found) == 0


def test_write_file_at_replaces_a_link_and_never_writes_through_it(data: Data) -> None:
    key = data.layout.instance_key.read_bytes()
    (data.home / "f").symlink_to(data.layout.instance_key)
    with walk.opened(data.layout.homes_dir, (ALI,)) as fd:
        walk.write_file_at(fd, "f", b"new")
    assert data.layout.instance_key.read_bytes() == key
    assert not (data.home / "f").is_symlink() and (data.home / "f").read_bytes() == b"new"


def test_makedirs_at_refuses_a_link_on_the_way(data: Data) -> None:
    (data.home / "a").symlink_to(data.layout.root)
    with walk.opened(data.layout.homes_dir, (ALI,)) as fd, pytest.raises(OSError) as info:
        walk.makedirs_at(fd, ("a", "b"))
    assert info.value.errno == errno.ELOOP
    assert not (data.layout.root / "b").exists()
