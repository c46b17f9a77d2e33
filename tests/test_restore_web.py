"""The guided restore of the Backups page against a real `skald serve`: the page shows
what an archive holds, and a confirmed restore makes the same process stop, restore
(what it replaced kept aside) and start again on the restored data; only an
administrator may, only an archive listed in the backup folder, only a sound one (a
damaged archive is refused before anything stops)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household

import skald

REPO = Path(skald.__file__).resolve().parents[1]
# How an installed Skald starts: a launcher that puts the package on the path itself
# (as the zipapp's bootstrap does), with nothing in PYTHONPATH; `python -m skald` would
# not find it.
LAUNCHER = f"""import sys
sys.path.insert(0, {str(REPO)!r})
from skald.cli import main
sys.exit(main())
"""

MEMBER, MEMBER_PW = "ada", "ada's rather long password"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path, (MEMBER, MEMBER_PW)) as srv:
        yield srv


def _admin(srv: ServerProcess) -> Api:
    api = Api(srv.url)
    api.login(ADMIN, ADMIN_PW)
    return api


def _backup(api: Api) -> str:
    r = api.post("/api/backups/run")
    assert r.status_code == 200, r.text
    return Path(r.json()["path"]).name


def _wait_for_new_start(srv: ServerProcess, before: float, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert srv.proc is not None and srv.proc.poll() is None, srv.log()
        try:
            r = httpx.get(f"{srv.url}/api/health", timeout=1)
            if r.status_code == 200 and r.json()["started_at"] != before:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the server did not start again:\n{srv.log()}")


def _usernames(api: Api) -> set[str]:
    r = api.get("/api/users")
    assert r.status_code == 200, r.text
    return {u["username"] for u in r.json()}


@pytest.mark.timeout(180)
def test_a_confirmed_restore_restarts_the_same_process_into_the_chosen_backup(
    server: ServerProcess,
) -> None:
    api = _admin(server)
    name = _backup(api)
    server.add_user("late", "late's rather long password")
    assert "late" in _usernames(api)

    r = api.get(f"/api/backups/archives/{name}")
    assert r.status_code == 200, r.text
    contents = r.json()
    assert contents["kind"] == "full"
    assert {m["username"] for m in contents["members"]} == {ADMIN, MEMBER}
    assert contents["files"] > 0 and contents["bytes"] > 0

    pid = server.proc.pid if server.proc else None
    before = httpx.get(f"{server.url}/api/health").json()["started_at"]
    r = api.post(f"/api/backups/archives/{name}/restore", json={"confirm": True})
    assert r.status_code == 202, r.text
    assert r.json() == {"restarting": True}
    _wait_for_new_start(server, before)

    assert server.proc is not None and server.proc.pid == pid  # exec'd, not a new process
    # Sessions are not restored: the old one is gone, a new sign-in works.
    assert api.get("/api/backups").status_code == 401
    api = _admin(server)
    assert _usernames(api) == {ADMIN, MEMBER}
    view = api.get("/api/backups").json()
    outcome = view["last_restore"]
    assert outcome["ok"] is True and outcome["archive"] == name and outcome["by"] == ADMIN
    assert outcome["created"] == contents["created"]
    assert Path(outcome["replaced"]).is_dir()  # what it replaced is kept aside
    assert not (server.data / ".restore-request").exists()


@pytest.mark.timeout(120)
def test_only_an_administrator_restores_and_only_a_sound_archive_listed_in_the_folder(
    server: ServerProcess, tmp_path: Path
) -> None:
    api = _admin(server)
    name = _backup(api)
    member = Api(server.url)
    member.login(MEMBER, MEMBER_PW)
    assert member.get(f"/api/backups/archives/{name}").status_code == 403
    r = member.post(f"/api/backups/archives/{name}/restore", json={"confirm": True})
    assert r.status_code == 403

    # Not confirmed, not in the folder, not a path: refused with a sentence.
    r = api.post(f"/api/backups/archives/{name}/restore", json={"confirm": False})
    assert r.status_code == 400 and "confirm" in r.json()["error"]["message"]
    outside = tmp_path / "skald-backup-20260101T000000Z.tar"
    outside.write_bytes(b"not an archive")
    for bad in ("nothing.tar", "..%2F..%2Fserver.log", str(outside).replace("/", "%2F")):
        r = api.post(f"/api/backups/archives/{bad}/restore", json={"confirm": True})
        assert r.status_code == 404, (bad, r.text)

    # A damaged archive in the folder: shown as unusable, refused, nothing stops.
    folder = Path(api.get("/api/backups").json()["folder"])
    damaged = folder / name.replace(".tar", "-2.tar")
    data = bytearray((folder / name).read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    r = api.post(f"/api/backups/archives/{damaged.name}/restore", json={"confirm": True})
    assert r.status_code == 400, r.text
    assert "not a usable Skald backup" in r.json()["error"]["message"]
    assert not (server.data / ".restore-request").exists()
    assert server.proc is not None and server.proc.poll() is None
    assert api.get("/api/backups").status_code == 200  # still signed in: no restart


@pytest.mark.timeout(180)
def test_an_installed_skald_started_by_a_launcher_starts_again_the_same_way(
    tmp_path: Path,
) -> None:
    srv = ServerProcess(tmp_path)
    srv.env.pop("PYTHONPATH", None)
    srv.create_admin()
    launcher = tmp_path / "skald-launcher.py"
    launcher.write_text(LAUNCHER)
    cmd = [sys.executable, str(launcher), "--data", str(srv.data), "serve"]
    cmd += ["--host", "127.0.0.1", "--port", str(srv.port)]
    with srv.log_path.open("ab") as log:
        srv.proc = subprocess.Popen(  # elsewhere than the checkout: not importable from "."
            cmd, env=srv.env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path
        )
    try:
        _wait_for_new_start(srv, before=-1.0)
        api = _admin(srv)
        name = _backup(api)
        before = httpx.get(f"{srv.url}/api/health").json()["started_at"]
        r = api.post(f"/api/backups/archives/{name}/restore", json={"confirm": True})
        assert r.status_code == 202, r.text
        _wait_for_new_start(srv, before)
        assert _admin(srv).get("/api/backups").json()["last_restore"]["ok"] is True
        # The same process (an exec keeps its pid) runs the launcher's command line
        # again: `-m skald` would also find a checkout installed in development mode.
        argv = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [a.decode() for a in argv] == cmd
    finally:
        srv.close()
