"""The backup archive's format, and reading and checking an archive.

An archive is an uncompressed POSIX tar (databases do not compress after encryption):

    database/system.db            the registry, copied with SQLite's online backup API
    database/users/<id>.db        every owner database (still encrypted: see `skald.features.backups.backup`)
    database/users/<id>.db-wal    only for a locked database a crash left with a WAL
    instance.key  config.toml  providers.json  vapid.pem     when present
    homes/ ...  and every other folder of the data directory (full backups only)
    backup.json                   the manifest, last: format, versions, every entry's
                                  type, mode, size and SHA-256

`check_archive` reads every member and compares it with the manifest before a restore
writes anything. Writing an archive is `skald.features.backups.backup`; restoring one,
`skald.features.backups.restore`.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import msgspec

from skald.errors import SkaldError
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY

FORMAT = "skald-backup"
FORMAT_VERSION = 1
MANIFEST_NAME = "backup.json"
DATABASE_DIR = "database"
# Always in the archive (when present); everything else only in full backups.
# vapid.pem: browsers' push subscriptions are bound to its public key.
CONFIG_FILES = ("instance.key", "config.toml", "providers.json", "vapid.pem")
# Folders a quick backup holds too: the operator's own agents (issue 31), small.
QUICK_FOLDERS = ("agents",)
QUICK_NAMES = frozenset({DATABASE_DIR, *CONFIG_FILES, *QUICK_FOLDERS})
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


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


# -- file helpers (also used by writing and restoring) ---------------------------------


def link_escapes(name: str, target: str) -> bool:
    if not target or target.startswith("/") or "\x00" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    return resolved == ".." or resolved.startswith("../") or resolved.startswith("/")


def absolute_path(path: Path) -> Path:
    return path.expanduser().absolute()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading and checking an archive ---------------------------------------------------


@dataclass
class CheckedArchive:
    path: Path
    manifest: Manifest
    top_level: list[str]


def unusable_archive(path: Path, why: str) -> BackupError:
    return BackupError(f"{path} is not a usable Skald backup: {why}; nothing was changed")


def _safe_name(name: str) -> bool:
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def _read_manifest(tar: tarfile.TarFile, path: Path) -> Manifest:
    members = [m for m in tar.getmembers() if m.name == MANIFEST_NAME]
    if len(members) != 1 or not members[0].isreg():
        raise unusable_archive(path, f"it has no single {MANIFEST_NAME}")
    if members[0].size > MAX_MANIFEST_BYTES:
        raise unusable_archive(path, f"its {MANIFEST_NAME} is implausibly large")
    f = tar.extractfile(members[0])
    assert f is not None
    try:
        manifest = msgspec.json.decode(f.read(), type=Manifest)
    except msgspec.DecodeError as exc:
        raise unusable_archive(path, f"its {MANIFEST_NAME} is unreadable ({exc})") from None
    if manifest.format != FORMAT:
        raise unusable_archive(path, f"unknown format {manifest.format!r}")
    if manifest.format_version > FORMAT_VERSION:
        raise unusable_archive(
            path, f"format version {manifest.format_version} is newer than this Skald reads"
        )
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


def read_manifest(path: Path) -> Manifest:
    """The manifest alone, version-checked, without hashing the members (blocking):
    what the Backups page shows before a restore; `check_archive` checks the rest."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            manifest = _read_manifest(tar, path)
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise unusable_archive(path, f"it is damaged or not a tar archive ({exc})") from None
    _check_versions(path, manifest)
    return manifest


def member_type(member: tarfile.TarInfo) -> EntryType | None:
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
                raise unusable_archive(path, "its manifest lists a path twice")
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
                        raise unusable_archive(path, f"{name} does not match its checksum")
            missing = sorted(set(expected) - seen)
            if missing:
                raise unusable_archive(path, f"{missing[0]} is listed but missing")
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, PermissionError):
            raise BackupError(f"{path}: permission denied") from None
        raise unusable_archive(path, f"it is damaged or not a tar archive ({exc})") from None
    tops = sorted({name.split("/", 1)[0] for name in seen})
    if DATABASE_DIR not in tops or not any(d.kind == "registry" for d in manifest.databases):
        raise unusable_archive(path, "it holds no registry database")
    return CheckedArchive(path=path, manifest=manifest, top_level=tops)


def _check_member(path: Path, member: tarfile.TarInfo, entry: Entry | None, seen: set[str]) -> None:
    name = member.name
    if not _safe_name(name):
        raise unusable_archive(path, f"unsafe member name {name!r}")
    top = name.split("/", 1)[0]
    if top in EXCLUDED or top.startswith("."):
        raise unusable_archive(path, f"{name!r} would land where Skald keeps runtime state")
    if name in seen:
        raise unusable_archive(path, f"{name} appears twice")
    seen.add(name)
    kind = member_type(member)
    if kind is None:
        raise unusable_archive(path, f"{name} is a hard link, device or other special file")
    if kind == "symlink" and link_escapes(name, member.linkname):
        raise unusable_archive(path, f"{name} is a link pointing outside the data directory")
    if entry is None:
        raise unusable_archive(path, f"{name} is not in the manifest")
    if entry.type != kind:
        raise unusable_archive(path, f"{name} is a {kind} but the manifest says {entry.type}")
    if kind == "file" and member.size != entry.size:
        raise unusable_archive(path, f"{name} has the wrong size")
    if kind == "symlink" and member.linkname != entry.target:
        raise unusable_archive(path, f"{name} points somewhere else than the manifest says")
