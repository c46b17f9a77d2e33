"""`skald backup` and `skald restore`: one tar archive holds a consistent instance.

Archive layout (an uncompressed POSIX tar; databases do not compress after encryption):

    database/system.db            the registry, copied with SQLite's online backup API
    database/users/<id>.db        every owner database (still encrypted: see below)
    database/users/<id>.db-wal    only for a locked database a crash left with a WAL
    instance.key  config.toml  providers.json     when present
    homes/ ...  and every other folder of the data directory (full backups only)
    backup.json                   the manifest, last: format, versions, every entry's
                                  type, mode, size and SHA-256

Databases:
- open ones (the registry; an owner database while its member is unlocked in the
  server) are copied by `skald.store.snapshot` on their own thread, the copy keyed
  with the same raw key, so encrypted data stays encrypted;
- a locked owner database is quiescent (nothing can open it without the member's
  key, and `UserManager.held` keeps it from being unlocked during the copy), so its
  bytes are copied as they are. A `-wal` left by a crash goes into the archive with
  it: it cannot be checkpointed without the key, and SQLite replays it at the next
  unlock. The `-shm` index is not copied; SQLite rebuilds it.

Everything slow (copies, hashing, tar) runs in threads, never on the event loop.
A restore verifies every member against the manifest before it writes anything,
extracts into a staging folder inside the data directory, then swaps: whatever it
replaces is moved to `backups/replaced-<stamp>/`, never deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import posixpath
import secrets
import shutil
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal, Protocol

import apsw
import msgspec

from skald import __version__
from skald.config import Config
from skald.errors import SkaldError, StorageError
from skald.log import get_logger
from skald.ops.channel import InstanceBusyError, InstanceLock, holder, is_serving, ops_request
from skald.paths import DataLayout, validate_user_id
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY
from skald.store.snapshot import (
    forget_sessions,
    header_user_version,
    read_instance_id,
    snapshot,
)

if TYPE_CHECKING:
    from skald.core.runtime import Runtime

log = get_logger("skald.backup")

FORMAT = "skald-backup"
FORMAT_VERSION = 1
MANIFEST_NAME = "backup.json"
DATABASE_DIR = "database"
# Always in the archive (when present); everything else only in full backups.
CONFIG_FILES = ("instance.key", "config.toml", "providers.json")
QUICK_NAMES = frozenset({DATABASE_DIR, *CONFIG_FILES})
# Never backed up, never restored over: runtime state, caches and the backups themselves.
EXCLUDED = frozenset({"backups", "cache", ".serve.lock", "ops.token", "setup-token"})
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
CHUNK = 1024 * 1024

EntryType = Literal["file", "dir", "symlink"]


class BackupError(SkaldError):
    code = "backup_failed"


class Entry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    path: str
    type: EntryType
    mode: int
    size: int = 0
    sha256: str | None = None
    target: str | None = None  # symlinks


class DatabaseInfo(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    kind: Literal["registry", "owner"]
    user_id: str | None = None
    username: str | None = None
    encrypted: bool = False
    method: Literal["online", "copy"] = "online"
    user_version: int | None = None  # None: not readable without the member's key
    wal: bool = False


class Manifest(msgspec.Struct, kw_only=True):
    format: str
    format_version: int
    skald_version: str
    created: str
    kind: Literal["full", "quick"]
    schema: dict[str, int]
    databases: list[DatabaseInfo]
    files: list[Entry]
    skipped: list[str] = msgspec.field(default_factory=list)


class BackupResult(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    bytes: int
    files: int
    skipped: int = 0  # entries left out (listed in the manifest)


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


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
    """Inside the running server: open databases are copied on their own threads."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def registry(self, dest: Path) -> int:
        return await self.runtime.core.registry.db.call(lambda c: snapshot(c, dest, None))

    async def owner(self, user_id: str, src: Path, dest: Path) -> DatabaseInfo:
        users = self.runtime.core.users
        async with users.held(user_id) as held:
            if held is None:
                return await asyncio.to_thread(
                    _copy_quiescent, src, dest, _owner_arcname(user_id), user_id
                )
            db, key = held
            version = await db.call(lambda c: snapshot(c, dest, key))
        return DatabaseInfo(
            path=_owner_arcname(user_id),
            kind="owner",
            user_id=user_id,
            encrypted=key is not None,
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


def _link_escapes(name: str, target: str) -> bool:
    if not target or target.startswith("/") or "\x00" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    return resolved == ".." or resolved.startswith("../") or resolved.startswith("/")


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
        # O_NONBLOCK: a pipe swapped in after the lstat must not hang the backup.
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(path, flags)
        except PermissionError:
            self.skipped.append(f"{name}: not readable by the service account")
            return
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

    def add_tree(self, path: Path, name: str) -> None:
        """`path` and (for a folder) everything under it; links are kept as links."""
        stack = [(path, name)]
        while stack:
            current, arc = stack.pop()
            try:
                arc.encode("utf-8")
            except UnicodeEncodeError:
                self.skipped.append(f"{arc!r}: file name is not valid UTF-8")
                continue
            try:
                st = current.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                try:
                    children = sorted(os.scandir(current), key=lambda e: e.name, reverse=True)
                except PermissionError:
                    self.skipped.append(f"{arc}/: not readable by the service account")
                    continue
                self.add_dir(arc, st)
                stack.extend((Path(c.path), f"{arc}/{c.name}") for c in children)
            elif stat.S_ISREG(st.st_mode):
                self.add_file(current, arc)
            elif stat.S_ISLNK(st.st_mode):
                self._add_link(current, arc, st)
            else:
                self.skipped.append(f"{arc}: a socket, pipe or device (not backed up)")

    def _add_link(self, path: Path, name: str, st: os.stat_result) -> None:
        target = str(path.readlink())
        if _link_escapes(name, target):
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
    names: list[str] = []
    if not quick:
        names += sorted(
            child.name
            for child in layout.root.iterdir()
            if child.name not in QUICK_NAMES
            and child.name not in EXCLUDED
            and not child.name.startswith(".")
        )
    return names


def _absolute(path: Path) -> Path:
    return path.expanduser().absolute()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
                for name in _backed_up_names(layout, quick):
                    writer.add_tree(layout.root / name, name)
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
        _fsync_dir(target.parent)
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
    absolute = None if out is None else await asyncio.to_thread(_absolute, out)
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


# -- reading and checking an archive ---------------------------------------------------


@dataclass
class CheckedArchive:
    path: Path
    manifest: Manifest
    top_level: list[str]


def _bad(path: Path, why: str) -> BackupError:
    return BackupError(f"{path} is not a usable Skald backup: {why}; nothing was changed")


def _safe_name(name: str) -> bool:
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def _read_manifest(tar: tarfile.TarFile, path: Path) -> Manifest:
    members = [m for m in tar.getmembers() if m.name == MANIFEST_NAME]
    if len(members) != 1 or not members[0].isreg():
        raise _bad(path, f"it has no single {MANIFEST_NAME}")
    if members[0].size > MAX_MANIFEST_BYTES:
        raise _bad(path, f"its {MANIFEST_NAME} is implausibly large")
    f = tar.extractfile(members[0])
    assert f is not None
    try:
        manifest = msgspec.json.decode(f.read(), type=Manifest)
    except msgspec.DecodeError as exc:
        raise _bad(path, f"its {MANIFEST_NAME} is unreadable ({exc})") from None
    if manifest.format != FORMAT:
        raise _bad(path, f"unknown format {manifest.format!r}")
    if manifest.format_version > FORMAT_VERSION:
        raise _bad(path, f"format version {manifest.format_version} is newer than this Skald reads")
    return manifest


def _check_versions(path: Path, manifest: Manifest) -> None:
    heads = {"registry": REGISTRY.head, "owner": OWNER.head}
    for kind, head in heads.items():
        made = manifest.schema.get(kind, 0)
        if made > head:
            raise BackupError(
                f"{path} was made by a newer Skald ({manifest.skald_version}, {kind} schema "
                f"{made} > {head}): install that version first; nothing was changed"
            )
    for db in manifest.databases:
        if db.user_version is not None and db.user_version > heads[db.kind]:
            raise BackupError(
                f"{path}: {db.path} has schema {db.user_version}, newer than this Skald "
                f"({heads[db.kind]}); install a newer Skald first; nothing was changed"
            )


def _member_type(member: tarfile.TarInfo) -> EntryType | None:
    if member.isreg():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    return None


def check_archive(path: Path) -> CheckedArchive:
    """Read the whole archive and compare it with its manifest (blocking: run in a
    thread). Raises BackupError on anything unexpected; writes nothing."""
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    try:
        with tarfile.open(path, mode="r:") as tar:
            manifest = _read_manifest(tar, path)
            _check_versions(path, manifest)
            expected = {e.path: e for e in manifest.files}
            if len(expected) != len(manifest.files):
                raise _bad(path, "its manifest lists a path twice")
            seen: set[str] = set()
            for member in tar:
                name = member.name
                if name == MANIFEST_NAME:
                    continue
                _check_member(path, member, expected.get(name), seen)
                if member.isreg():
                    entry = expected[name]
                    f = tar.extractfile(member)
                    assert f is not None
                    sha = hashlib.sha256()
                    while chunk := f.read(CHUNK):
                        sha.update(chunk)
                    if sha.hexdigest() != entry.sha256:
                        raise _bad(path, f"{name} does not match its checksum")
            missing = sorted(set(expected) - seen)
            if missing:
                raise _bad(path, f"{missing[0]} is listed but missing")
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, PermissionError):
            raise BackupError(f"{path}: permission denied") from None
        raise _bad(path, f"it is damaged or not a tar archive ({exc})") from None
    tops = sorted({name.split("/", 1)[0] for name in seen})
    if DATABASE_DIR not in tops or not any(d.kind == "registry" for d in manifest.databases):
        raise _bad(path, "it holds no registry database")
    return CheckedArchive(path=path, manifest=manifest, top_level=tops)


