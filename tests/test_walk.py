"""Walking member-controlled trees by descriptor (skald/walk.py), and the backup
and the ZIP download under a member who keeps swapping a folder for a link.

The attack (issue 12, item 1): a member's sandbox replaces a folder of their home with a
link to the data directory while the server walks the home. A walker that resolves
`home/swap/instance.key` as a path string follows the link in the middle of the path and
copies the instance key, the registry and other members' files into the archive.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Api, ServerProcess
from prerequisites import unavailable
from swap_support import Swapper, swapper_fixture  # noqa: F401  (registers `swapper`)

from skald import walk as tree
from skald.features.backups.backup import OfflineSnapshotter, create_backup
from skald.paths import DataLayout

DECOY = b"DECOY-made-by-the-member"
SECRET = b"MUM-SECRET-diary"


def _mimic_data_dir(swap: Path, mum_id: str) -> None:
    """~/swap holds the names the data directory holds, with the member's own content."""
    swap.mkdir()
    (swap / "instance.key").write_bytes(DECOY)
    (swap / "config.toml").write_bytes(DECOY)
    (swap / "database" / "users").mkdir(parents=True)
    (swap / "database" / "system.db").write_bytes(DECOY)
    (swap / "database" / "users" / f"{mum_id}.db").write_bytes(DECOY)
    (swap / "homes" / mum_id / "private").mkdir(parents=True)
    (swap / "homes" / mum_id / "private" / "diary.txt").write_bytes(DECOY)


# -- the walker by itself ---------------------------------------------------------------


def test_the_walk_reports_links_and_special_files_and_never_follows_them(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "b" / "f.txt").write_text("mine")
    (home / "a" / "out").symlink_to(outside)
    (home / "to_secret").symlink_to(outside / "secret.txt")
    os.mkfifo(home / "fifo")
    with tree.opened(home) as fd:
        seen = {e.path: e.kind for e in tree.walk(fd)}
    assert seen == {
        "a": "dir",
        "a/b": "dir",
        "a/b/f.txt": "file",
        "a/out": "symlink",
        "fifo": "other",
        "to_secret": "symlink",
    }


def test_opening_below_a_root_refuses_a_link_in_the_middle(tmp_path: Path) -> None:
    (tmp_path / "real" / "x").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "mid").symlink_to(tmp_path / "real")
    with pytest.raises(OSError) as caught:
        tree.open_tree(tmp_path / "home", ("mid", "x"))
    assert caught.value.errno == errno.ELOOP


