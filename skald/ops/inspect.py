"""What the ops channel reports about a running server: accounts, sandboxes and a
quick integrity check of every database it can read (see `skald/features/ops/routes.py`).

Rule: it reads the server through the `Server` facade, like the ops routes that call it.
Trap: a locked member's database cannot be checked (no key); it is left out, not failed.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import msgspec

from skald import __version__
from skald.core.accounts import AccountService
from skald.core.services import ServiceHealth
from skald.sandbox.manager import LABEL_INSTANCE, LABEL_USER, SandboxUnavailable
from skald.store.snapshot import quick_check

if TYPE_CHECKING:
    from skald.plugins.facade import Server

__all__ = [
    "DatabaseCheck",
    "Integrity",
    "OpsContainer",
    "OpsStatus",
    "OpsUser",
    "integrity",
    "server_status",
]


class OpsUser(msgspec.Struct, frozen=True, kw_only=True):
    username: str
    role: str
    active: bool
    encrypted: bool
    unlocked: bool


class OpsContainer(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    user: str | None  # username (the user id if the account is gone)
    state: str  # Docker's status: running, exited, created...


class OpsStatus(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    uptime_s: float
    pid: int
    data_dir: str
    docker: str  # ok, starting, unreachable, image_missing or disabled
    users: list[OpsUser]
    containers: list[OpsContainer]  # empty when the sandbox is disabled or unavailable
    # The server's background services, then each unlocked member's (`<username>/<name>`).
    services: list[ServiceHealth] = []


class DatabaseCheck(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # "registry" or "owner:<username>"
    ok: bool
    detail: str


class Integrity(msgspec.Struct, frozen=True, kw_only=True):
    databases: list[DatabaseCheck]


async def _containers(server: Server, names: dict[str, str]) -> list[OpsContainer]:
    sandbox = server.sandbox
    if sandbox is None or sandbox.state != "ok":
        return []

    def listing() -> list[tuple[str, str | None, str]]:
        client = sandbox.client()
        found = client.containers.list(
            all=True, filters={"label": [f"{LABEL_INSTANCE}={sandbox.instance_id}"]}
        )
        return [(str(c.name), (c.labels or {}).get(LABEL_USER), str(c.status)) for c in found]

    try:
        rows = await sandbox.call(listing)
    except SandboxUnavailable:
        return []
    return [
        OpsContainer(name=name, user=names.get(user or "", user), state=state)
        for name, user, state in sorted(rows, key=lambda r: r[0])
    ]


async def server_status(server: Server) -> OpsStatus:
    users = await server.state(AccountService).registry.list_users()
    return OpsStatus(
        version=__version__,
        uptime_s=round(time.time() - server.started_at, 1),
        pid=os.getpid(),
        data_dir=str(server.layout.root),
        docker=server.docker_state,
        users=[
            OpsUser(
                username=u.username,
                role=u.role,
                active=u.active,
                encrypted=u.encrypted,
                unlocked=server.is_unlocked(u.id),
            )
            for u in users
        ],
        containers=await _containers(server, {u.id: u.username for u in users}),
        services=server.service_health(),
    )


async def integrity(server: Server) -> Integrity:
    """`PRAGMA quick_check` on the registry and on every unlocked owner database, each on
    its own database thread (a locked one cannot be read without its member's key)."""
    checks = []
    try:
        ok, detail = await server.db.call(quick_check)
    except Exception as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    checks.append(DatabaseCheck(name="registry", ok=ok, detail=detail))
    for user in await server.state(AccountService).registry.list_users():
        if not server.is_unlocked(user.id):
            continue
        async with server.held_database(user.id) as db:
            if db is None:
                continue
            try:
                ok, detail = await db.call(quick_check)
            except Exception as exc:
                ok, detail = False, f"{type(exc).__name__}: {exc}"
        checks.append(DatabaseCheck(name=f"owner:{user.username}", ok=ok, detail=detail))
    return Integrity(databases=checks)