def _check_member(path: Path, member: tarfile.TarInfo, entry: Entry | None, seen: set[str]) -> None:
    name = member.name
    if not _safe_name(name):
        raise _bad(path, f"unsafe member name {name!r}")
    top = name.split("/", 1)[0]
    if top in EXCLUDED or top.startswith("."):
        raise _bad(path, f"{name!r} would land where Skald keeps runtime state")
    if name in seen:
        raise _bad(path, f"{name} appears twice")
    seen.add(name)
    kind = _member_type(member)
    if kind is None:
        raise _bad(path, f"{name} is a hard link, device or other special file")
    if kind == "symlink" and _link_escapes(name, member.linkname):
        raise _bad(path, f"{name} is a link pointing outside the data directory")
    if entry is None:
        raise _bad(path, f"{name} is not in the manifest")
    if entry.type != kind:
        raise _bad(path, f"{name} is a {kind} but the manifest says {entry.type}")
    if kind == "file" and member.size != entry.size:
        raise _bad(path, f"{name} has the wrong size")
    if kind == "symlink" and member.linkname != entry.target:
        raise _bad(path, f"{name} points somewhere else than the manifest says")


# -- restoring -------------------------------------------------------------------------


def _mode_for(name: str, kind: EntryType, mode: int) -> int:
    top_level = "/" not in name
    if name == DATABASE_DIR or name.startswith(f"{DATABASE_DIR}/"):
        return 0o700 if kind == "dir" else 0o600
    if top_level:
        return 0o700 if kind == "dir" else 0o600
    mode &= 0o777
    # Folders stay writable by the service account, so later restores can move them.
    return mode | 0o700 if kind == "dir" else mode


