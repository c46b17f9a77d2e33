"""Deleting an account removes its home by descriptor and says what it could not remove
(issue 12, item 9): files root made in the sandbox used to survive a silent 204."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Client, MakeClient, signed_in
from prerequisites import unavailable

from skald.core.runtime import Runtime


@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """Make a file that not even root can remove (chattr +i); undone at the end. The
    stand-in, for a test running as root, for a root-owned file the service account
    cannot remove (tests/test_walk.py shows that case with a real second uid)."""
    made: list[Path] = []

    def make(path: Path) -> None:
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if r.returncode != 0:
            unavailable(f"chattr +i is not available here: {r.stderr!r}")
        made.append(path)

    if shutil.which("chattr") is None:
        unavailable("no chattr (Debian: e2fsprogs)")
    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


@pytest.fixture
def ada_home(runtime: Runtime, household: dict[str, str]) -> Path:
    """Ada's home folder (the member every test here deletes or empties)."""
    return runtime.core.layout.home(household["ada"])


async def _admin(make_client: MakeClient) -> Client:
    client = await signed_in(make_client, "mum")
    return client


async def test_deleting_an_account_removes_its_home_but_no_link_target(
    household: dict[str, str], ada_home: Path, make_client: MakeClient, tmp_path: Path
) -> None:
    home = ada_home
    (home / "a" / "b").mkdir(parents=True)
    (home / "a" / "b" / "f.txt").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (home / "a" / "out").symlink_to(outside)
    mum = await _admin(make_client)
    r = await mum.call("DELETE", f"/api/users/{household['ada']}")
    assert r.status_code == 204, r.text
    assert not home.exists() and (outside / "keep.txt").read_text() == "keep"


async def test_deleting_an_account_says_what_of_its_home_is_left(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    immutable: Callable[[Path], None],
) -> None:
    home = runtime.core.layout.home(household["ada"])
    (home / "rootdir").mkdir(parents=True)
    (home / "rootdir" / "tool").write_text("made by root in the sandbox")
    (home / "mine.txt").write_text("x")
    immutable(home / "rootdir" / "tool")
    mum = await _admin(make_client)
    r = await mum.call("DELETE", f"/api/users/{household['ada']}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["deleted"] is True and body["count"] == 1
    assert body["left_behind"] == [
        "rootdir/tool: permission denied (made by another user, e.g. root in the sandbox?)"
    ]
    assert str(home) in body["fix"] and "rm -rf" in body["fix"]
    assert await runtime.core.registry.get_user(household["ada"]) is None
    assert not (home / "mine.txt").exists() and (home / "rootdir" / "tool").exists()


async def test_a_recursive_delete_in_files_goes_as_far_as_it_can_and_says_what_is_left(
    ada_home: Path, make_client: MakeClient, immutable: Callable[[Path], None]
) -> None:
    home = ada_home
    (home / "proj" / "build").mkdir(parents=True)
    (home / "proj" / "build" / "rootfile").write_text("made by root")
    (home / "proj" / "src.txt").write_text("x")
    immutable(home / "proj" / "build" / "rootfile")
    ada = await signed_in(make_client, "ada")
    r = await ada.call("DELETE", "/api/file", params={"path": "proj", "recursive": "1"})
    assert r.status_code == 409, r.text
    message = r.json()["error"]["message"]
    assert "partly deleted" in message and "~/proj/build/rootfile" in message
    assert not (home / "proj" / "src.txt").exists()
