"""Signing a request in with an API token (`Authorization: Bearer skald_...`).

Rule: deny by default. A token reaches only the routes its scopes name (`scope_for`);
everything else, administration above all, is 403 whatever the member's role. Within
those routes the member's own role guards apply unchanged, so a token never does more
than its member could in the web app. An encrypted member whose data is locked (signed
out, no "work while signed out" opt-in) gets 423: a token carries no password and
cannot unlock anything.

Trap: the order of the checks is the order of the answers a client sees: an unknown or
revoked token is 401 before anything about the route is said (no probing of scopes
with a dead token); the rate limit is counted only for live tokens.
"""

from __future__ import annotations

import functools
import re

from litestar.exceptions import NotAuthorizedException

from skald.api.errors import ApiError
from skald.core.sessions import Principal
from skald.errors import NotFoundError
from skald.features.tokens.service import TokenService
from skald.plugins.facade import Server

PRINCIPAL_PREFIX = "api-token:"
READ = frozenset({"GET"})

# (pattern of the path, methods or None for any, the scope needed); first match wins.
_RULES: tuple[tuple[re.Pattern[str], frozenset[str] | None, str | None], ...] = (
    (re.compile(r"^/v1/"), None, "openai"),
    (re.compile(r"^/api/auth/me$"), READ, None),  # who am I: any scope
    (re.compile(r"^/api/chat(/stream)?$"), frozenset({"POST"}), "chat"),
    (re.compile(r"^/api/chat/(commands|search)$"), READ, "chat"),
    (re.compile(r"^/api/conversations(/[^/]+(/messages(/\d+/resend)?|/stop)?)?$"), None, "chat"),
    (re.compile(r"^/api/uploads$"), frozenset({"POST"}), "chat"),
    (re.compile(r"^/api/(agents|models)$"), READ, "chat"),
    (re.compile(r"^/api/(files/(dir|places|zip)|file)$"), READ, "files:read"),
    (
        re.compile(r"^/api/(file|file/upload)$"),
        frozenset({"POST", "PATCH", "DELETE"}),
        "files:write",
    ),
)

LOCKED = (
    "sign in on the web first: your data is encrypted and locked while you are signed out "
    "(or turn on \u201clet my assistant work while I'm signed out\u201d)"
)


def scope_for(method: str, path: str) -> tuple[bool, str | None]:
    """(whether a token may reach this route at all, the scope it needs; None: any)."""
    for pattern, methods, scope in _RULES:
        if pattern.match(path) and (methods is None or method in methods):
            return True, scope
    return False, None


def token_id_of(principal: Principal) -> str | None:
    """The token a request came with, or None for a web session."""
    tag = principal.token_hash
    return tag[len(PRINCIPAL_PREFIX) :] if tag.startswith(PRINCIPAL_PREFIX) else None


class TokenAuthenticator:
    scheme = "bearer"

    def __init__(self, server: Server) -> None:
        self.server = server

    async def authenticate(self, credentials: str, method: str, path: str) -> Principal:
        tokens = self.server.state(TokenService)
        row = await tokens.check(credentials)
        if row is None:
            raise NotAuthorizedException("this API token is unknown, revoked or expired")
        reachable, scope = scope_for(method, path)
        if not reachable:
            raise ApiError(403, "token_route", "API tokens cannot use this route")
        if scope is not None and scope not in row.scopes:
            raise ApiError(403, "token_scope", f"this API token lacks the scope {scope!r}")
        try:
            user, role = await self.server.fetch(row.user_id)
        except NotFoundError:
            raise NotAuthorizedException("this API token's member is gone") from None
        if not user.active:
            raise NotAuthorizedException("this API token's member is deactivated")
        if user.encrypted and self.server.member(user.id) is None:
            raise ApiError(423, "locked", LOCKED)
        wait = tokens.limits.take(row.id)
        if wait > 0:
            raise ApiError(
                429,
                "throttled",
                "too many requests with this API token; slow down",
                {"Retry-After": str(max(1, round(wait)))},
            )
        return Principal(
            user=user,
            role=role,
            token_hash=PRINCIPAL_PREFIX + row.id,
            csrf_token="",
            # An open stream asks this between events: revoked or expired, it ends.
            alive=functools.partial(tokens.alive, row.id),
        )
