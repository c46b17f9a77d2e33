"""Administration of accounts (capability `admin.users`)."""

from __future__ import annotations

import shlex

import msgspec
from litestar import Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from skald.api.deps import AnyRequest, requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.api.schemas import UserCreated, UserCreateIn, UserPatch
from skald.api.security import principal_of
from skald.core.runtime import Runtime
from skald.errors import InvalidInputError, NotFoundError
from skald.log import get_logger
from skald.store.rows import User

log = get_logger("skald.admin")
ADMIN_USERS = [requires("admin.users")]


async def _user(rt: NamedDependency[Runtime], user_id: str) -> User:
    user = await rt.core.registry.get_user(user_id)
    if user is None:
        raise NotFoundError("no such user")
    return user


def _not_self(request: AnyRequest, user: User, action: str) -> None:
    # The last door out must not be closed from the inside.
    if principal_of(request).user.id == user.id:
        raise ApiError(409, "own_account", f"you cannot {action} your own account")


@get("/api/users", guards=ADMIN_USERS)
async def list_users(rt: NamedDependency[Runtime]) -> list[User]:
    return await rt.core.registry.list_users()


@post("/api/users", guards=ADMIN_USERS, status_code=201, responses=errors(409))
async def create_user(
    data: JSONBody[UserCreateIn], request: AnyRequest, rt: NamedDependency[Runtime]
) -> UserCreated:
    created = await rt.core.users.create(data.username, data.password, data.role, data.display_name)
    if not created.user.encrypted:
        # Unencrypted members are always unlocked, as after a boot.
        await rt.core.users.unlock_unencrypted(created.user)
    log.info(
        "user created",
        username=created.user.username,
        role=data.role,
        by=principal_of(request).user.username,
    )
    return UserCreated(user=created.user, recovery_code=created.recovery_code)


@get("/api/users/{user_id:str}", guards=ADMIN_USERS, responses=errors(404))
async def get_user(user_id: FromPath[str], rt: NamedDependency[Runtime]) -> User:
    return await _user(rt, user_id)


@patch("/api/users/{user_id:str}", guards=ADMIN_USERS, responses=errors(404, 409))
async def patch_user(
    user_id: FromPath[str],
    data: JSONBody[UserPatch],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
) -> User:
    user = await _user(rt, user_id)
    if data.role is not None and data.role != user.role:
        _not_self(request, user, "change the role of")
        role = await rt.core.registry.get_role(data.role)
        if role is None:
            raise InvalidInputError(f"no role named {data.role!r}")
        if role.attributes.encrypted != user.encrypted:
            raise ApiError(
                409,
                "encryption_mismatch",
                f"{user.username}'s data is {'encrypted' if user.encrypted else 'not encrypted'}; "
                f"the role {data.role!r} is {'not ' if user.encrypted else ''}encrypted: moving between "
                "the two is not supported",
            )
    await rt.core.registry.update_user(
        user.id,
        display_name=data.display_name,
        role=data.role,
        locale=data.locale,
        profile=data.profile,
    )
    if data.role is not None and data.role != user.role:
        await rt.revalidate_groups(user_id=user.id)
    if data.active is False and user.active:
        _not_self(request, user, "deactivate")
        await rt.deactivate(user)
    elif data.active is True and not user.active:
        await rt.core.users.activate(user.username)
    rt.user_changed(user.id)
    return await _user(rt, user.id)


@post(
    "/api/users/{user_id:str}/deactivate",
    guards=ADMIN_USERS,
    status_code=200,
    responses=errors(404, 409),
)
async def deactivate_user(
    user_id: FromPath[str], request: AnyRequest, rt: NamedDependency[Runtime]
) -> User:
    user = await _user(rt, user_id)
    _not_self(request, user, "deactivate")
    updated = await rt.deactivate(user)
    log.info("user deactivated", username=user.username, by=principal_of(request).user.username)
    return updated


@post(
    "/api/users/{user_id:str}/activate", guards=ADMIN_USERS, status_code=200, responses=errors(404)
)
async def activate_user(user_id: FromPath[str], rt: NamedDependency[Runtime]) -> User:
    user = await _user(rt, user_id)
    updated = await rt.core.users.activate(user.username)
    if not updated.encrypted:
        await rt.core.users.unlock_unencrypted(updated)
    return updated


class LeftBehind(msgspec.Struct, frozen=True, kw_only=True):
    """The account is deleted, but part of its home could not be removed."""

    deleted: bool = True
    count: int
    left_behind: list[str]  # `<path in the home>: reason`, at most LEFT_SHOWN
    fix: str


LEFT_SHOWN = 100


@delete(
    "/api/users/{user_id:str}",
    guards=ADMIN_USERS,
    # 204 when all is gone; 200 with what is left when part of the home could not be
    # removed (files root made in the sandbox). Litestar wants the body's status here.
    status_code=200,
    responses={
        204: ResponseSpec(data_container=None, description="Deleted, home and all."),
        **errors(404, 409),
    },
)
async def delete_user(
    user_id: FromPath[str], request: AnyRequest, rt: NamedDependency[Runtime]
) -> Response[LeftBehind | None]:
    user = await _user(rt, user_id)
    _not_self(request, user, "delete")
    left = await rt.delete(user)
    log.info("user deleted", username=user.username, by=principal_of(request).user.username)
    if not left:
        return Response(None, status_code=204)
    home = rt.core.layout.home(user.id)
    log.warning("home only partly deleted", username=user.username, left=len(left))
    return Response(
        LeftBehind(
            count=len(left),
            left_behind=[item.split("/", 1)[-1] for item in left[:LEFT_SHOWN]],
            fix=f"as root on the server: rm -rf {shlex.quote(str(home))}",
        ),
        status_code=200,
    )


ROUTES = [
    list_users,
    create_user,
    get_user,
    patch_user,
    deactivate_user,
    activate_user,
    delete_user,
]
