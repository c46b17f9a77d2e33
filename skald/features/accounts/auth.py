"""Signing in and out, the caller's own account, and first-run setup."""

from __future__ import annotations

import contextlib

from litestar import Response, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import (
    AnyRequest,
    AuthRequest,
    clear_session,
    client_of,
    device_cookie,
    me_for,
    me_of,
    new_csrf,
    with_new_session,
)
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.api.schemas import LoginIn, Me, MePatch, PasswordChangeIn, SetupIn, SetupOut, SetupState
from skald.core import kdf_pool
from skald.core.devices import DEVICE_COOKIE
from skald.core.runtime import Runtime
from skald.errors import AuthenticationError, NotFoundError
from skald.log import get_logger

log = get_logger("skald.auth")
PUBLIC = {"public": True}


async def _start_session(
    rt: NamedDependency[Runtime], request: AnyRequest, username: FromPath[str], password: str
) -> tuple[Me, str]:
    handle = await rt.core.users.unlock(username, password)
    await rt.attach(handle)
    role = await rt.core.registry.get_role(handle.user.role)
    if role is None:
        raise NotFoundError(f"the role {handle.user.role!r} no longer exists")
    token = await rt.sessions.create(
        handle.user, request.headers.get("user-agent", ""), client_of(request)
    )
    return me_of(handle.user, role, new_csrf(token), rt.instance.current.language), token


@post("/api/auth/login", opt=PUBLIC, status_code=200, responses=errors(401, 429, 503))
async def login(
    data: JSONBody[LoginIn], request: AnyRequest, rt: NamedDependency[Runtime]
) -> Response[Me]:
    client = client_of(request)
    cookie = request.cookies.get(DEVICE_COOKIE)
    # A browser this account signed in from before has a budget of its own.
    device = rt.devices.find(cookie, data.username)
    trust = kdf_pool.trusted() if device is not None else contextlib.nullcontext()
    try:
        with rt.throttle.attempt(data.username, client, device), trust:
            me, token = await _start_session(rt, request, data.username, data.password)
    except AuthenticationError:
        log.warning(
            "login failed", username=data.username, client=client, known_device=bool(device)
        )
        raise
    log.info("login", username=me.username, client=client, known_device=bool(device))
    response = with_new_session(Response(me), request, token, rt.config.auth)
    response.set_cookie(
        device_cookie(request, rt.devices.after_sign_in(cookie, me.username), rt.config.auth)
    )
    return response


@post("/api/auth/logout", status_code=204)
async def logout(request: AuthRequest, rt: NamedDependency[Runtime]) -> Response[None]:
    principal = request.user
    await rt.log_out(principal.user, principal.token_hash)
    return clear_session(Response(None, status_code=204))


@post("/api/auth/logout-all", status_code=204)
async def logout_all(request: AuthRequest, rt: NamedDependency[Runtime]) -> Response[None]:
    principal = request.user
    await rt.log_out_everywhere(principal.user)
    return clear_session(Response(None, status_code=204))


@get("/api/auth/me")
async def get_me(request: AuthRequest, rt: NamedDependency[Runtime]) -> Me:
    return me_for(request.user, rt.instance.current.language)


@patch("/api/auth/me")
async def patch_me(
    data: JSONBody[MePatch], request: AuthRequest, rt: NamedDependency[Runtime]
) -> Me:
    principal = request.user
    await rt.core.registry.update_user(
        principal.user.id, display_name=data.display_name, locale=data.locale
    )
    user = await rt.core.users.get(principal.user.username)
    rt.user_changed(user.id)
    return me_of(user, principal.role, principal.csrf_token, rt.instance.current.language)


@post("/api/auth/password", status_code=204, responses=errors(429, 503))
async def change_password(
    data: JSONBody[PasswordChangeIn], request: AuthRequest, rt: NamedDependency[Runtime]
) -> None:
    principal = request.user
    client = client_of(request)
    try:
        # A signed-in member is a trusted caller of the key-derivation pool.
        with rt.throttle.attempt(principal.user.username, client), kdf_pool.trusted():
            await rt.core.users.change_password(
                principal.user.username, data.current_password, data.new_password
            )
    except AuthenticationError:
        # Not a 401: the session is fine, only the password typed was wrong.
        raise ApiError(400, "wrong_password", "the current password is wrong") from None
    # Whoever else was signed in with the old password is not any more.
    await rt.log_out_everywhere(
        principal.user, keep=principal.token_hash, reason="password_changed"
    )
    log.info("password changed", username=principal.user.username)


@get("/api/setup", opt=PUBLIC)
async def setup_state(rt: NamedDependency[Runtime]) -> SetupState:
    needed = not await rt.core.users.admin_exists()
    if not needed and rt.setup_token is not None:
        rt.setup_finished()  # an admin was made with `skald setup` meanwhile
    return SetupState(needed=needed)


@post("/api/setup", opt=PUBLIC, status_code=201, responses=errors(409, 429, 503))
async def setup(
    data: JSONBody[SetupIn], request: AnyRequest, rt: NamedDependency[Runtime]
) -> Response[SetupOut]:
    client = client_of(request)
    with rt.throttle.attempt("(setup)", client) as attempt:
        if await rt.core.users.admin_exists():
            raise ApiError(
                409, "already_set_up", "this Skald already has an administrator; sign in instead"
            )
        if not rt.setup_token_valid(data.token):
            rt.throttle.failure(attempt)
            raise ApiError(
                403, "bad_setup_token", "the setup token is wrong; it is printed in the server log"
            )
    created = await rt.core.users.create(data.username, data.password, "admin", data.display_name)
    if data.locale:
        await rt.core.registry.update_user(created.user.id, locale=data.locale)
    rt.setup_finished()
    log.info("first administrator created", username=created.user.username)
    me, token = await _start_session(rt, request, created.user.username, data.password)
    out = SetupOut(me=me, recovery_code=created.recovery_code)
    response = with_new_session(Response(out, status_code=201), request, token, rt.config.auth)
    response.set_cookie(
        device_cookie(request, rt.devices.after_sign_in(None, me.username), rt.config.auth)
    )
    return response


ROUTES = [login, logout, logout_all, get_me, patch_me, change_password, setup_state, setup]
