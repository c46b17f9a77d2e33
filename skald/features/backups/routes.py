"""The Backups page's API (capability `admin.system`): the schedule, the last results,
the archives in the chosen folder, and the two buttons (back up now, test a restore)."""

from __future__ import annotations

import asyncio

import msgspec
from litestar import get, post, put
from litestar.di import NamedDependency
from litestar.params import JSONBody

from skald.api.deps import requires
from skald.api.openapi import errors
from skald.core.runtime import Runtime
from skald.features.backups.scheduler import (
    BackupSettings,
    BackupState,
    DrillResult,
    RunResult,
    archives,
    load_settings,
    load_state,
    save_settings,
    scheduler_for,
)
from skald.permissions import ADMIN_SYSTEM

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


def _view(rt: Runtime) -> BackupsView:
    layout = rt.core.layout
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
        settings=settings, folder=str(folder), state=load_state(layout), archives=listed
    )


@get("/api/backups", guards=GUARD)
async def backups_view(rt: NamedDependency[Runtime]) -> BackupsView:
    return await asyncio.to_thread(_view, rt)


@put("/api/backups/settings", guards=GUARD, responses=errors(400))
async def put_settings(
    data: JSONBody[BackupSettings], rt: NamedDependency[Runtime]
) -> BackupSettings:
    return await asyncio.to_thread(save_settings, rt.core.layout, data)


@post("/api/backups/run", guards=GUARD, status_code=200)
async def backup_now(rt: NamedDependency[Runtime]) -> RunResult:
    return await scheduler_for(rt).backup_now()


@post("/api/backups/drill", guards=GUARD, status_code=200)
async def drill_now(rt: NamedDependency[Runtime]) -> DrillResult:
    return await scheduler_for(rt).drill_now()


ROUTES = [backups_view, put_settings, backup_now, drill_now]
