"""`/api/ops/*`: the local operations channel (`skald status`, `doctor`, `backup`, `user`).

Not part of the public API, and invisible to everyone else: a request reaches these
routes only from a loopback peer carrying `X-Skald-Ops-Token` equal to the token the
server wrote to `data/ops.token` at start. Anything else gets exactly the 404 of a path
that does not exist, for every method (`OpsGate`, outside Litestar's router, so not
even a 405 gives the routes away). A session cookie does not help: these routes take no
sessions. The routes also carry a guard that refuses any request the gate did not
approve, in case some spelling of a path reaches the router without passing the gate.

The handlers see the `Server` facade only: the backup runs in the backups feature's
`BackupScheduler` (its state slot), the accounts through the core's `AccountService`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from litestar import Router, get, post
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.handlers.base import BaseRouteHandler
from litestar.handlers.http_handlers import HTTPRouteHandler
from litestar.params import JSONBody

from skald.api.ops_gate import SCOPE_FLAG
from skald.channels.ops import OPS_PREFIX
from skald.core.accounts import AccountService
from skald.errors import InvalidInputError
from skald.features.backups.scheduler import BackupScheduler, DrillResult
from skald.features.backups.shapes import BackupResult
from skald.log import get_logger
from skald.ops.accounts import ACCOUNT_ACTIONS, AccountAction, account_action
from skald.ops.inspect import Integrity, OpsStatus, integrity, server_status
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.rows import User

log = get_logger("skald.ops")

OPS_OPT: dict[str, Any] = {"public": True, "ops": True}


async def ops_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    if connection.scope.get(SCOPE_FLAG) is not True:
        raise NotFoundException()


# -- routes ----------------------------------------------------------------------------


class BackupRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    quick: bool = False
    out: str | None = None


@get("/status")
async def ops_status(server: NamedDependency[Server]) -> OpsStatus:
    return await server_status(server)


@get("/integrity")
async def ops_integrity(server: NamedDependency[Server]) -> Integrity:
    return await integrity(server)


@post("/backup", status_code=200)
async def ops_backup(
    data: JSONBody[BackupRequest], server: NamedDependency[Server]
) -> BackupResult:
    out = None
    if data.out is not None:
        out = Path(data.out)
        if not out.is_absolute():
            raise InvalidInputError("out must be an absolute path")
    return await server.state(BackupScheduler).backup_to(quick=data.quick, out=out)


@post("/drill", status_code=200)
async def ops_drill(server: NamedDependency[Server]) -> DrillResult:
    """`skald backup --drill` while a server runs: only it holds members' keys."""
    return await server.state(BackupScheduler).drill_now()


# -- accounts: `skald user deactivate|activate|delete` while a server runs ----------------
# The CLI asks the server, because only the server can close what the account holds
# open (sockets, runtime, data key, sandbox). The operator is the actor (no "own account").


class AccountRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    username: str


class AccountDone(msgspec.Struct, frozen=True, kw_only=True):
    username: str
    user: User | None  # None after a deletion
    left: list[str] = []  # after a deletion: what of the home could not be removed


def _account_route(action: AccountAction) -> HTTPRouteHandler:
    """`POST /users/<action>`: the named account deactivated, activated or deleted."""

    async def change(
        data: JSONBody[AccountRequest], server: NamedDependency[Server]
    ) -> AccountDone:
        found, now, left = await account_action(server.state(AccountService), data.username, action)
        return AccountDone(username=found.username, user=now, left=left)

    return post(f"/users/{action}", status_code=200, name=f"ops_user_{action}")(change)


# One group: every ops route is public to the session check (the gate decides), refused
# by `ops_only` without the gate's mark, and left out of the API document.
ROUTES = [
    Router(
        OPS_PREFIX,
        route_handlers=[
            ops_status,
            ops_integrity,
            ops_backup,
            ops_drill,
            *(_account_route(action) for action in ACCOUNT_ACTIONS),
        ],
        opt=OPS_OPT,
        guards=[ops_only],
        include_in_schema=False,
    )
]
