"""`skald restore`: put an archive's state back into a stopped instance.

A restore verifies every member against the manifest before it writes anything
(`skald.features.backups.archive.check_archive`), extracts into a staging folder inside the data
directory, then swaps: whatever it replaces is moved to `backups/replaced-<stamp>/`,
never deleted. Everything slow runs in threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import apsw

from skald.errors import StorageError
from skald.features.backups.archive import (
    CHUNK,
    DATABASE_DIR,
    EXCLUDED,
    MANIFEST_NAME,
    QUICK_NAMES,
    BackupError,
    CheckedArchive,
    EntryType,
    Manifest,
    absolute_path,
    check_archive,
    fsync_dir,
    member_type,
    unusable_archive,
    utc_stamp,
)
from skald.log import get_logger
from skald.ops.channel import InstanceLock, holder, is_serving
from skald.paths import DataLayout
from skald.store.registry import new_instance_id
from skald.store.snapshot import forget_sessions, read_instance_id, write_instance_id

# One logger for backups and restores.
log = get_logger("skald.backup")


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
            kind = member_type(member)
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
                    raise unusable_archive(
                        checked.path, f"{name} changed while it was being restored"
                    )
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
    fsync_dir(layout.root)


def _keep_instance_id(layout: DataLayout, restored: Path) -> None:
    """The restored registry gets the instance id of the directory it lands in: the one
    that lived there, or a fresh one. Never the archive's as such: the instance it came
    from may be running next door, and its sandboxes are found by that id (a restore
    stops this instance's, and a sweep removes what is labelled with this instance's
    id but unknown to it)."""
    current = read_instance_id(layout.system_db) if layout.system_db.exists() else None
    write_instance_id(restored, current or new_instance_id())


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
            _keep_instance_id(layout, staging / DATABASE_DIR / "system.db")
        except apsw.Error as exc:
            raise unusable_archive(checked.path, f"its registry does not open ({exc})") from None
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
    archive = await asyncio.to_thread(absolute_path, archive)
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