def _extract(checked: CheckedArchive, staging: Path) -> None:
    """Write every member under `staging` (fresh, private); links last, so no file is
    ever written through one. Hashes again: the archive may change under us."""
    expected = {e.path: e for e in checked.manifest.files}
    links: list[tuple[Path, str]] = []
    dirs: list[tuple[Path, int, int]] = []
    with tarfile.open(checked.path, mode="r:") as tar:
        for member in tar:
            name = member.name
            if name == MANIFEST_NAME:
                continue
            entry = expected[name]
            dest = staging.joinpath(*name.split("/"))
            kind = _member_type(member)
            if kind == "dir":
                dest.mkdir(mode=0o700, parents=True, exist_ok=True)
                dirs.append((dest, _mode_for(name, "dir", member.mode), int(member.mtime)))
            elif kind == "symlink":
                links.append((dest, member.linkname))
            else:
                dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(dest, flags, 0o600)
                sha = hashlib.sha256()
                with os.fdopen(fd, "wb") as out:
                    while chunk := src.read(CHUNK):
                        sha.update(chunk)
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                if sha.hexdigest() != entry.sha256:
                    raise _bad(checked.path, f"{name} changed while it was being restored")
                dest.chmod(_mode_for(name, "file", member.mode))
                os.utime(dest, (member.mtime, member.mtime), follow_symlinks=False)
    for dest, target in links:
        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        dest.symlink_to(target)
    # Deepest first, so setting a folder's time is not undone by writing its children.
    for dest, mode, mtime in sorted(dirs, key=lambda d: len(d[0].parts), reverse=True):
        dest.chmod(mode)
        os.utime(dest, (mtime, mtime), follow_symlinks=False)


