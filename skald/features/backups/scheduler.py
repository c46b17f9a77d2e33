"""Scheduled backups and the monthly restore drill: the backups a household actually has.

Rule: the server makes a backup on a schedule (daily by default) into the folder the
administrator picked (an external disk, a mounted share; `<data>/backups` until then),
keeps what the retention rules say (the newest per day, per ISO week and per month, for
as many days/weeks/months as configured; the newest archive is always kept) and, once a
month, *restores the newest archive into a scratch folder*: every member checked against
its digest, every database opened (an encrypted one with its owner's key while the
server holds it, i.e. while they are signed in; else reported as locked, not failed)
and `PRAGMA integrity_check`ed. Settings and the last results are two small JSON files
in the data directory (`backup-schedule.json`, `backup-state.json`, 0600): the Backups
page shows them and `skald doctor` turns a failed drill or a stale backup into a finding
(`check_backups`), which the Overview checklist reads like every other check.

Trap: retention deletes only `skald-backup-<UTC stamp>[-n].tar` files in the chosen
folder, never anything else, and it runs only after a backup succeeded, so a broken
schedule never eats the archives that are there. Manual `skald backup` archives in the
same folder count as backups for retention too (documented).
Trap: the drill's scratch folder lives in `<data>/backups/.drill-*` (private, same disk
as the data, never a shared /tmp: it holds a household's databases) and is removed in
`finally`, crash or not.
Loads at first use: every server holds this module (the service, the page's state), so
it imports the archive, backup and restore code (tarfile with them) inside the
functions that make a backup or run the drill, never at its top.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from skald.config import Config
from skald.errors import InvalidInputError, SkaldError
from skald.log import get_logger
from skald.paths import DataLayout
from skald.store.snapshot import KeyChecks, integrity

if TYPE_CHECKING:
    from skald.features.backups.archive import DatabaseInfo
    from skald.features.backups.shapes import BackupResult
    from skald.plugins.facade import Server

log = get_logger("skald.backup")

SETTINGS_FILE = "backup-schedule.json"
STATE_FILE = "backup-state.json"
# A second archive written within the same second gets `-2`, then `-3` (backup.py).
ARCHIVE_NAME = re.compile(r"^skald-backup-(\d{8}T\d{6}Z)(?:-(\d+))?\.tar$")
# How often the scheduler wakes to look at the clock and the settings (they may change).
TICK_S = 30.0
# The first backup of a server that never made one: soon enough that a new household
# has one the same evening, late enough not to compete with the first sign-ins (and
# not to appear in the middle of a short test run).
FIRST_DELAY_S = 600.0
# After a failed backup, the next attempt comes at most this much later.
RETRY_S = 3600.0

__all__ = [
    "BackupScheduler",
    "BackupSettings",
    "BackupState",
    "DrillResult",
    "RunResult",
    "archives",
    "drill_and_record",
    "drill_command",
    "load_settings",
    "load_state",
    "no_keys",
    "retention_keeps",
    "save_settings",
]


class BackupSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    folder: str = ""  # "": <data>/backups
    every_hours: int = 24
    keep_daily: int = 7
    keep_weekly: int = 4
    keep_monthly: int = 6
    quick: bool = False
    drill_every_days: int = 30

    def target(self, layout: DataLayout) -> Path:
        return Path(self.folder) if self.folder else layout.backups_dir


class RunResult(msgspec.Struct, kw_only=True):
    at: str  # ISO 8601 UTC
    ok: bool
    path: str | None = None
    bytes: int = 0
    files: int = 0
    seconds: float = 0.0
    error: str | None = None
    removed: list[str] = msgspec.field(default_factory=list)  # retention


DatabaseVerdict = Literal["ok", "failed", "locked"]


class DrillDatabase(msgspec.Struct, kw_only=True):
    path: str
    username: str | None = None
    status: DatabaseVerdict
    detail: str = ""


class DrillResult(msgspec.Struct, kw_only=True):
    at: str
    ok: bool
    archive: str | None = None
    files: int = 0  # members checked against their digests
    databases: list[DrillDatabase] = msgspec.field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


class BackupState(msgspec.Struct, kw_only=True):
    last_backup: RunResult | None = None
    last_success: RunResult | None = None
    last_drill: DrillResult | None = None


# -- settings and state files ------------------------------------------------------------


def _write_private(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).chmod(0o600)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_settings(layout: DataLayout) -> BackupSettings:
    try:
        raw = (layout.root / SETTINGS_FILE).read_bytes()
    except FileNotFoundError:
        return BackupSettings()
    try:
        return msgspec.json.decode(raw, type=BackupSettings)
    except msgspec.DecodeError as exc:
        raise SkaldError(f"{layout.root / SETTINGS_FILE} is damaged ({exc})") from None


def validate(settings: BackupSettings) -> BackupSettings:
    """Refuse settings the scheduler could not honour, with a message for a person."""
    if settings.folder:
        folder = Path(settings.folder)
        if not folder.is_absolute():
            raise InvalidInputError("the backup folder must be a full path, e.g. /media/backup")
        if not folder.is_dir():
            raise InvalidInputError(f"{folder} is not a folder (is the disk connected?)")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InvalidInputError(f"Skald may not write into {folder}")
    if not 1 <= settings.every_hours <= 24 * 31:
        raise InvalidInputError("back up every 1 to 744 hours")
    for name in ("keep_daily", "keep_weekly", "keep_monthly"):
        if not 0 <= getattr(settings, name) <= 1000:
            raise InvalidInputError(f"{name} must be between 0 and 1000")
    if not 1 <= settings.drill_every_days <= 366:
        raise InvalidInputError("run the restore drill every 1 to 366 days")
    return settings


def save_settings(layout: DataLayout, settings: BackupSettings) -> BackupSettings:
    validate(settings)
    _write_private(layout.root / SETTINGS_FILE, msgspec.json.encode(settings))
    return settings


def load_state(layout: DataLayout) -> BackupState:
    try:
        return msgspec.json.decode((layout.root / STATE_FILE).read_bytes(), type=BackupState)
    except FileNotFoundError:
        return BackupState()
    except msgspec.DecodeError:
        log.warning("backup state unreadable; starting afresh", path=str(layout.root / STATE_FILE))
        return BackupState()


def save_state(layout: DataLayout, state: BackupState) -> None:
    _write_private(layout.root / STATE_FILE, msgspec.json.encode(state))


# -- archives and retention --------------------------------------------------------------


def _stamp(name: str) -> tuple[datetime, int] | None:
    """The time in an archive's name and its place within that second (1, 2, ...)."""
    m = ARCHIVE_NAME.match(name)
    if m is None:
        return None
    when = datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return when, int(m.group(2) or 1)


