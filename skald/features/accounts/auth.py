"""Signing in and out, the caller's own account, and first-run setup.

The handlers see the `Server` facade only: the password check and unlock through
`server.unlock`, sessions, the sign-in throttle and device cookies through the objects the
core keeps in the server state (`SessionManager`, `LoginThrottle`, `DeviceCookies`), the
accounts through its `AccountService`. Trap: `server.unlock` is not throttled: each caller
here wraps it in the throttle's attempt, or a guesser gets the key derivation for free.
"""

from __future__ import annotations

import contextlib

from litestar import Response, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

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
from skald.core.accounts import AccountService
from skald.core.devices import DEVICE_COOKIE, DeviceCookies
from skald.core.sessions import SessionManager
from skald.core.throttle import LoginThrottle
from skald.errors import AuthenticationError
from skald.log import get_logger
from skald.plugins.facade import Server  # Litestar reads the annotations

log = get_logger("skald.auth")
PUBLIC = {"public": True}


async def _start_session(
    server: Server, request: AnyRequest, username: str, password: str
) -> tuple[Me, str]:
    user = await server.unlock(username, password)
    _, role = await server.fetch(user.id)  # NotFoundError when their role is gone
    token = await server.state(SessionManager).create(
        user, request.headers.get("user-agent", ""), client_of(request)
    )
    return me_of(user, role, new_csrf(token), server.instance.current.language), token


@post("/api/auth/login", opt=PUBLIC, status_code=200, responses=errors(401, 429, 503))
async def login(
    data: JSONBody[LoginIn], request: AnyRequest, server: NamedDependency[Server]
) -> Response[Me]:
    client = client_of(request)
    cookie = request.cookies.get(DEVICE_COOKIE)
    devices = server.state(DeviceCookies)
    # A browser this account signed in from before has a budget of its own.
    device = devices.find(cookie, data.username)
    trust = kdf_pool.trusted() if device is not None else contextlib.nullcontext()
    try:
        with server.state(LoginThrottle).attempt(data.username, client, device), trust:
            me, token = await _start_session(server, request, data.username, data.password)
    except AuthenticationError:
        log.warning(
            "login failed", username=data.username, client=client, known_device=bool(device)
        )
        raise
    log.info("login", username=me.username, client=client, known_device=bool(device))
    auth = server.config.auth
    response = with_new_session(Response(me), request, token, auth)
    response.set_cookie(device_cookie(request, devices.after_sign_in(cookie, me.username), auth))
    return response


@post("/api/auth/logout", status_code=204)
async def logout(request: AuthRequest, server: NamedDependency[Server]) -> Response[None]:
    principal = request.user
    await server.sign_out(principal.user, principal.token_hash)
    return clear_session(Response(None, status_code=204))


@post("/api/auth/logout-all", status_code=204)
async def logout_all(request: AuthRequest, server: NamedDependency[Server]) -> Response[None]:
    principal = request.user
    await server.sign_out_everywhere(principal.user)
    return clear_session(Response(None, status_code=204))


@get("/api/auth/me")
async def get_me(request: AuthRequest, server: NamedDependency[Server]) -> Me:
    return me_for(request.user, server.instance.current.language)


@patch("/api/auth/me")
async def patch_me(
    data: JSONBody[MePatch], request: AuthRequest, server: NamedDependency[Server]
) -> Me:
    principal = request.user
    # The account service's one path for a profile change (it tells the member's tabs).
    user = await server.state(AccountService).update(
        principal.user.id,
        actor=principal.user,
        display_name=data.display_name,
        locale=data.locale,
    )
    return me_of(user, principal.role, principal.csrf_token, server.instance.current.language)


@post("/api/auth/password", status_code=204, responses=errors(429, 503))
async def change_password(
    data: JSONBody[PasswordChangeIn], request: AuthRequest, server: NamedDependency[Server]
) -> None:
    principal = request.user
    client = client_of(request)
    try:
        # A signed-in member is a trusted caller of the key-derivation pool.
        with (
            server.state(LoginThrottle).attempt(principal.user.username, client),
            kdf_pool.trusted(),
        ):
            await server.state(AccountService).change_password(
                principal.user.username, data.current_password, data.new_password
            )
    except AuthenticationError:
        # Not a 401: the session is fine, only the password typed was wrong.
        raise ApiError(400, "wrong_password", "the current password is wrong") from None
    # Whoever else was signed in with the old password is not any more.
    await server.sign_out_everywhere(
        principal.user, keep=principal.token_hash, reason="password_changed"
    )
    log.info("password changed", username=principal.user.username)


@get("/api/setup", opt=PUBLIC)
async def setup_state(server: NamedDependency[Server]) -> SetupState:
    needed = not await server.state(AccountService).admin_exists()
    if not needed:
        server.setup_finished()  # an admin was made with `skald setup` meanwhile
    return SetupState(needed=needed)


@post("/api/setup", opt=PUBLIC, status_code=201, responses=errors(409, 429, 503))
async def setup(
    data: JSONBody[SetupIn], request: AnyRequest, server: NamedDependency[Server]
) -> Response[SetupOut]:
    client = client_of(request)
    accounts = server.state(AccountService)
    throttle = server.state(LoginThrottle)
    with throttle.attempt("(setup)", client) as attempt:
        if await accounts.admin_exists():
            raise ApiError(
                409, "already_set_up", "this Skald already has an administrator; sign in instead"
            )
        if not server.setup_token_valid(data.token):
            throttle.failure(attempt)
            raise ApiError(
                403, "bad_setup_token", "the setup token is wrong; it is printed in the server log"
            )
    created = await accounts.create_first_admin(
        data.username, data.password, data.display_name, data.locale
    )
    server.setup_finished()
    log.info("first administrator created", username=created.user.username)
    me, token = await _start_session(server, request, created.user.username, data.password)
    out = SetupOut(me=me, recovery_code=created.recovery_code)
    auth = server.config.auth
    response = with_new_session(Response(out, status_code=201), request, token, auth)
    response.set_cookie(
        device_cookie(request, server.state(DeviceCookies).after_sign_in(None, me.username), auth)
    )
    return response


ROUTES = [login, logout, logout_all, get_me, patch_me, change_password, setup_state, setup]