def test_a_file_replaced_after_listing_is_not_opened(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("listed")
    os.link(tmp_path / "f", tmp_path / "kept")  # its inode number is not reused meanwhile
    (tmp_path / "secret").write_bytes(SECRET)
    with tree.opened(tmp_path) as fd:
        walking = tree.walk(fd)  # an entry's folder stays open while its walk is alive
        entry = next(e for e in walking if e.name == "f")
        (tmp_path / "f").unlink()
        (tmp_path / "f").symlink_to(tmp_path / "secret")
        with pytest.raises(OSError) as caught:
            entry.open()
        assert caught.value.errno == errno.ELOOP
        (tmp_path / "f").unlink()
        (tmp_path / "f").write_text("another file")
        with pytest.raises(OSError) as caught:
            entry.open()
        assert caught.value.errno == errno.ESTALE


def test_depth_is_capped_and_what_lies_deeper_is_reported(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d"] * 10)
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    problems: list[str] = []
    with tree.opened(tmp_path) as fd:
        entries = list(tree.walk(fd, max_depth=4, report=lambda rel, why: problems.append(why)))
    assert max(len(e.rel) for e in entries) == 4
    assert len(problems) == 1 and "deeper than 4" in problems[0]


def test_usage_counts_hard_links_once_and_follows_no_link(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "a.bin").write_bytes(b"x" * 10_000)
    os.link(home / "a.bin", home / "b.bin")
    (home / "big").symlink_to("/usr")
    measured = tree.usage(home)
    assert measured.apparent == 10_000 + len("/usr") and measured.files == 2  # link: its text
    assert 10_000 <= measured.allocated < 10_000 + 64 * 1024


def test_remove_tree_removes_a_link_never_what_it_points_to(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    home = tmp_path / "home"
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "b" / "f").write_text("x")
    (home / "a" / "out").symlink_to(outside)
    with tree.opened(tmp_path) as fd:
        assert tree.remove_tree(fd, "home") == []
    assert not home.exists() and (outside / "keep.txt").read_text() == "keep"


def _remove(parent: Path, name: str) -> list[str]:
    with tree.opened(parent) as fd:
        return tree.remove_tree(fd, name)


def _as_uid(uid: int, work: Callable[[], list[str]]) -> list[str]:
    """`work()` in a forked child running as `uid` (the service account, not root)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, work, report, leave without cleanup
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, json.dumps(work()).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    result: list[str] = json.loads(data)
    return result


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another uid can reach (pytest's own are 0700 all the way up)."""
    path = Path(tempfile.mkdtemp(prefix="skald-walk-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_remove_tree_carries_on_and_says_what_it_could_not_remove(shared_tmp: Path) -> None:
    """The service account (uid 4321 here) cannot remove what root made in its home."""
    if os.geteuid() != 0:
        unavailable("needs root to make files as another user")
    homes = shared_tmp / "homes"
    home = homes / "ada"
    (home / "mine" / "deep").mkdir(parents=True)
    (home / "mine" / "deep" / "f").write_text("x")
    (home / "rootdir").mkdir()
    (home / "rootdir" / "tool").write_text("made by root")
    (home / "z.txt").write_text("x")
    for path in (homes, home, home / "mine", home / "mine" / "deep"):
        os.chown(path, 4321, 4321)
    for path in (home / "mine" / "deep" / "f", home / "z.txt"):
        os.chown(path, 4321, 4321)
    (home / "rootdir").chmod(0o755)  # root's folder: the service account cannot write
    left = _as_uid(4321, lambda: _remove(homes, "ada"))
    assert left == [
        "ada/rootdir/tool: permission denied (made by another user, e.g. root in the sandbox?)"
    ], left
    assert not (home / "mine").exists() and not (home / "z.txt").exists()
    assert (home / "rootdir" / "tool").exists()


# -- backup under a swapping member ---------------------------------------------------------


def _home_contents(archive: Path, prefix: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.isreg() and member.name.startswith(prefix):
                f = tar.extractfile(member)
                assert f is not None
                out[member.name] = f.read()
    return out


def _other_home(layout: DataLayout) -> Path:
    """Mum's home: many secret files, whose names Ada's ~/peek folder copies."""
    mum = layout.home("mum1")
    (mum / "private").mkdir(parents=True)
    (mum / "private" / "diary.txt").write_bytes(SECRET)
    for n in range(300):
        (mum / f"{n:03}.txt").write_bytes(SECRET)
    return mum


def _mimic_other_home(peek: Path) -> None:
    peek.mkdir()
    for n in range(300):
        (peek / f"{n:03}.txt").write_bytes(DECOY)


def test_backup_never_follows_a_folder_swapped_for_a_link_mid_walk(
    tmp_path: Path, swapper: Swapper
) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    layout = DataLayout(srv.data)
    if not layout.instance_key.exists():
        layout.instance_key.write_bytes(os.urandom(32))
    key = layout.instance_key.read_bytes()
    mum = _other_home(layout)
    ada = layout.home("ada1")
    ada.mkdir()
    bulk = ada / "bulk"
    bulk.mkdir()
    for n in range(2000):  # a slow walk: thousands of small files
        (bulk / f"{n:04}.txt").write_bytes(DECOY)
    _mimic_other_home(ada / "peek")
    _mimic_data_dir(ada / "swap", "mum1")
    swapper(ada, "peek", mum)
    swapper(ada, "swap", layout.root)
    out = tmp_path / "archives"
    out.mkdir()
    for n in range(5):
        target = out / f"b{n}.tar"
        asyncio.run(create_backup(layout, OfflineSnapshotter(layout), quick=False, out=target))
        contents = _home_contents(target, "homes/ada1/")
        assert len(contents) >= 2000
        leaked = sorted(name for name, data in contents.items() if data != DECOY)
        assert not leaked, f"backup {n} copied through a link: {leaked[:5]}"
        assert not any(key in data or SECRET in data for data in contents.values())
        assert _home_contents(target, "homes/mum1/") == {
            f"homes/mum1/{p.relative_to(mum)}": SECRET for p in mum.rglob("*") if p.is_file()
        }
        target.unlink()


def test_backup_of_a_folder_swapped_right_after_it_was_listed_copies_nothing_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race won every time: the moment the walk has listed ~/peek, the member swaps
    it for a link to mum's home (what the concurrent swapper above wins sometimes)."""
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    layout = DataLayout(srv.data)
    mum = _other_home(layout)
    ada = layout.home("ada1")
    ada.mkdir()
    peek = ada / "peek"
    _mimic_other_home(peek)
    swapped: list[bool] = []

    def swap_after(listed: object) -> None:
        where = Path(f"/proc/self/fd/{listed}").readlink() if isinstance(listed, int) else listed
        if str(where) == str(peek) and not swapped:
            peek.rename(ada / ".peek-real")
            peek.symlink_to(mum)
            swapped.append(True)

    real_listdir, real_scandir = os.listdir, os.scandir

    def listdir(path: Any = ".") -> list[str]:
        out = real_listdir(path)
        swap_after(path)
        return out

    class Listed(list[Any]):  # what os.scandir gives, already read
        def __enter__(self) -> Listed:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def close(self) -> None:
            pass

    def scandir(path: Any = ".") -> Any:
        with real_scandir(path) as it:
            out = Listed(it)
        swap_after(path)
        return out

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "scandir", scandir)
    target = tmp_path / "b.tar"
    asyncio.run(create_backup(layout, OfflineSnapshotter(layout), quick=False, out=target))
    monkeypatch.undo()
    assert swapped
    contents = _home_contents(target, "homes/ada1/")
    assert not any(SECRET in data for data in contents.values()), sorted(contents)[:5]
    assert all(data == DECOY for data in contents.values())


# -- the ZIP download under a swapping member ---------------------------------------------


def test_zip_download_never_follows_a_folder_swapped_for_a_link(
    tmp_path: Path, swapper: Swapper
) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user("ada", "a household password")
    layout = DataLayout(srv.data)
    srv.start()
    try:
        api = Api(srv.url)
        me = api.login("ada", "a household password")
        home = layout.home(me["id"])
        key = layout.instance_key.read_bytes()
        mum = _other_home(layout)
        _mimic_other_home(home / "peek")
        _mimic_data_dir(home / "swap", "mum1")
        swapper(home, "peek", mum)
        swapper(home, "swap", layout.root)
        statuses: set[int] = set()
        deadline = time.monotonic() + 20
        rounds = 0
        while rounds < 10 and time.monotonic() < deadline:
            rounds += 1
            for path in ("~", "peek", "swap", "swap/homes"):
                r = api.get("/api/files/zip", params={"path": path})
                statuses.add(r.status_code)
                if r.status_code != 200:
                    assert r.status_code in (403, 404, 409), r.text
                    assert r.json()["error"]["message"]
                    assert r.headers["content-security-policy"]
                    continue
                with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
                    for name in archive.namelist():
                        if name.endswith("/"):
                            continue
                        data = archive.read(name)
                        assert data == DECOY, f"{name} came through the link"
                assert key not in r.content and SECRET not in r.content
        assert 200 in statuses
    finally:
        srv.close()