def archives(folder: Path) -> list[tuple[datetime, Path]]:
    """Backup archives in `folder`, newest first: by the time in their name, then by
    their number within that second (`-2` was written after the one without a number,
    which its name alone would sort after)."""
    found = []
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            stamp = _stamp(path.name)
            if stamp is not None and path.is_file() and not path.is_symlink():
                found.append((stamp, path))
    found.sort(key=lambda item: item[0], reverse=True)
    return [(when, path) for (when, _), path in found]


def retention_keeps(
    found: list[tuple[datetime, Path]], daily: int, weekly: int, monthly: int
) -> set[Path]:
    """What the rules keep: the newest archive of each of the newest `daily` days,
    `weekly` ISO weeks and `monthly` months (newest first in `found`); always the newest."""
    keep: set[Path] = set()
    if found:
        keep.add(found[0][1])
    for count, bucket in (
        (daily, lambda d: d.date().isoformat()),
        (weekly, lambda d: f"{d.isocalendar()[0]}-W{d.isocalendar()[1]:02d}"),
        (monthly, lambda d: d.strftime("%Y-%m")),
    ):
        seen: list[str] = []
        for when, path in found:
            key = bucket(when)
            if key in seen:
                continue
            if len(seen) >= count:
                break
            seen.append(key)
            keep.add(path)
    return keep


def prune(folder: Path, settings: BackupSettings) -> list[str]:
    found = archives(folder)
    keep = retention_keeps(found, settings.keep_daily, settings.keep_weekly, settings.keep_monthly)
    removed = []
    for _, path in found:
        if path not in keep:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
    return removed


# -- the restore drill -------------------------------------------------------------------


