"""Administration of accounts (capability `admin.users`).

Parse, authorise, call the `AccountService` (`server.state(AccountService)`;
skald/core/accounts.py, where the rules live), serialise. The CLI's `skald user ...` goes
through the same service.
"""

from __future__ import annotations

import shlex

import msgspec
from litestar import Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.api.schemas import UserCreated, UserCreateIn, UserPatch
from skald.core.accounts import AccountService
from skald.core.users import ADMIN_USERS as ADMIN_USERS_CAP
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.rows import User

# Every route's guard: the group in ROUTES gives it.
ADMIN_USERS = [requires(ADMIN_USERS_CAP)]


@get("/api/users")
async def list_users(server: NamedDependency[Server]) -> list[User]:
    return await server.state(AccountService).registry.list_users()


@post("/api/users", status_code=201, responses=errors(409))
async def create_user(
    data: JSONBody[UserCreateIn], request: AuthRequest, server: NamedDependency[Server]
) -> UserCreated:
    created = await server.state(AccountService).create(
        data.username,
        data.password,
        data.role,
        data.display_name,
        actor=request.user.user,
    )
    # A new member has no language of their own: they follow the household's (Settings)
    # live until they choose one (`effective_locale`).
    return UserCreated(user=created.user, recovery_code=created.recovery_code)


@get("/api/users/{user_id:str}", responses=errors(404))
async def get_user(user_id: FromPath[str], server: NamedDependency[Server]) -> User:
    return await server.state(AccountService).get(user_id)


@patch("/api/users/{user_id:str}", responses=errors(404, 409))
async def patch_user(
    user_id: FromPath[str],
    data: JSONBody[UserPatch],
    request: AuthRequest,
    server: NamedDependency[Server],
) -> User:
    return await server.state(AccountService).update(
        user_id,
        actor=request.user.user,
        display_name=data.display_name,
        role=data.role,
        locale=data.locale,
        profile=data.profile,
        active=data.active,
    )


@post("/api/users/{user_id:str}/deactivate", status_code=200, responses=errors(404, 409))
async def deactivate_user(
    user_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> User:
    return await server.state(AccountService).deactivate(user_id, actor=request.user.user)


@post("/api/users/{user_id:str}/activate", status_code=200, responses=errors(404))
async def activate_user(
    user_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> User:
    return await server.state(AccountService).activate(user_id, actor=request.user.user)


class LeftBehind(msgspec.Struct, frozen=True, kw_only=True):
    """The account is deleted, but part of its home could not be removed."""

    deleted: bool = True
    count: int
    left_behind: list[str]  # `<path in the home>: reason`, at most LEFT_SHOWN
    fix: str


LEFT_SHOWN = 100


@delete(
    "/api/users/{user_id:str}",
    # 204 when all is gone; 200 with what is left when part of the home could not be
    # removed (files root made in the sandbox). Litestar wants the body's status here.
    status_code=200,
    responses={
        204: ResponseSpec(data_container=None, description="Deleted, home and all."),
        **errors(404, 409),
    },
)
async def delete_user(
    user_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> Response[LeftBehind | None]:
    accounts = server.state(AccountService)
    user = await accounts.get(user_id)
    left = await accounts.delete(user_id, actor=request.user.user)
    if not left:
        return Response(None, status_code=204)
    home = server.layout.home(user.id)
    return Response(
        LeftBehind(
            count=len(left),
            left_behind=[item.split("/", 1)[-1] for item in left[:LEFT_SHOWN]],
            fix=f"as root on the server: rm -rf {shlex.quote(str(home))}",
        ),
        status_code=200,
    )


ROUTES = [
    group(
        list_users,
        create_user,
        get_user,
        patch_user,
        deactivate_user,
        activate_user,
        delete_user,
        guards=ADMIN_USERS,
    )
]
