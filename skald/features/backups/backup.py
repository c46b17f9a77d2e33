"""`skald backup`: take consistent copies of the databases and write one archive.

The archive's format is `skald.features.backups.archive`. Databases:
- open ones (the registry; an owner database while its member is unlocked in the
  server) are copied by `skald.store.snapshot` on their own thread, the copy keyed
  with the same raw key, so encrypted data stays encrypted;
- a locked owner database is quiescent (nothing can open it without the member's
  key, and `UserManager.held` keeps it from being unlocked during the copy), so its
  bytes are copied as they are. A `-wal` left by a crash goes into the archive with
  it: it cannot be checkpointed without the key, and SQLite replays it at the next
  unlock. The `-shm` index is not copied; SQLite rebuilds it.

Everything slow (copies, hashing, tar) runs in threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import tarfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

import apsw
import msgspec

from skald import __version__
from skald import walk as tree
from skald.config import Config
from skald.features.backups.archive import (
    CONFIG_FILES,
    DATABASE_DIR,
    EXCLUDED,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_NAME,
    QUICK_FOLDERS,
    QUICK_NAMES,
    BackupError,
    DatabaseInfo,
    Entry,
    Manifest,
    absolute_path,
    fsync_dir,
    link_escapes,
    utc_stamp,
)
from skald.features.backups.shapes import BackupResult
from skald.log import get_logger
from skald.ops.channel import InstanceBusyError, InstanceLock, holder, ops_request
from skald.paths import DataLayout, validate_user_id
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY
from skald.store.snapshot import header_user_version, snapshot

if TYPE_CHECKING:
    from skald.plugins.facade import Server

log = get_logger("skald.backup")


# -- taking the database copies --------------------------------------------------------


class Snapshotter(Protocol):
    """Copies the databases into the staging folder, the right way for where they are."""

    async def registry(self, dest: Path) -> int: ...

    async def owner(self, user_id: str, src: Path, dest: Path) -> DatabaseInfo: ...


def _copy_quiescent(src: Path, dest: Path, arcname: str, user_id: str) -> DatabaseInfo:
    """Byte copy of a database nothing has open (plus a crash's leftover WAL)."""
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    dest.chmod(0o600)
    wal_src = src.with_name(src.name + "-wal")
    wal = False
    with contextlib.suppress(FileNotFoundError):
        if wal_src.stat().st_size > 0:
            wal_dest = dest.with_name(dest.name + "-wal")
            shutil.copyfile(wal_src, wal_dest)
            wal_dest.chmod(0o600)
            wal = True
    version = None if wal else header_user_version(dest)
    return DatabaseInfo(
        path=arcname, kind="owner", user_id=user_id, method="copy", user_version=version, wal=wal
    )


def _offline_registry(src: Path, dest: Path, busy_timeout_ms: int) -> int:
    conn = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(busy_timeout_ms)
        return snapshot(conn, dest, None)
    finally:
        conn.close()


class OfflineSnapshotter:
    """No server runs (the caller holds the instance lock): nothing has an owner
    database open, and the registry is copied through a connection of our own."""

    def __init__(self, layout: DataLayout, busy_timeout_ms: int = 5000) -> None:
        self.layout = layout
        self.busy_timeout_ms = busy_timeout_ms

    async def registry(self, dest: Path) -> int:
        return await asyncio.to_thread(
            _offline_registry, self.layout.system_db, dest, self.busy_timeout_ms
        )

    async def owner(self, user_id: str, src: Path, dest: Path) -> DatabaseInfo:
        return await asyncio.to_thread(_copy_quiescent, src, dest, _owner_arcname(user_id), user_id)


class ServerSnapshotter:
    """Inside the running server: open databases are copied on their own threads (an
    owner database through `Server.held_for_backup`, which keeps the member's key)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def registry(self, dest: Path) -> int:
        return await self.server.db.call(lambda c: snapshot(c, dest, None))

    async def owner(self, user_id: str, src: Path, dest: Path) -> DatabaseInfo:
        async with self.server.held_for_backup(user_id) as held:
            if held is None:
                return await asyncio.to_thread(
                    _copy_quiescent, src, dest, _owner_arcname(user_id), user_id
                )
            version = await held.snapshot(dest)
        return DatabaseInfo(
            path=_owner_arcname(user_id),
            kind="owner",
            user_id=user_id,
            encrypted=held.encrypted,
            method="online",
            user_version=version,
        )


def _owner_arcname(user_id: str) -> str:
    return f"{DATABASE_DIR}/users/{user_id}.db"


def _registry_users(path: Path) -> dict[str, tuple[str, bool]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT id, username, encrypted FROM users").fetchall()
    finally:
        conn.close()
    return {str(r[0]): (str(r[1]), bool(r[2])) for r in rows}


def _owner_files(layout: DataLayout) -> list[tuple[str, Path]]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        for path in sorted(layout.users_db_dir.iterdir()):
            if path.suffix != ".db" or not path.is_file():
                continue
            try:
                out.append((validate_user_id(path.stem), path))
            except ValueError:
                continue
    return out


async def _snapshot_databases(
    layout: DataLayout, snap: Snapshotter, staging: Path, skipped: list[str]
) -> list[DatabaseInfo]:
    reg_dest = staging / DATABASE_DIR / "system.db"
    version = await snap.registry(reg_dest)
    dbs = [
        DatabaseInfo(
            path=f"{DATABASE_DIR}/system.db", kind="registry", method="online", user_version=version
        )
    ]
    # Who is encrypted, as of the registry copy (a consistent view of the accounts).
    accounts = await asyncio.to_thread(_registry_users, reg_dest)
    for user_id, src in await asyncio.to_thread(_owner_files, layout):
        dest = staging / DATABASE_DIR / "users" / f"{user_id}.db"
        try:
            info = await snap.owner(user_id, src, dest)
        except FileNotFoundError:
            continue  # deleted meanwhile
        username, encrypted = accounts.get(user_id, (None, info.encrypted))
        if username is None:
            skipped.append(f"{info.path}: no account in the registry (kept anyway)")
        dbs.append(msgspec.structs.replace(info, username=username, encrypted=encrypted))
    return dbs


# -- writing the archive ---------------------------------------------------------------


class _HashingReader:
    """Feeds exactly `size` bytes to tarfile while hashing them; a file that shrank
    while being read is padded with zeros (and reported) rather than failing."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self.f = f
        self.left = size
        self.sha = hashlib.sha256()
        self.short = False

    def read(self, n: int = -1) -> bytes:
        want = self.left if n < 0 else min(n, self.left)
        data = self.f.read(want)
        if len(data) < want:
            self.short = True
            data += bytes(want - len(data))
        self.left -= len(data)
        self.sha.update(data)
        return data


@dataclass
class _Writer:
    tar: tarfile.TarFile
    entries: list[Entry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    files: int = 0
    # (device, inode) of files never to include: the archive being written, when the
    # operator asked for it inside a backed-up folder.
    exclude: set[tuple[int, int]] = field(default_factory=set)

    def _info(self, name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = stat.S_IMODE(st.st_mode)
        info.mtime = int(st.st_mtime)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    def add_file(
        self, path: Path, name: str, mode: int | None = None, *, follow: bool = False
    ) -> None:
        """A file Skald or the operator placed (a database copy, a config file)."""
        # O_NONBLOCK: a pipe swapped in after the lstat must not hang the backup.
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(path, flags)
        except PermissionError:
            self.skipped.append(f"{name}: not readable by the service account")
            return
        self._add_fd(fd, name, mode)

    def _add_fd(self, fd: int, name: str, mode: int | None = None) -> None:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.skipped.append(f"{name}: not a regular file")
                return
            if (st.st_dev, st.st_ino) in self.exclude:
                return
            info = self._info(name, st, tarfile.REGTYPE)
            if mode is not None:
                info.mode = mode
            info.size = st.st_size
            reader = _HashingReader(f, st.st_size)
            self.tar.addfile(info, reader)
        if reader.short:
            log.warning("file shrank while it was backed up", path=name)
            self.skipped.append(f"{name}: changed while it was read (its start was kept)")
        self.entries.append(
            Entry(
                path=name,
                type="file",
                mode=info.mode,
                size=info.size,
                sha256=reader.sha.hexdigest(),
            )
        )
        self.files += 1

    def add_dir(self, name: str, st: os.stat_result | None = None, mode: int | None = None) -> None:
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        info.mode = mode if mode is not None else (stat.S_IMODE(st.st_mode) if st else 0o700)
        info.mtime = int(st.st_mtime) if st else int(time.time())
        self.tar.addfile(info)
        self.entries.append(Entry(path=name, type="dir", mode=info.mode))

    def add_tree(self, root_fd: int, name: str) -> None:
        """The entry `name` of the open folder `root_fd` and, for a folder, everything
        under it, walked by descriptor (`skald.walk`): members control what is in
        their homes and can swap a folder for a link at any moment, so no path below
        `root_fd` is ever resolved. Links are kept as links (when they stay inside)."""
        if self._unnamable(name):
            return
        st = tree.lstat_at(root_fd, name)
        if st is None:
            return
        if not stat.S_ISDIR(st.st_mode):
            self._add_entry(root_fd, name, name, st)
            return
        try:
            fd = tree.open_dir_at(root_fd, name)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.skipped.append(f"{name}/: {exc.strerror or exc}")
            return
        try:
            self.add_dir(name, os.fstat(fd))

            def skip(rel: tuple[str, ...], child: str) -> bool:
                # Writes a killed server left half done: removed at its next start.
                return tree.is_temp_name(child) or self._unnamable("/".join((name, *rel, child)))

            def report(rel: tuple[str, ...], why: str) -> None:
                self.skipped.append(f"{name}/{'/'.join(rel)}/: {why}")

            for entry in tree.walk(fd, skip=skip, report=report):
                self._add_entry(entry.dir_fd, entry.name, f"{name}/{entry.path}", entry.stat)
        finally:
            os.close(fd)

    def _unnamable(self, arc: str) -> bool:
        try:
            arc.encode("utf-8")
        except UnicodeEncodeError:
            self.skipped.append(f"{arc!r}: file name is not valid UTF-8")
            return True
        return False

    def _add_entry(self, dir_fd: int, name: str, arc: str, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            self.add_dir(arc, st)
        elif stat.S_ISREG(st.st_mode):
            try:
                fd = tree.open_file_at(dir_fd, name, st)
            except FileNotFoundError:
                return
            except PermissionError:
                self.skipped.append(f"{arc}: not readable by the service account")
                return
            except OSError:
                self.skipped.append(f"{arc}: replaced while it was being read")
                return
            self._add_fd(fd, arc)
        elif stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:
                return  # gone or replaced meanwhile
            self._add_link(target, arc, st)
        else:
            self.skipped.append(f"{arc}: a socket, pipe or device (not backed up)")

    def _add_link(self, target: str, name: str, st: os.stat_result) -> None:
        if link_escapes(name, target):
            self.skipped.append(f"{name}: a link to {target!r}, outside the data directory")
            return
        info = self._info(name, st, tarfile.SYMTYPE)
        info.linkname = target
        self.tar.addfile(info)
        self.entries.append(Entry(path=name, type="symlink", mode=info.mode, target=target))

    def add_bytes(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o600
        info.mtime = int(time.time())
        with _BytesReader(data) as reader:
            self.tar.addfile(info, reader)


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else min(len(self.data), self.pos + n)
        chunk = bytes(self.data[self.pos : end])
        self.pos = end
        return chunk

    def __enter__(self) -> _BytesReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.data.release()


def _backed_up_names(layout: DataLayout, quick: bool) -> list[str]:
    """Top-level entries besides the databases and the config files."""
    if quick:
        return [name for name in QUICK_FOLDERS if (layout.root / name).is_dir()]
    return sorted(
        child.name
        for child in layout.root.iterdir()
        if (child.name not in QUICK_NAMES or child.name in QUICK_FOLDERS)
        and child.name not in EXCLUDED
        and not child.name.startswith(".")
    )


def _write_archive(
    layout: DataLayout,
    staging: Path,
    dbs: list[DatabaseInfo],
    skipped: list[str],
    quick: bool,
    target: Path,
) -> BackupResult:
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
                own = os.fstat(raw.fileno())
                writer = _Writer(tar, skipped=skipped, exclude={(own.st_dev, own.st_ino)})
                writer.add_dir(DATABASE_DIR, mode=0o700)
                writer.add_dir(f"{DATABASE_DIR}/users", mode=0o700)
                for db in dbs:
                    writer.add_file(staging / db.path, db.path, mode=0o600)
                    if db.wal:
                        writer.add_file(staging / f"{db.path}-wal", f"{db.path}-wal", mode=0o600)
                for name in CONFIG_FILES:
                    # Followed if they are links (an operator may keep config.toml
                    # elsewhere): the backup holds their content, restored as files.
                    if (layout.root / name).is_file():
                        writer.add_file(layout.root / name, name, mode=0o600, follow=True)
                with tree.opened(layout.root) as root_fd:
                    for name in _backed_up_names(layout, quick):
                        writer.add_tree(root_fd, name)
                manifest = Manifest(
                    format=FORMAT,
                    format_version=FORMAT_VERSION,
                    skald_version=__version__,
                    created=datetime.now(UTC).isoformat(timespec="seconds"),
                    kind="quick" if quick else "full",
                    schema={"registry": REGISTRY.head, "owner": OWNER.head},
                    databases=dbs,
                    files=writer.entries,
                    skipped=writer.skipped,
                )
                body = msgspec.json.format(msgspec.json.encode(manifest), indent=1)
                writer.add_bytes(MANIFEST_NAME, body + b"\n")
            raw.flush()
            os.fsync(raw.fileno())
        tmp.replace(target)
        fsync_dir(target.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BackupResult(
        path=str(target),
        bytes=target.stat().st_size,
        files=writer.files,
        skipped=len(writer.skipped),
    )


def _target_path(layout: DataLayout, out: Path | None) -> Path:
    stamp = utc_stamp()
    if out is not None and not out.is_dir():
        if not out.parent.is_dir():
            raise BackupError(f"{out.parent} is not a folder; nothing was written")
        if out.exists() or out.is_symlink():
            raise BackupError(f"{out} already exists; nothing was written")
        return out.absolute()
    directory = layout.backups_dir if out is None else out
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / f"skald-backup-{stamp}.tar"
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = directory / f"skald-backup-{stamp}-{n}.tar"
    return target.absolute()


def _make_staging(layout: DataLayout) -> Path:
    layout.backups_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = layout.backups_dir / f".staging-{utc_stamp()}-{secrets.token_hex(4)}"
    path.mkdir(mode=0o700)
    return path


async def create_backup(
    layout: DataLayout, snap: Snapshotter, *, quick: bool, out: Path | None
) -> BackupResult:
    """Write one archive; the slow parts run in threads and on the database threads."""
    if not layout.system_db.exists():
        raise BackupError(f"no Skald data in {layout.root} (nothing to back up)")
    started = time.monotonic()
    target = await asyncio.to_thread(_target_path, layout, out)
    staging = await asyncio.to_thread(_make_staging, layout)
    try:
        skipped: list[str] = []
        dbs = await _snapshot_databases(layout, snap, staging, skipped)
        result = await asyncio.to_thread(
            _write_archive, layout, staging, dbs, skipped, quick, target
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, True)
    log.info(
        "backup written",
        path=result.path,
        bytes=result.bytes,
        files=result.files,
        quick=quick,
        seconds=round(time.monotonic() - started, 2),
    )
    return result


async def backup_command(
    layout: DataLayout, config: Config, *, quick: bool, out: Path | None
) -> tuple[BackupResult, bool]:
    """`skald backup`: through the running server if there is one, else by itself.
    Returns the result and whether the server did the work."""
    if not await asyncio.to_thread(layout.system_db.exists):
        # Before any lock file: a mistyped --data must not leave a directory behind.
        raise BackupError(f"no Skald data in {layout.root} (nothing to back up)")
    absolute = None if out is None else await asyncio.to_thread(absolute_path, out)
    body = {"quick": quick, "out": None if absolute is None else str(absolute)}
    for _ in range(2):
        answer = await ops_request(layout, config, "POST", "/api/ops/backup", body, timeout=3600)
        if answer is not None:
            return msgspec.convert(answer, BackupResult), True
        try:
            with InstanceLock(layout, "backup"):
                snap = OfflineSnapshotter(layout, config.storage.busy_timeout_ms)
                return await create_backup(layout, snap, quick=quick, out=absolute), False
        except InstanceBusyError:
            info = holder(layout)
            if info is None or info.role != "serve":
                raise
            # A server started between the two checks: ask it instead.
    raise BackupError("the server's state kept changing; try again")