def _restore_and_check(
    archive: Path, scratch_parent: Path, keys: KeyChecks
) -> tuple[int, list[DrillDatabase]]:
    """Blocking: digests, extraction into scratch, every database opened and checked."""
    from skald.features.backups.archive import check_archive
    from skald.features.backups.restore import _extract

    checked = check_archive(archive)  # every member against its digest
    scratch_parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".drill-", dir=scratch_parent))
    try:
        _extract(checked, scratch)
        verdicts = [_check_restored(db, scratch, keys) for db in checked.manifest.databases]
        return len(checked.manifest.files), verdicts
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_restored(db: DatabaseInfo, scratch: Path, keys: KeyChecks) -> DrillDatabase:
    """Blocking: one restored database opened and checked (locked without its key)."""

    def verdict(status: DatabaseVerdict, detail: str) -> DrillDatabase:
        return DrillDatabase(path=db.path, username=db.username, status=status, detail=detail)

    path = scratch.joinpath(*db.path.split("/"))
    if not path.is_file():
        return verdict("failed", "missing after the restore")
    if db.kind == "owner" and db.encrypted:
        checked = keys.check(db.user_id or "", path)
        if checked is None:
            return verdict("locked", "encrypted; its owner is not signed in, so Skald holds no key")
    else:
        checked = integrity(path, None)
    ok, detail = checked
    return verdict("ok" if ok else "failed", detail)


async def no_keys(user_ids: list[str]) -> KeyChecks:
    """Outside the server nobody's key is held: encrypted databases are reported locked."""
    return KeyChecks(dict.fromkeys(user_ids))


async def run_drill(
    layout: DataLayout,
    folder: Path,
    keys: Callable[[list[str]], Awaitable[KeyChecks]],
) -> DrillResult:
    """Restore the newest archive of `folder` into scratch and check it (never raises)."""
    started = time.monotonic()
    at = datetime.now(UTC).isoformat(timespec="seconds")
    found = await asyncio.to_thread(archives, folder)
    if not found:
        return DrillResult(at=at, ok=False, error=f"no backup in {folder} to test")
    archive = found[0][1]
    try:
        encrypted = await asyncio.to_thread(_encrypted_users, archive)
        held = await keys(encrypted)
        files, dbs = await asyncio.to_thread(_restore_and_check, archive, layout.backups_dir, held)
    except SkaldError as exc:
        return DrillResult(
            at=at,
            ok=False,
            archive=str(archive),
            error=str(exc),
            seconds=round(time.monotonic() - started, 2),
        )
    except Exception as exc:  # a drill reports; it never takes the server down
        log.error("restore drill crashed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
        return DrillResult(
            at=at,
            ok=False,
            archive=str(archive),
            error=f"{type(exc).__name__}: {exc}",
            seconds=round(time.monotonic() - started, 2),
        )
    failed = [d for d in dbs if d.status == "failed"]
    result = DrillResult(
        at=at,
        ok=not failed,
        archive=str(archive),
        files=files,
        databases=dbs,
        seconds=round(time.monotonic() - started, 2),
        error=None if not failed else f"{len(failed)} database(s) did not pass",
    )
    log.info(
        "restore drill",
        ok=result.ok,
        archive=str(archive),
        databases=len(dbs),
        failed=len(failed),
        seconds=result.seconds,
    )
    return result


async def drill_and_record(
    layout: DataLayout, keys: Callable[[list[str]], Awaitable[KeyChecks]]
) -> DrillResult:
    """Run the drill on the schedule's folder and keep the result for the page and doctor."""
    settings = await asyncio.to_thread(load_settings, layout)
    result = await run_drill(layout, settings.target(layout), keys)
    state = await asyncio.to_thread(load_state, layout)
    state.last_drill = result
    await asyncio.to_thread(save_state, layout, state)
    return result


def _encrypted_users(archive: Path) -> list[str]:
    import tarfile

    from skald.features.backups.archive import MANIFEST_NAME, Manifest

    with tarfile.open(archive, mode="r:") as tar:
        member = tar.getmember(MANIFEST_NAME)
        f = tar.extractfile(member)
        if f is None:
            return []
        manifest = msgspec.json.decode(f.read(), type=Manifest)
    return [d.user_id for d in manifest.databases if d.encrypted and d.user_id]


# -- the scheduler (a service of the server) ------------------------------------------------


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at)


