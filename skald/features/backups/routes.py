"""The Backups page's API (capability `admin.system`): the schedule, the last results,
the archives in the chosen folder, the two buttons (back up now, test a restore), and
the guided restore: what an archive holds, then a restart into it (skald.features.backups.restart).
An archive is named by its file name, and only one listed in the folder is accepted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
from litestar import Response, get, post, put
from litestar.background_tasks import BackgroundTask
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AnyRequest, group, requires
from skald.api.openapi import errors
from skald.api.security import principal_of
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.features.backups.restart import REQUEST_FILE, RestoreOutcome, load_outcome, write_request
from skald.features.backups.scheduler import (
    BackupScheduler,
    BackupSettings,
    BackupState,
    DrillResult,
    RunResult,
    archives,
    load_settings,
    load_state,
    save_settings,
)
from skald.permissions import ADMIN_SYSTEM
from skald.plugins.facade import Server  # Litestar reads the annotations

# Every route's guard: the group in ROUTES gives it.
GUARD = [requires(ADMIN_SYSTEM)]


class Archive(msgspec.Struct, kw_only=True):
    name: str
    created: str
    bytes: int


class BackupsView(msgspec.Struct, kw_only=True):
    settings: BackupSettings
    folder: str  # where backups go now (the default when settings.folder is empty)
    state: BackupState
    archives: list[Archive]
    last_restore: RestoreOutcome | None = None  # the last restore asked for here


class ArchiveMember(msgspec.Struct, kw_only=True):
    username: str
    encrypted: bool


class ArchiveContents(msgspec.Struct, kw_only=True):
    """What the page shows before a restore: read from the manifest alone."""

    name: str
    kind: str  # "full" or "quick" (a quick backup leaves out the home folders)
    created: str
    skald_version: str
    members: list[ArchiveMember]  # whose data it holds (the household's always)
    files: int
    bytes: int


class RestoreConfirm(msgspec.Struct, kw_only=True):
    confirm: bool  # must be true: the page asked the person first


class Restarting(msgspec.Struct, kw_only=True):
    restarting: bool


def _view(server: Server) -> BackupsView:
    layout = server.layout
    settings = load_settings(layout)
    folder = settings.target(layout)
    listed = []
    for when, path in archives(folder):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        listed.append(Archive(name=path.name, created=when.isoformat(), bytes=size))
    return BackupsView(
        settings=settings,
        folder=str(folder),
        state=load_state(layout),
        archives=listed,
        last_restore=load_outcome(layout),
    )


def _archive(server: Server, name: str) -> Path:
    """The archive of that file name in the backup folder; nothing else (no paths)."""
    folder = load_settings(server.layout).target(server.layout)
    for _, path in archives(folder):
        if path.name == name:
            return path
    raise NotFoundError(f"there is no backup called {name!r} in {folder}")


def _contents(server: Server, name: str) -> ArchiveContents:
    from skald.features.backups.archive import read_manifest  # tarfile: at first use

    path = _archive(server, name)
    m = read_manifest(path)
    members = [
        ArchiveMember(username=d.username or "", encrypted=d.encrypted)
        for d in m.databases
        if d.kind == "owner"
    ]
    return ArchiveContents(
        name=path.name,
        kind=m.kind,
        created=m.created,
        skald_version=m.skald_version,
        members=sorted(members, key=lambda x: x.username.casefold()),
        files=sum(1 for e in m.files if e.type == "file"),
        bytes=sum(e.size for e in m.files),
    )


def _ask_restore(server: Server, name: str, by: str) -> None:
    from skald.features.backups.archive import check_archive  # tarfile: at first use

    layout = server.layout
    if (layout.root / REQUEST_FILE).exists():
        raise ConflictError("a restore is already under way; Skald is restarting")
    path = _archive(server, name)
    check_archive(path)  # every member against the manifest: refuse now, not mid-restart
    write_request(layout, path, by)


@get("/api/backups")
async def backups_view(server: NamedDependency[Server]) -> BackupsView:
    return await asyncio.to_thread(_view, server)


@put("/api/backups/settings", responses=errors(400))
async def put_settings(
    data: JSONBody[BackupSettings], server: NamedDependency[Server]
) -> BackupSettings:
    return await asyncio.to_thread(save_settings, server.layout, data)


@post("/api/backups/run", status_code=200)
async def backup_now(server: NamedDependency[Server]) -> RunResult:
    return await server.state(BackupScheduler).backup_now()


@post("/api/backups/drill", status_code=200)
async def drill_now(server: NamedDependency[Server]) -> DrillResult:
    return await server.state(BackupScheduler).drill_now()


@get("/api/backups/archives/{name:str}", responses=errors(400, 404))
async def archive_contents(name: FromPath[str], server: NamedDependency[Server]) -> ArchiveContents:
    return await asyncio.to_thread(_contents, server, name)


@post("/api/backups/archives/{name:str}/restore", status_code=202, responses=errors(400, 404, 409))
async def restore_archive(
    name: FromPath[str],
    data: JSONBody[RestoreConfirm],
    request: AnyRequest,
    server: NamedDependency[Server],
) -> Response[Restarting]:
    """Check the archive, leave the request, and stop once this answer is sent: the
    serve loop restores and starts again. Everyone is signed out (sessions are not
    restored); the page waits for the new start."""
    if not data.confirm:
        raise InvalidInputError("confirm the restore first: nothing was changed")
    by = principal_of(request).user.username
    await asyncio.to_thread(_ask_restore, server, name, by)
    return Response(Restarting(restarting=True), background=BackgroundTask(_stop, server))


async def _stop(server: Server) -> None:
    server.request_stop()


ROUTES = [
    group(
        backups_view,
        put_settings,
        backup_now,
        drill_now,
        archive_contents,
        restore_archive,
        guards=GUARD,
    )
]
