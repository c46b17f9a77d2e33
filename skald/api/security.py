"""Who is calling, and the protections every response carries.

`AuthMiddleware` runs inside Litestar for every route: deny by default, so a route is
reachable anonymously only when its handler says `opt={"public": True}`. It also checks
the CSRF token of cookie-authenticated writes. `EdgeMiddleware` wraps the whole ASGI
app (so it covers 404s and static files too): same-origin checks, security headers and
the access log, and the refusal of requests from the sandboxes' addresses (`refused`:
a sandbox reaches the host through its network's gateway, and with the default
`server.host` Skald listens there too).

Trap: the peer address is the TCP peer. Behind a reverse proxy on this host, every
request comes from the proxy's address (not from the pool); the proxy itself is then
what a sandbox reaches, and the doctor lists it if it listens on all addresses.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.types import ASGIApp, Receive, Scope, Send

from skald.api.errors import ApiError
from skald.core.runtime import Runtime
from skald.core.sessions import Principal
from skald.log import access_line, get_logger
from skald.plugins.specs import Authenticator
from skald.sandbox.network import in_pool

log = get_logger("skald.http")

SESSION_COOKIE = "skald_session"
CSRF_HEADER = "x-csrf-token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# The SPA needs nothing inline and nothing from elsewhere; keep it that way.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' blob:; "  # read aloud: the answer's audio, fetched then played
    "connect-src 'self'; manifest-src 'self'; worker-src 'self'; object-src 'none'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), geolocation=(), microphone=(self)"),
]


def is_public(handler: BaseRouteHandler | None) -> bool:
    return bool(handler is not None and handler.opt.get("public"))


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    user = connection.scope.get("user")
    if not isinstance(user, Principal):
        raise NotAuthorizedException("sign in first")
    return user


class AuthMiddleware:
    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime
        self._authenticators: dict[str, Authenticator] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not is_public(scope.get("route_handler")):
            connection: ASGIConnection[Any, Any, Any, Any] = ASGIConnection(scope)
            header = connection.headers.get("authorization")
            if header is not None:
                # An API token (a plugin's authenticator): the cookie is not looked at,
                # and no CSRF token is needed, since no browser adds this header by itself.
                bearer = await self._by_header(header, scope)
                scope["user"] = bearer
                scope["auth"] = bearer.token_hash
                await self.app(scope, receive, send)
                return
            token = connection.cookies.get(SESSION_COOKIE)
            principal = await self.runtime.sessions.resolve(token) if token else None
            if principal is None:
                raise NotAuthorizedException("your session has ended; please sign in")
            if connection.scope.get("method") in UNSAFE_METHODS:
                sent = connection.headers.get(CSRF_HEADER, "")
                # As bytes: compare_digest raises on non-ASCII text, and a header can
                # carry any byte.
                if not secrets.compare_digest(sent.encode(), principal.csrf_token.encode()):
                    raise ApiError(403, "csrf", "missing or wrong X-CSRF-Token header")
            scope["user"] = principal
            scope["auth"] = token
        await self.app(scope, receive, send)

    async def _by_header(self, header: str, scope: Scope) -> Principal:
        scheme, _, credentials = header.strip().partition(" ")
        if self._authenticators is None:
            self._authenticators = self.runtime.plugins.authenticators(self.runtime.server)
        auth = self._authenticators.get(scheme.lower())
        if auth is None or not credentials.strip():
            raise NotAuthorizedException("unknown Authorization scheme; use Bearer <token>")
        method = "WS" if str(scope["type"]) == "websocket" else str(scope.get("method", ""))
        return await auth.authenticate(credentials.strip(), method, str(scope.get("path", "")))


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def same_origin(scope: Any) -> bool:
    """No Origin (non-browser clients) passes; a browser's Origin must match Host."""
    origin = _header(scope, b"origin")
    if origin is None:
        return True
    host = _header(scope, b"host")
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # malformed, e.g. "http://[::1": not a page of ours
        return False
    return host is not None and netloc == host


async def send_json(
    send: Any, status: int, body: bytes, extra_headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """A whole JSON answer straight on the ASGI channel, for refusals made before the app."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra_headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_CROSS_ORIGIN = (
    b'{"error":{"code":"cross_origin","message":"requests from other sites are refused"}}'
)


_FROM_SANDBOX = (
    b'{"error":{"code":"from_sandbox","message":"sandboxes may not reach Skald itself '
    b'(an administrator can allow it: [sandbox] allow_skald_access)"}}'
)


_INTERNAL = (
    b'{"error":{"code":"internal_error","message":"something went wrong on the server; '
    b'it has been logged"}}'
)


class EdgeMiddleware:
    def __init__(
        self,
        app: Any,
        access_log: str = "all",
        refused: ipaddress.IPv4Network | None = None,
    ) -> None:
        self.app = app
        self.log_all = access_log == "all"
        self.refused = refused  # the sandboxes' pool, when they may not reach Skald

    def _from_sandbox(self, scope: dict[str, Any]) -> bool:
        client = scope.get("client")
        return self.refused is not None and in_pool(client[0] if client else None, self.refused)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and self._from_sandbox(scope):
            await send({"type": "websocket.close", "code": 4403, "reason": "from a sandbox"})
            return
        if scope["type"] == "websocket" and not same_origin(scope):
            await send({"type": "websocket.close", "code": 4403, "reason": "cross-origin"})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        aborted = False
        try:
            if self._from_sandbox(scope):
                await send_json(send, 403, _FROM_SANDBOX, SECURITY_HEADERS)
                status = 403
            elif scope["method"] in UNSAFE_METHODS and not same_origin(scope):
                await send_json(send, 403, _CROSS_ORIGIN, SECURITY_HEADERS)
                status = 403
            else:

                async def send_with_headers(message: dict[str, Any]) -> None:
                    nonlocal status
                    if message["type"] == "http.response.start":
                        status = message["status"]
                        message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
                    await send(message)

                try:
                    await self.app(scope, receive, send_with_headers)
                except Exception as exc:
                    # The log must say what the client got: our own 500 (with every
                    # header) before the response started, a cut connection after.
                    if status:
                        aborted = True
                        raise
                    log.error("unhandled error", path=scope["path"], error=repr(exc))
                    status = 500
                    await send_json(send, 500, _INTERNAL, SECURITY_HEADERS)
        finally:
            # `log.access = "errors"` writes only failures (and cut responses).
            if self.log_all or status >= 400 or aborted:
                client = scope.get("client")
                # Path only: query strings can carry tokens; cookies never belong in logs.
                access_line(
                    scope["method"],
                    scope["path"],
                    status,
                    round((time.perf_counter() - started) * 1000, 1),
                    client[0] if client else None,
                    aborted=aborted,
                )
