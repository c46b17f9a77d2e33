"""Restarting the server into a backup, asked for on the Backups page.

The rule: a restore only ever runs on a stopped instance. The page does not restore;
it leaves a request (`.restore-request` in the data directory, beside the lock) and
asks the server to stop. `skald serve`, still holding the instance lock once its web
server has stopped, takes the request, restores (`restore_held`), records the outcome
(`.restore-result`, shown on the page) and starts again by executing itself anew, so a
restored config.toml is read too. The process id stays the same (exec): systemd, or
whoever started it, sees no stop. Both files start with a dot, so backups and restores
leave them alone.

The trap: the request is removed *before* the restore starts, so an archive that
breaks the restore cannot make the server restore it again at every start; a failed
restore still restarts, on the data it had (the swap puts back what it moved).

Every `skald serve` imports this module for the check at its stop, so it imports the
restore (`restore.py`: tarfile, the archive code) only once a request is found.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import msgspec

from skald.errors import SkaldError
from skald.features.backups.scheduler import _write_private
from skald.log import get_logger
from skald.paths import DataLayout

log = get_logger("skald.backup")

REQUEST_FILE = ".restore-request"
RESULT_FILE = ".restore-result"
# What `skald serve` returns when it should start again (EX_TEMPFAIL: a service manager
# that saw it would restart the server anyway).
RESTART = 75


class RestoreRequest(msgspec.Struct, kw_only=True):
    archive: str  # absolute path, checked when the request was made and again at restore
    by: str  # the administrator's username
    at: str


class RestoreOutcome(msgspec.Struct, kw_only=True):
    at: str
    ok: bool
    archive: str  # the archive's file name
    by: str
    created: str | None = None  # when the restored backup was made
    replaced: str | None = None  # where what it replaced is kept
    error: str | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_request(layout: DataLayout, archive: Path, by: str) -> None:
    """Blocking. The server restores `archive` the next time it stops."""
    request = RestoreRequest(archive=str(archive), by=by, at=_now())
    _write_private(layout.root / REQUEST_FILE, msgspec.json.encode(request))


def take_request(layout: DataLayout) -> RestoreRequest | None:
    """Blocking. The pending request, removed; None when there is none or it is
    unreadable (logged: a request nobody can read is not acted on)."""
    path = layout.root / REQUEST_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    path.unlink()
    try:
        return msgspec.json.decode(raw, type=RestoreRequest)
    except msgspec.DecodeError:
        log.warning("restore request unreadable; not restoring", path=str(path))
        return None


def load_outcome(layout: DataLayout) -> RestoreOutcome | None:
    try:
        return msgspec.json.decode((layout.root / RESULT_FILE).read_bytes(), type=RestoreOutcome)
    except (FileNotFoundError, msgspec.DecodeError):
        return None


async def restore_on_request(layout: DataLayout, docker_host: str | None) -> RestoreOutcome | None:
    """After the web server stopped, with the instance lock still held: restore what
    was asked for, if anything. Never raises for a failed restore: it is recorded."""
    request = await asyncio.to_thread(take_request, layout)
    if request is None:
        return None
    from skald.features.backups.restore import restore_held

    archive = Path(request.archive)
    log.info("restoring on request", archive=archive.name, by=request.by)
    outcome = RestoreOutcome(at=_now(), ok=False, archive=archive.name, by=request.by)
    try:
        result = await restore_held(layout, archive, docker_host)
    except SkaldError as exc:
        outcome.error = str(exc)
    except Exception as exc:  # recorded and logged; the server starts again either way
        log.exception("restore on request failed")
        outcome.error = f"unexpected error: {type(exc).__name__}"
    else:
        outcome.ok = True
        outcome.at = _now()
        outcome.created = result.manifest.created
        outcome.replaced = str(result.replaced) if result.replaced else None
        if result.sandbox_warning:
            log.warning("after the restore", warning=result.sandbox_warning)
    if outcome.error:
        log.error("restore on request failed", error=outcome.error[:300])
    await asyncio.to_thread(_write_private, layout.root / RESULT_FILE, msgspec.json.encode(outcome))
    return outcome


def exec_again() -> NoReturn:
    """Replace this process with a fresh `skald` of the same arguments and environment.

    The interpreter's own command line (`sys.orig_argv`), not `python -m skald`: an
    installed Skald runs as `python skald.pyz serve`, whose packages only that zipapp's
    bootstrap puts on the path."""
    argv = [sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)  # noqa: S606