@dataclass
class RestorePlan:
    replace: list[str]  # top-level names moved away (present now)
    install: list[str]  # top-level names from the archive


def plan_restore(layout: DataLayout, checked: CheckedArchive) -> RestorePlan:
    """What a restore moves away: the backed-up part of the data directory, all of it,
    so nothing newer is left mixed with the restored state."""
    quick = checked.manifest.kind == "quick"
    current = []
    if layout.root.is_dir():
        current = sorted(
            child.name
            for child in layout.root.iterdir()
            if child.name not in EXCLUDED and not child.name.startswith(".")
        )
    replace = [n for n in current if n in checked.top_level or n in QUICK_NAMES or not quick]
    return RestorePlan(replace=replace, install=checked.top_level)


def _swap(layout: DataLayout, staging: Path, plan: RestorePlan, replaced: Path) -> None:
    moved: list[str] = []
    installed: list[str] = []
    try:
        if plan.replace:
            replaced.mkdir(mode=0o700, parents=True)
        for name in plan.replace:
            (layout.root / name).rename(replaced / name)
            moved.append(name)
        for name in plan.install:
            (staging / name).rename(layout.root / name)
            installed.append(name)
    except OSError:
        # Put back what we can; the operator gets the error and both copies survive.
        for name in installed:
            with contextlib.suppress(OSError):
                (layout.root / name).rename(staging / name)
        for name in moved:
            with contextlib.suppress(OSError):
                (replaced / name).rename(layout.root / name)
        raise
    _fsync_dir(layout.root)


@dataclass
class RestoreResult:
    archive: Path
    manifest: Manifest
    replaced: Path | None
    files: int
    sandboxes_stopped: int = 0
    sandbox_warning: str | None = None


def _restore_locked(
    layout: DataLayout, checked: CheckedArchive, plan: RestorePlan
) -> RestoreResult:
    stamp = utc_stamp()
    staging = layout.root / f".restore-{stamp}-{secrets.token_hex(4)}"
    staging.mkdir(mode=0o700)
    try:
        _extract(checked, staging)
        try:
            forget_sessions(staging / DATABASE_DIR / "system.db")
        except apsw.Error as exc:
            raise _bad(checked.path, f"its registry does not open ({exc})") from None
        replaced = layout.backups_dir / f"replaced-{stamp}"
        n = 1
        while replaced.exists():
            n += 1
            replaced = layout.backups_dir / f"replaced-{stamp}-{n}"
        layout.backups_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _swap(layout, staging, plan, replaced)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    layout.ensure()
    files = sum(1 for e in checked.manifest.files if e.type == "file")
    return RestoreResult(
        archive=checked.path,
        manifest=checked.manifest,
        replaced=replaced if plan.replace else None,
        files=files,
    )


