"""Helpers shared by the route modules: guards, cookies, the caller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Request, Response, Router, WebSocket
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Guard

from skald.api.schemas import Me
from skald.api.security import SESSION_COOKIE, principal_of
from skald.config import AuthConfig
from skald.core.devices import DEVICE_COOKIE
from skald.core.devices import MAX_AGE_S as DEVICE_MAX_AGE_S
from skald.core.sessions import Principal, csrf_for
from skald.permissions import Capability
from skald.store.rows import Role, User, effective_locale

AnyRequest = Request[Any, Any, Any]
# A request on a route that is not public: `AuthMiddleware` has set `request.user` to the
# caller (on a public route it is unset, and reading it is a server error).
AuthRequest = Request[Principal, str, Any]
AuthSocket = WebSocket[Principal, str, Any]


class Requires:
    """A route guard: the caller's role must hold one of `capabilities` (checked by `can`).

    A class rather than a closure so the capability walk (tests/test_capabilities.py) can
    read from the route table which capabilities guard which route.
    """

    def __init__(self, capabilities: tuple[Capability, ...]) -> None:
        if not capabilities:
            raise ValueError("a guard needs at least one capability")
        self.capabilities = capabilities

    # Async on purpose: Litestar runs a synchronous guard in its thread pool, a thread
    # hop on every guarded request for a check that reads memory
    # (`test_app_registration.py` walks every route for a guard that would).
    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
    ) -> None:
        principal = principal_of(connection)
        if not any(principal.can(c) for c in self.capabilities):
            raise PermissionDeniedException("your role does not allow this")

    def __repr__(self) -> str:
        return f"requires({', '.join(c.name for c in self.capabilities)})"


def requires(*capabilities: Capability) -> Guard:
    """Allow the route when the caller's role holds any of `capabilities`."""
    return Requires(capabilities)


def group(*handlers: BaseRouteHandler, guards: Sequence[Guard] = (), **layer: Any) -> Router:
    """Route handlers that share a layer (`dependencies`, `opt`) as one Litestar `Router`
    at "/": their paths stay whole (`create_app` documents their errors with every other
    route's). `guards`: what guards every handler of the group, declared once.

    Trap: `guards` go on each handler, before its own, not on the Router's layer: the
    capability walk (tests/test_capabilities.py) and the errors the OpenAPI document
    lists (skald/api/openapi.py) read `handler.guards`, which holds no layer's guards.
    A request runs them in the same order either way (a layer's come first)."""
    for handler in handlers:
        handler.guards = [*guards, *(handler.guards or ())]
    return Router("/", route_handlers=list(handlers), **layer)


def me_of(user: User, role: Role, csrf_token: str, household: str | None = None) -> Me:
    """`household`: the household's language now, for a member without one of their own."""
    return Me(
        id=user.id,
        username=user.username,
        display_name=user.display_name,
        role=user.role,
        capabilities=role.capabilities,
        ui_mode=role.attributes.ui_mode,
        locale=effective_locale(user.locale, household),
        encrypted=user.encrypted,
        csrf_token=csrf_token,
        locale_own=bool(user.locale),
    )


def me_for(principal: Principal, household: str | None = None) -> Me:
    return me_of(principal.user, principal.role, principal.csrf_token, household)


def _secure(request: AnyRequest, config: AuthConfig) -> bool:
    return config.secure_cookies == "always" or (
        config.secure_cookies == "auto" and request.url.scheme == "https"
    )


def session_cookie(request: AnyRequest, token: str, config: AuthConfig) -> Cookie:
    secure = _secure(request, config)
    return Cookie(
        key=SESSION_COOKIE,
        value=token,
        path="/",
        httponly=True,
        samesite="strict",
        secure=secure,
        max_age=int(config.session_max_days * 86400),
    )


def device_cookie(request: AnyRequest, value: str, config: AuthConfig) -> Cookie:
    """The device cookie (`skald.core.devices`). Path "/" like the session cookie: behind
    a proxy that mounts Skald under a sub-path, a narrower path would never match."""
    return Cookie(
        key=DEVICE_COOKIE,
        value=value,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request, config),
        max_age=DEVICE_MAX_AGE_S,
    )


def with_new_session(
    response: Response[Any], request: AnyRequest, token: str, config: AuthConfig
) -> Response[Any]:
    response.set_cookie(session_cookie(request, token, config))
    return response


def clear_session(response: Response[Any]) -> Response[Any]:
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def client_of(request: AnyRequest) -> str:
    return request.client.host if request.client else "unknown"


def new_csrf(token: str) -> str:
    return csrf_for(token)
