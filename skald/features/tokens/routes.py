"""The member's API tokens (profile page, `skald token`) and the administrators' counts.

A web session only: these routes are not among a token's (`auth.scope_for`), so a
token can neither mint another nor list them. The secret is in the creation answer
and nowhere else.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, requires
from skald.api.openapi import errors
from skald.core.users import ADMIN_USERS
from skald.features.tokens.service import NAME_MAX, SCOPES, TokenInfo, TokenService
from skald.permissions import CHAT
from skald.plugins.facade import Server

# The chat capability (declared by chat; the same declaration finds it).
CHAT_CAP = CHAT

Scope = Annotated[str, msgspec.Meta(max_length=20)]


class TokenIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=NAME_MAX)]
    scopes: Annotated[list[Scope], msgspec.Meta(min_length=1, max_length=len(SCOPES))]
    # Seconds since the epoch; absent: the token lasts until revoked.
    expires_at: float | None = None


class NewToken(msgspec.Struct, frozen=True, kw_only=True):
    token: str  # shown once: it is stored only as a keyed hash
    info: TokenInfo


class MemberTokens(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    username: str
    tokens: int


@get("/api/tokens", guards=[requires(CHAT_CAP)])
async def list_tokens(request: AuthRequest, server: NamedDependency[Server]) -> list[TokenInfo]:
    return await server.state(TokenService).list(request.user.user.id)


@post("/api/tokens", guards=[requires(CHAT_CAP)], status_code=201, responses=errors(400))
async def create_token(
    request: AuthRequest, data: JSONBody[TokenIn], server: NamedDependency[Server]
) -> NewToken:
    token, shown = await server.state(TokenService).create(
        request.user.user.id, data.name, data.scopes, data.expires_at
    )
    return NewToken(token=token, info=shown)


@delete("/api/tokens/{token_id:str}", guards=[requires(CHAT_CAP)], responses=errors(404))
async def revoke_token(
    token_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> None:
    """Revoked at once: the next request with it is 401, and its open streams end."""
    await server.state(TokenService).revoke(request.user.user.id, token_id)


@get("/api/admin/tokens", guards=[requires(ADMIN_USERS)])
async def token_counts(server: NamedDependency[Server]) -> list[MemberTokens]:
    """How many tokens each member holds: never names or secrets."""
    rows = await server.state(TokenService).store.counts()
    return [MemberTokens(user_id=u, username=n, tokens=c) for u, n, c in rows]


ROUTES = [list_tokens, create_token, revoke_token, token_counts]