def describe(checked: CheckedArchive) -> str:
    m = checked.manifest
    owners = sum(1 for d in m.databases if d.kind == "owner")
    files = sum(1 for e in m.files if e.type == "file")
    size = sum(e.size for e in m.files)
    return (
        f"{m.kind} backup made {m.created} by Skald {m.skald_version}: "
        f"{owners} member database(s), {files} files, {size / 1e6:.1f} MB"
    )


def stop_sandboxes(docker_host: str, instance_ids: set[str]) -> int:
    """Stop the running sandbox containers of these instances (blocking); returns how
    many. A running container keeps its bind mount on the *old* home folder, now under
    `backups/replaced-*`; stopped, it mounts the restored one when the server starts it."""
    from skald.sandbox.client import connect
    from skald.sandbox.manager import LABEL_INSTANCE, STOP_GRACE_S

    client = connect(docker_host, timeout_s=15)
    try:
        stopped = 0
        for instance_id in sorted(instance_ids):
            label = f"{LABEL_INSTANCE}={instance_id}"
            for container in client.containers.list(filters={"label": label}):
                container.stop(timeout=STOP_GRACE_S)
                stopped += 1
        return stopped
    finally:
        client.close()


def _stop_sandboxes_after(
    layout: DataLayout, result: RestoreResult, plan: RestorePlan, docker_host: str | None
) -> RestoreResult:
    if docker_host is None or "homes" not in {*plan.replace, *plan.install}:
        return result
    registries = [layout.system_db]
    if result.replaced is not None:
        registries.append(result.replaced / DATABASE_DIR / "system.db")
    ids = {i for i in map(read_instance_id, registries) if i is not None}
    if not ids:
        return result
    try:
        result.sandboxes_stopped = stop_sandboxes(docker_host, ids)
    except Exception as exc:
        log.warning("sandboxes not stopped after restore", error=str(exc)[:300])
        result.sandbox_warning = (
            f"could not stop the sandboxes ({exc}): restart them before starting Skald "
            "(docker restart $(docker ps -q --filter label=skald.instance)), or they keep "
            "using the replaced home folders"
        )
    return result


async def restore_command(
    layout: DataLayout,
    archive: Path,
    confirm: Callable[[CheckedArchive, RestorePlan], bool],
    docker_host: str | None = None,
) -> RestoreResult | None:
    """`skald restore`: only into a stopped instance; None if the operator declined.

    `docker_host` (None: the sandbox is disabled) is where this instance's sandboxes
    run; when home folders were replaced they are stopped, see `stop_sandboxes`."""
    if is_serving(layout):
        info = holder(layout)
        if info is not None and info.role != "serve":
            raise BackupError(
                f"a `skald {info.role}` (pid {info.pid}) is using {layout.root}; try again "
                "when it has finished; nothing was changed"
            )
        raise BackupError(
            f"a Skald server is serving {layout.root}: stop it first "
            "(systemctl --user stop skald); nothing was changed"
        )
    archive = await asyncio.to_thread(_absolute, archive)
    checked = await asyncio.to_thread(check_archive, archive)
    with InstanceLock(layout, "restore"):
        plan = await asyncio.to_thread(plan_restore, layout, checked)
        if not confirm(checked, plan):
            return None
        try:
            result = await asyncio.to_thread(_restore_locked, layout, checked, plan)
        except OSError as exc:
            raise StorageError(f"the restore failed: {exc}") from None
        return await asyncio.to_thread(_stop_sandboxes_after, layout, result, plan, docker_host)
