"""`/api/ops/*`: the local operations channel (`skald status`, `doctor`, `backup`, `user`).

Not part of the public API, and invisible to everyone else: a request reaches these
routes only from a loopback peer carrying `X-Skald-Ops-Token` equal to the token the
server wrote to `data/ops.token` at start. Anything else gets exactly the 404 of a path
that does not exist, for every method (`OpsGate`, outside Litestar's router, so not
even a 405 gives the routes away). A session cookie does not help: these routes take no
sessions. The routes also carry a guard that refuses any request the gate did not
approve, in case some spelling of a path reaches the router without passing the gate.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import weakref
from pathlib import Path
from typing import Any

import msgspec
from litestar import get, post
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.handlers.base import BaseRouteHandler
from litestar.params import JSONBody

from skald.api.security import send_json
from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.backups.backup import BackupResult, ServerSnapshotter, create_backup
from skald.features.backups.scheduler import DrillResult, scheduler_for
from skald.log import get_logger
from skald.ops.channel import OPS_HEADER, OPS_PREFIX, token_matches
from skald.ops.inspect import Integrity, OpsStatus, integrity, server_status
from skald.store.rows import User

log = get_logger("skald.ops")

# Set on the ASGI scope by the gate, and only by it: clients cannot write scope keys.
SCOPE_FLAG = "skald.ops"
# Marks answers that passed the gate, so a client can tell "refused" from a real 404.
APPROVED_HEADER = (b"x-skald-ops", b"1")
NOT_FOUND_BODY = b'{"error":{"code":"not_found","message":"Not Found"}}'
_HEADER = OPS_HEADER.lower().encode("latin-1")
_SLASHES = re.compile(r"/{2,}")
OPS_OPT: dict[str, Any] = {"public": True, "ops": True}


# -- the gate --------------------------------------------------------------------------


def is_ops_path(path: str) -> bool:
    path = _SLASHES.sub("/", path)
    return path == OPS_PREFIX or path.startswith(OPS_PREFIX + "/")


def _loopback(scope: dict[str, Any]) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def approved(scope: dict[str, Any], token: str | None) -> bool:
    """Loopback peer and exactly one header with the right token."""
    if token is None or not _loopback(scope):
        return False
    sent = [v for k, v in scope.get("headers", ()) if k.lower() == _HEADER]
    if len(sent) != 1:
        return False
    return token_matches(token, sent[0].decode("latin-1"))


class OpsGate:
    """ASGI wrapper: `/api/ops*` passes only with the ops token from loopback."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and is_ops_path(scope.get("path", "")):
            if scope["type"] != "http" or not approved(scope, self.token):
                if scope["type"] == "http":
                    await send_json(send, 404, NOT_FOUND_BODY)
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
            scope[SCOPE_FLAG] = True
            inner_send = send

            async def send_marked(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), APPROVED_HEADER]
                await inner_send(message)

            send = send_marked
        else:
            scope.pop(SCOPE_FLAG, None)
        await self.app(scope, receive, send)


def ops_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    if connection.scope.get(SCOPE_FLAG) is not True:
        raise NotFoundException()


# -- routes ----------------------------------------------------------------------------


class BackupRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    quick: bool = False
    out: str | None = None


@get(f"{OPS_PREFIX}/status", opt=OPS_OPT, guards=[ops_only], include_in_schema=False)
async def ops_status(rt: NamedDependency[Runtime]) -> OpsStatus:
    return await server_status(rt)


@get(f"{OPS_PREFIX}/integrity", opt=OPS_OPT, guards=[ops_only], include_in_schema=False)
async def ops_integrity(rt: NamedDependency[Runtime]) -> Integrity:
    return await integrity(rt)


_backup_locks: weakref.WeakKeyDictionary[Runtime, asyncio.Lock] = weakref.WeakKeyDictionary()


@post(
    f"{OPS_PREFIX}/backup",
    opt=OPS_OPT,
    guards=[ops_only],
    include_in_schema=False,
    status_code=200,
)
async def ops_backup(data: JSONBody[BackupRequest], rt: NamedDependency[Runtime]) -> BackupResult:
    out = None
    if data.out is not None:
        out = Path(data.out)
        if not out.is_absolute():
            raise InvalidInputError("out must be an absolute path")
    lock = _backup_locks.setdefault(rt, asyncio.Lock())
    async with lock:  # one at a time: each already uses every database thread
        return await create_backup(rt.core.layout, ServerSnapshotter(rt), quick=data.quick, out=out)


@post(
    f"{OPS_PREFIX}/drill",
    opt=OPS_OPT,
    guards=[ops_only],
    include_in_schema=False,
    status_code=200,
)
async def ops_drill(rt: NamedDependency[Runtime]) -> DrillResult:
    """`skald backup --drill` while a server runs: only it holds members' keys."""
    return await scheduler_for(rt).drill_now()


# -- accounts: `skald user deactivate|activate|delete` while a server runs ----------------
# The CLI asks the server, because only the server can close what the account holds
# open (sockets, runtime, data key, sandbox). The operator is the actor (no "own account").


class AccountRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    username: str


class AccountDone(msgspec.Struct, frozen=True, kw_only=True):
    username: str
    user: User | None  # None after a deletion
    left: list[str] = []  # after a deletion: what of the home could not be removed


@post(
    f"{OPS_PREFIX}/users/deactivate",
    opt=OPS_OPT,
    guards=[ops_only],
    include_in_schema=False,
    status_code=200,
)
async def ops_user_deactivate(
    data: JSONBody[AccountRequest], rt: NamedDependency[Runtime]
) -> AccountDone:
    user = await rt.accounts.find(data.username)
    return AccountDone(username=user.username, user=await rt.accounts.deactivate(user.id))


@post(
    f"{OPS_PREFIX}/users/activate",
    opt=OPS_OPT,
    guards=[ops_only],
    include_in_schema=False,
    status_code=200,
)
async def ops_user_activate(
    data: JSONBody[AccountRequest], rt: NamedDependency[Runtime]
) -> AccountDone:
    user = await rt.accounts.find(data.username)
    return AccountDone(username=user.username, user=await rt.accounts.activate(user.id))


@post(
    f"{OPS_PREFIX}/users/delete",
    opt=OPS_OPT,
    guards=[ops_only],
    include_in_schema=False,
    status_code=200,
)
async def ops_user_delete(
    data: JSONBody[AccountRequest], rt: NamedDependency[Runtime]
) -> AccountDone:
    user = await rt.accounts.find(data.username)
    left = await rt.accounts.delete(user.id)
    return AccountDone(username=user.username, user=None, left=left)


ROUTES = [
    ops_status,
    ops_integrity,
    ops_backup,
    ops_drill,
    ops_user_deactivate,
    ops_user_activate,
    ops_user_delete,
]