class BackupScheduler:
    """Backups on schedule, retention after each, and the monthly drill.

    One per server (its state slot: `server.state(BackupScheduler)`); `backup_now`/`drill_now` are what the Backups page's
    buttons call. A lock keeps a scheduled run and a button from overlapping.
    """

    def __init__(self, server: Server, *, first_delay_s: float = FIRST_DELAY_S) -> None:
        self.server = server
        self.layout = server.layout
        self.first_delay_s = first_delay_s
        self._lock = asyncio.Lock()
        # `skald backup` through the ops channel: one at a time (each already uses every
        # database thread); apart from `_lock`, as before.
        self._ops_lock = asyncio.Lock()
        self._started = time.monotonic()

    async def backup_now(self) -> RunResult:
        from skald.features.backups.backup import ServerSnapshotter, create_backup

        async with self._lock:
            settings = await asyncio.to_thread(load_settings, self.layout)
            folder = settings.target(self.layout)
            started = time.monotonic()
            at = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                result = await create_backup(
                    self.layout, ServerSnapshotter(self.server), quick=settings.quick, out=folder
                )
                removed = await asyncio.to_thread(prune, folder, settings)
                run = RunResult(
                    at=at,
                    ok=True,
                    path=result.path,
                    bytes=result.bytes,
                    files=result.files,
                    removed=removed,
                    seconds=round(time.monotonic() - started, 2),
                )
            except (SkaldError, OSError) as exc:
                run = RunResult(
                    at=at, ok=False, error=str(exc), seconds=round(time.monotonic() - started, 2)
                )
                log.warning("scheduled backup failed", error=str(exc), folder=str(folder))
            state = await asyncio.to_thread(load_state, self.layout)
            state.last_backup = run
            if run.ok:
                state.last_success = run
            await asyncio.to_thread(save_state, self.layout, state)
            return run

    async def backup_to(self, *, quick: bool, out: Path | None) -> BackupResult:
        """`skald backup` while the server runs (the ops channel): one archive in `out`
        (the default folder when None), with the running server's snapshots, one such
        backup at a time; no retention, no record in the Backups page's state.

        Trap: it waits for another operator's backup, not for a scheduled run or the
        page's button (their lock is another): the two may run side by side."""
        from skald.features.backups.backup import ServerSnapshotter, create_backup

        async with self._ops_lock:
            return await create_backup(
                self.layout, ServerSnapshotter(self.server), quick=quick, out=out
            )

    async def drill_now(self) -> DrillResult:
        async with self._lock:
            return await drill_and_record(self.layout, self.server.key_checks)

    def _due(
        self, settings: BackupSettings, state: BackupState, now: datetime
    ) -> tuple[bool, bool]:
        """(a backup is due, a drill is due)."""
        if not settings.enabled:
            return False, False
        last = state.last_backup
        if last is None:
            backup = time.monotonic() - self._started >= self.first_delay_s
        else:
            wait = (
                settings.every_hours * 3600.0
                if last.ok
                else min(RETRY_S, settings.every_hours * 3600.0)
            )
            backup = now - _parse(last.at) >= timedelta(seconds=wait)
        drill = False
        if state.last_success is not None:
            if state.last_drill is None:
                drill = True
            else:
                drill = now - _parse(state.last_drill.at) >= timedelta(
                    days=settings.drill_every_days
                )
        return backup, drill

    async def run_forever(self) -> None:
        while True:
            try:
                settings = await asyncio.to_thread(load_settings, self.layout)
            except SkaldError as exc:
                log.warning("backup schedule unreadable", error=str(exc))
                await asyncio.sleep(TICK_S)
                continue
            state = await asyncio.to_thread(load_state, self.layout)
            backup, drill = self._due(settings, state, datetime.now(UTC))
            if backup:
                await self.backup_now()
            elif drill:
                await self.drill_now()
            else:
                await asyncio.sleep(TICK_S)


async def drill_command(layout: DataLayout, config: Config) -> DrillResult:
    """`skald backup --drill`: through the running server when there is one (it holds
    the keys of signed-in members), else here, where encrypted databases stay locked."""
    from skald.ops.channel import InstanceBusyError, InstanceLock, ops_request

    answer = await ops_request(layout, config, "POST", "/api/ops/drill", {}, timeout=3600)
    if answer is not None:
        return msgspec.convert(answer, DrillResult)
    try:
        with InstanceLock(layout, "backup"):
            return await drill_and_record(layout, no_keys)
    except InstanceBusyError:
        answer = await ops_request(layout, config, "POST", "/api/ops/drill", {}, timeout=3600)
        if answer is None:
            raise
        return msgspec.convert(answer, DrillResult)
