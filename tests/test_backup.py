"""`skald backup` / `skald restore` (skald/features/backups/archive.py, backup.py, restore.py;
skald/store/snapshot.py).

The round trip runs against a real server with real SQLCipher files: a backup while a
member is unlocked and writing, a restore into the stopped instance, and the member
finding what they had at backup time. Encrypted databases must stay encrypted all the
way (in the archive, after the restore), a damaged or hostile archive must change
nothing, and a crash's leftover WAL must survive the trip.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import PASSWORD
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, run_cli

from skald.core.keys import TEST_KDF
from skald.core.users import UserManager
from skald.errors import SkaldError, StorageError
from skald.features.backups.archive import MANIFEST_NAME, BackupError
from skald.features.backups.backup import OfflineSnapshotter, create_backup
from skald.features.backups.restore import restore_command
from skald.features.notifications.webpush import VapidKey
from skald.paths import DataLayout
from skald.store.database import _apply_key
from skald.store.registry import Registry
from skald.store.snapshot import SQLITE_MAGIC, snapshot

MARK_BEFORE = "MARKER-conversation-before-backup"
MARK_AFTER = "MARKER-conversation-after-backup"


# -- helpers -------------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every path under `root` with its type and content digest (files) or target."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", str(path.readlink()))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", oct(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                out[rel] = ("other", "")
    return out


def _manifest(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        f = tar.extractfile(MANIFEST_NAME)
        assert f is not None
        data: dict[str, Any] = json.loads(f.read())
        return data


def _member(archive: Path, name: str) -> bytes:
    with tarfile.open(archive) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def _db_of(manifest: dict[str, Any], username: str) -> dict[str, Any]:
    return next(d for d in manifest["databases"] if d["username"] == username)


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("skald:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def _conversation_titles(api: Api) -> list[str]:
    r = api.get("/api/conversations")
    assert r.status_code == 200, r.text
    return [c["title"] for c in r.json()]


def _new_conversation(api: Api, title: str) -> None:
    r = api.post("/api/conversations", json={"title": title})
    assert r.status_code == 201, r.text


# -- the round trip through a real server ---------------------------------------------------


def test_backup_while_serving_and_restore_into_the_stopped_instance(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    for name, role in (("ada", "member"), ("tim", "children")):
        srv.add_user(name, PASSWORD, role)
    try:
        srv.start()
        ada = Api(srv.url)
        me = ada.login("ada", PASSWORD)
        ada_id = me["id"]
        _new_conversation(ada, MARK_BEFORE)
        tim = Api(srv.url)  # unencrypted: his sessions survive restarts, not restores
        tim.login("tim", PASSWORD)
        r = ada.post("/api/file", json={"path": "~/diary.txt", "content": "DIARY-BEFORE"})
        assert r.status_code == 201, r.text

        # A second tab of Ada's keeps writing while the backup runs.
        stop = threading.Event()
        written: list[int] = []

        def keep_writing() -> None:
            busy = Api(srv.url)
            busy.login("ada", PASSWORD)
            n = 0
            while not stop.is_set():
                _new_conversation(busy, f"busy {n}")
                n += 1
            written.append(n)
            busy.close()

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            r = srv.cli("backup")
        finally:
            stop.set()
            writer.join(30)
        assert r.returncode == 0, r.stderr
        assert "by the running server" in r.stdout
        archive = Path(r.stdout.split("Backup written: ", 1)[1].split("\n", 1)[0])
        assert archive.parent == srv.data / "backups" and archive.suffix == ".tar"
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        assert written and written[0] > 0

        manifest = _manifest(archive)
        assert manifest["format"] == "skald-backup" and manifest["kind"] == "full"
        registry = next(d for d in manifest["databases"] if d["kind"] == "registry")
        assert registry["encrypted"] is False
        # Ada is unlocked: copied online, keyed. Mum is locked: her quiescent file as it is.
        ada_info = _db_of(manifest, "ada")
        assert ada_info["method"] == "online" and ada_info["encrypted"] is True
        assert ada_info["user_version"] >= 1 and ada_info["wal"] is False
        assert _db_of(manifest, ADMIN)["method"] == "copy"
        assert _db_of(manifest, "tim")["encrypted"] is False

        ada_db = _member(archive, f"database/users/{ada_id}.db")
        assert not ada_db.startswith(b"SQLite format 3")
        for needle in (b"SQLite format", b"MARKER-conversation", b"CREATE TABLE", b"busy 1"):
            assert needle not in ada_db, needle
        assert _member(archive, "database/system.db").startswith(SQLITE_MAGIC)  # as it was
        tim_id = _db_of(manifest, "tim")["user_id"]
        assert _member(archive, f"database/users/{tim_id}.db").startswith(SQLITE_MAGIC)
        assert _member(archive, f"homes/{ada_id}/diary.txt") == b"DIARY-BEFORE"
        assert _member(archive, "instance.key") == (srv.data / "instance.key").read_bytes()
        names = {e["path"] for e in manifest["files"]}
        assert not any(n.startswith(("backups", "cache", "ops.token", ".serve")) for n in names)

        # Life goes on after the backup...
        _new_conversation(ada, MARK_AFTER)
        r = ada.post("/api/file", json={"path": "~/diary.txt", "content": "DIARY-AFTER"})
        assert r.status_code == 200, r.text
        ada.close()

        # ...and a restore is refused while the server runs.
        r = srv.cli("restore", str(archive), "--yes")
        assert r.returncode == 1
        assert "stop it first" in _one_line_error(r.stderr)
        assert not [p for p in (srv.data / "backups").iterdir() if p.name.startswith("repl")]

        code, _ = srv.stop()
        assert code == 0
        srv.add_user("bob", PASSWORD)

        r = srv.cli("restore", str(archive), "--yes")
        assert r.returncode == 0, r.stderr
        replaced = [p for p in (srv.data / "backups").iterdir() if p.name.startswith("replaced-")]
        assert len(replaced) == 1
        # Nothing lost: what the restore replaced is all there, Bob included.
        assert (replaced[0] / "homes" / ada_id / "diary.txt").read_text() == "DIARY-AFTER"
        assert (replaced[0] / "database" / "system.db").exists()
        restored = srv.data / "database" / "users" / f"{ada_id}.db"
        assert not restored.read_bytes().startswith(b"SQLite format 3")
        assert stat.S_IMODE(restored.stat().st_mode) == 0o600
        assert stat.S_IMODE((srv.data / "database").stat().st_mode) == 0o700
        assert not [p for p in srv.data.iterdir() if p.name.startswith(".restore")]

        srv.start()
        ada = Api(srv.url)
        ada.login("ada", PASSWORD)  # her password opens the restored, still encrypted file
        titles = _conversation_titles(ada)
        assert MARK_BEFORE in titles and MARK_AFTER not in titles
        r = ada.get("/api/file", params={"path": "~/diary.txt"})
        assert r.status_code == 200 and r.content == b"DIARY-BEFORE"
        ada.close()
        # Everyone signs in again: sessions revoked after the backup stay revoked.
        assert tim.get("/api/auth/me").status_code == 401
        tim.close()
        mum = Api(srv.url)
        mum.login(ADMIN, ADMIN_PW)  # the locked copy opens too
        users = [u["username"] for u in mum.get("/api/users").json()]
        assert "bob" not in users and {"ada", "tim", ADMIN} <= set(users)
        mum.close()
    finally:
        srv.close()


# -- offline: the CLI by itself, bad archives ---------------------------------------------


@pytest.fixture
def offline(tmp_path: Path) -> ServerProcess:
    """A data directory with an admin, a member and some home content; no server."""
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user("ada", PASSWORD)
    home = srv.data / "homes" / "somebody"
    (home / "sub").mkdir(parents=True)
    (home / "sub" / "notes.txt").write_text("home content")
    (home / "script.sh").write_text("#!/bin/sh\n")
    (home / "script.sh").chmod(0o750)
    (home / "inside-link").symlink_to("sub/notes.txt")
    (home / "outside-link").symlink_to("/usr/bin/python3")
    os.mkfifo(home / "a-fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(home / "a-socket"))
    (srv.data / "shared" / "family").mkdir(parents=True)
    # The operator keeps the configuration elsewhere and links it in.
    (tmp_path / "etc-skald.toml").write_text('[log]\nlevel = "info"\n')
    (srv.data / "config.toml").symlink_to(tmp_path / "etc-skald.toml")
    (srv.data / "shared" / "family" / "list.md").write_text("milk")
    return srv


def _backup(srv: ServerProcess, *args: str) -> Path:
    r = srv.cli("backup", *args)
    assert r.returncode == 0, r.stderr
    assert "directly (no server running)" in r.stdout
    return Path(r.stdout.split("Backup written: ", 1)[1].split("\n", 1)[0])


def test_offline_backup_keeps_modes_and_links_and_skips_what_it_cannot_restore(
    offline: ServerProcess, tmp_path: Path
) -> None:
    archive = _backup(offline)
    manifest = _manifest(archive)
    entries = {e["path"]: e for e in manifest["files"]}
    assert entries["homes/somebody/script.sh"]["mode"] == 0o750
    assert entries["homes/somebody/inside-link"] == {
        "path": "homes/somebody/inside-link",
        "type": "symlink",
        "mode": 0o777,
        "target": "sub/notes.txt",
    }
    assert "shared/family/list.md" in entries
    for left_out in ("outside-link", "a-fifo", "a-socket"):
        assert f"homes/somebody/{left_out}" not in entries
        assert any(left_out in s for s in manifest["skipped"]), left_out
    assert all(d["method"] == "copy" for d in manifest["databases"] if d["kind"] == "owner")

    # Restore into a brand-new data directory (a new machine).
    fresh = tmp_path / "fresh"
    r = offline.cli("--data", str(fresh / "data"), "restore", str(archive), "--yes")
    assert r.returncode == 0, r.stderr
    home = fresh / "data" / "homes" / "somebody"
    assert (home / "inside-link").is_symlink() and (
        home / "inside-link"
    ).read_text() == "home content"
    assert stat.S_IMODE((home / "script.sh").stat().st_mode) == 0o750
    assert (fresh / "data" / "shared" / "family" / "list.md").read_text() == "milk"
    assert stat.S_IMODE((fresh / "data" / "database").stat().st_mode) == 0o700
    config = fresh / "data" / "config.toml"
    assert not config.is_symlink() and "level" in config.read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    # An archive written into a backed-up folder does not try to contain itself.
    inside = _backup(offline, "--out", str(offline.data / "homes" / "somebody"))
    assert inside.parent == offline.data / "homes" / "somebody"
    names = {e["path"] for e in _manifest(inside)["files"]}
    assert f"homes/somebody/{inside.name}" not in names
    assert not any(".partial" in n for n in names)
    assert "homes/somebody/sub/notes.txt" in names


def test_quick_backup_holds_databases_and_keys_only(offline: ServerProcess) -> None:
    # The Web Push key is one of the instance's keys: devices' subscriptions are bound to it.
    vapid = VapidKey.load_or_create(offline.data / "vapid.pem")
    # The operator's own agents (issue 31) are small and are configuration: kept too.
    (offline.data / "agents" / "recipes").mkdir(parents=True)
    (offline.data / "agents" / "recipes" / "AGENT.md").write_text("# Recipes\n")
    archive = _backup(offline, "--quick")
    manifest = _manifest(archive)
    assert manifest["kind"] == "quick"
    tops = {e["path"].split("/", 1)[0] for e in manifest["files"]}
    known = {"database", "instance.key", "config.toml", "providers.json", "vapid.pem", "agents"}
    assert tops <= known
    assert "vapid.pem" in tops and "agents/recipes/AGENT.md" in {
        e["path"] for e in manifest["files"]
    }
    # A quick restore puts the databases back and leaves the homes alone.
    (offline.data / "homes" / "somebody" / "sub" / "notes.txt").write_text("newer")
    r = offline.cli("restore", str(archive), "--yes")
    assert r.returncode == 0, r.stderr
    assert (offline.data / "homes" / "somebody" / "sub" / "notes.txt").read_text() == "newer"
    assert VapidKey.load_or_create(offline.data / "vapid.pem").public_key == vapid.public_key


def _rewrite(archive: Path, dest: Path, edit: Any) -> Path:
    """Copy `archive` member by member, letting `edit(info, data)` change or drop each."""
    with tarfile.open(archive) as src, tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as out:
        for info in src.getmembers():
            f = src.extractfile(info) if info.isreg() else None
            data = f.read() if f is not None else None
            changed = edit(info, data)
            if changed is None:
                continue
            info, data = changed
            if data is not None:
                info.size = len(data)
            out.addfile(info, io.BytesIO(data) if data is not None else None)
    return dest


def _add(dest: Path, archive: Path, info: tarfile.TarInfo, data: bytes | None = None) -> Path:
    shutil.copyfile(archive, dest)
    with tarfile.open(dest, "a") as out:
        out.addfile(info, io.BytesIO(data) if data is not None else None)
    return dest


def _manifest_edit(fn: Any) -> Any:
    def edit(info: tarfile.TarInfo, data: bytes | None) -> Any:
        if info.name == MANIFEST_NAME and data is not None:
            manifest = json.loads(data)
            fn(manifest)
            return info, json.dumps(manifest).encode()
        return info, data

    return edit


def test_bad_archives_are_refused_and_change_nothing(
    offline: ServerProcess, tmp_path: Path
) -> None:
    archive = _backup(offline, "--out", str(tmp_path / "good.tar"))
    raw = archive.read_bytes()
    bad = tmp_path / "bad"
    bad.mkdir()

    flipped = bytearray(raw)
    at = raw.index(b"home content")
    flipped[at] ^= 0x01
    (bad / "flipped.tar").write_bytes(bytes(flipped))
    (bad / "truncated.tar").write_bytes(raw[: len(raw) // 2])
    (bad / "noise.tar").write_bytes(os.urandom(20000))
    (bad / "empty.tar").write_bytes(b"")

    def drop(name: str) -> Any:
        return lambda info, data: None if info.name == name else (info, data)

    _rewrite(archive, bad / "missing-member.tar", drop("homes/somebody/sub/notes.txt"))
    _rewrite(archive, bad / "no-manifest.tar", drop(MANIFEST_NAME))
    _rewrite(
        archive,
        bad / "wrong-format.tar",
        _manifest_edit(lambda m: m.update(format="something-else")),
    )
    _rewrite(
        archive,
        bad / "newer-schema.tar",
        _manifest_edit(lambda m: m["schema"].update(registry=m["schema"]["registry"] + 1)),
    )
    _rewrite(
        archive,
        bad / "bad-manifest.tar",
        lambda i, d: (i, b"{not json" if i.name == MANIFEST_NAME else d),
    )

    def evil(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = target
        return info

    _add(bad / "dotdot.tar", archive, evil("homes/../../evil.txt"), b"x")
    _add(bad / "absolute.tar", archive, evil("/tmp/evil.txt"), b"x")
    _add(bad / "runtime-state.tar", archive, evil("ops.token"), b"x")
    _add(bad / "link-out.tar", archive, evil("homes/x", tarfile.SYMTYPE, "/etc"))
    _add(bad / "link-up.tar", archive, evil("homes/x", tarfile.SYMTYPE, "../../.."))
    _add(bad / "hardlink.tar", archive, evil("homes/h", tarfile.LNKTYPE, "instance.key"))
    _add(bad / "device.tar", archive, evil("homes/dev", tarfile.CHRTYPE))
    _add(bad / "extra.tar", archive, evil("homes/unlisted.txt"), b"x")

    before = _tree(offline.data)
    # Links out, listed in the manifest as if they were ours.
    for name, target in (("link-out", "/etc"), ("link-up", "../../..")):
        entry = {"path": "homes/x", "type": "symlink", "mode": 0o777, "target": target}
        _rewrite(
            bad / f"{name}.tar",
            bad / f"{name}-listed.tar",
            _manifest_edit(lambda m, entry=entry: m["files"].append(entry)),
        )
    expected = {
        "flipped": "does not match its checksum",
        "dotdot": "unsafe member name",
        "absolute": "unsafe member name",
        "link-out-listed": "pointing outside",
        "link-up-listed": "pointing outside",
        "hardlink": "hard link",
        "newer-schema": "newer Skald",
        "missing-member": "listed but missing",
    }
    for case in sorted(bad.iterdir()):
        r = offline.cli("restore", str(case), "--yes")
        assert r.returncode == 1, (case.name, r.stdout, r.stderr)
        line = _one_line_error(r.stderr)
        assert "nothing was changed" in line, (case.name, line)
        assert expected.get(case.stem, "") in line, (case.name, line)
        assert _tree(offline.data) == before, case.name
    r = offline.cli("restore", str(tmp_path / "does-not-exist.tar"), "--yes")
    assert r.returncode == 1 and "no such file" in _one_line_error(r.stderr)
    assert _tree(offline.data) == before

    # The good archive still restores.
    r = offline.cli("restore", str(archive), "--yes")
    assert r.returncode == 0, r.stderr


def test_restore_without_terminal_or_yes_refuses(offline: ServerProcess, tmp_path: Path) -> None:
    archive = _backup(offline, "--out", str(tmp_path))
    assert archive.parent == tmp_path
    before = _tree(offline.data)
    # No --yes and no terminal (setsid: no controlling terminal even under a developer's
    # shell): a refusal, not a prompt nobody can answer.
    r = subprocess.run(
        ["setsid", sys.executable, "-m", "skald", "--data", str(offline.data), "restore", archive],
        capture_output=True,
        text=True,
        env=offline.env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2
    assert "add --yes" in _one_line_error(r.stderr)
    assert _tree(offline.data) == before


def test_backup_cli_errors_are_one_line(offline: ServerProcess, tmp_path: Path) -> None:
    r = offline.cli("backup", "--out", str(tmp_path / "no" / "such" / "dir.tar"))
    assert r.returncode == 1 and "is not a folder" in _one_line_error(r.stderr)
    taken = tmp_path / "taken.tar"
    taken.write_text("mine")
    r = offline.cli("backup", "--out", str(taken))
    assert r.returncode == 1 and "already exists" in _one_line_error(r.stderr)
    assert taken.read_text() == "mine"
    r = offline.cli("--data", str(tmp_path / "empty"), "backup")
    assert r.returncode == 1 and "no Skald data" in _one_line_error(r.stderr)
    assert not (tmp_path / "empty").exists()
    assert not list((offline.data / "backups").iterdir())  # no partial files, no staging


# -- the database copies themselves ---------------------------------------------------------


def test_snapshot_keys_the_destination(tmp_path: Path) -> None:
    key = os.urandom(32)
    src = apsw.Connection(str(tmp_path / "src.db"))
    _apply_key(src, key)
    src.execute("PRAGMA journal_mode=WAL")
    src.execute("CREATE TABLE t(x); INSERT INTO t VALUES ('a secret sentence')")
    dest = tmp_path / "copy.db"
    assert snapshot(src, dest, key) == 0
    data = dest.read_bytes()
    assert not data.startswith(SQLITE_MAGIC) and b"a secret sentence" not in data
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    check = apsw.Connection(str(dest))
    _apply_key(check, key)
    assert check.execute("SELECT x FROM t").fetchall() == [("a secret sentence",)]
    check.close()
    # The trap: an unkeyed destination. This SQLite3MC refuses to copy; whatever a
    # build does, no clear-text copy may be left behind.
    plain = tmp_path / "plain.db"
    with pytest.raises((apsw.Error, StorageError)):
        snapshot(src, plain, None)
    assert not plain.exists() or b"a secret sentence" not in plain.read_bytes()
    src.close()


async def test_locked_database_with_a_crash_wal_survives_the_trip(
    users: UserManager, registry: Registry, layout: DataLayout, tmp_path: Path
) -> None:
    created = await users.create("ada", PASSWORD, "member")
    handle = await users.unlock("ada", PASSWORD)
    await handle.store.note_put("main/first.md", "in the main file")
    await handle.db.call(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    await handle.db.call(lambda c: c.execute("PRAGMA wal_autocheckpoint=0").fetchall())
    await handle.store.note_put("wal/only.md", "WAL ONLY TEXT")
    db_path = layout.user_db(created.user.id)
    wal = db_path.with_name(db_path.name + "-wal")
    assert wal.stat().st_size > 0
    # The state a crash leaves: main file and WAL on disk, nobody has them open.
    crashed = DataLayout(tmp_path / "crashed")
    shutil.copytree(layout.root, crashed.root, ignore=shutil.ignore_patterns("*-shm"))
    await users.lock(created.user.id)

    result = await create_backup(
        crashed, OfflineSnapshotter(crashed), quick=True, out=tmp_path / "crash.tar"
    )
    archive = Path(result.path)
    info = _db_of(_manifest(archive), "ada")
    assert info["wal"] is True and info["method"] == "copy" and info["encrypted"] is True
    wal_bytes = _member(archive, f"{info['path']}-wal")
    assert b"WAL ONLY TEXT" not in wal_bytes and b"wal/only.md" not in wal_bytes

    target = DataLayout(tmp_path / "restored")
    done = await restore_command(target, archive, lambda checked, plan: True)
    assert done is not None and done.replaced is None
    restored_registry = await Registry.open(target.system_db)
    try:
        manager = UserManager(restored_registry, target, TEST_KDF)
        again = await manager.unlock("ada", PASSWORD)
        assert await again.store.note_get("wal/only.md") == "WAL ONLY TEXT"
        assert await again.store.note_get("main/first.md") == "in the main file"
        await manager.lock_all()
    finally:
        await restored_registry.close()


async def test_declined_restore_changes_nothing(tmp_path: Path, offline: ServerProcess) -> None:
    archive = _backup(offline)
    layout = DataLayout(offline.data)
    before = _tree(offline.data)
    assert await restore_command(layout, archive, lambda checked, plan: False) is None
    assert _tree(offline.data) == before
    with pytest.raises(BackupError):
        await restore_command(layout, tmp_path / "nope.tar", lambda c, p: True)
    assert issubclass(BackupError, SkaldError)


def test_restore_stops_sandboxes_still_mounting_the_replaced_homes(
    offline: ServerProcess,
) -> None:
    """A running container keeps its bind mount on the old home folder (now moved under
    backups/replaced-*); the restore stops it, and started again it sees the restored one."""
    from sandbox_support import docker_client, remove_instance_containers

    from skald.sandbox.image import image_tag
    from skald.store.snapshot import read_instance_id

    client = docker_client()
    instance_id = read_instance_id(offline.data / "database" / "system.db")
    assert instance_id
    home = offline.data / "homes" / "somebody"
    archive = _backup(offline)
    (home / "sub" / "notes.txt").write_text("written after the backup")
    container = client.containers.run(
        image_tag(),
        ["sleep", "300"],
        detach=True,
        labels={"skald.instance": instance_id, "skald.user": "somebody"},
        volumes={str(home): {"bind": "/mnt/home", "mode": "rw"}},
    )
    try:

        def seen() -> bytes:
            out = container.exec_run(["cat", "/mnt/home/sub/notes.txt"]).output
            return bytes(out)

        assert seen() == b"written after the backup"
        env = {**offline.env, "SKALD_SANDBOX_ENABLED": "true"}
        r = run_cli(offline.data, env, "restore", str(archive), "--yes")
        assert r.returncode == 0, r.stderr
        assert "Stopped 1 sandbox(es)" in r.stdout
        container.reload()
        assert container.status == "exited"
        container.start()
        assert seen() == b"home content"
    finally:
        remove_instance_containers(client, instance_id)
        client.close()
