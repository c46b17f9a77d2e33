"""The Telegram routes: the bridge's settings (administrators), a member's pairing.

Rule: the token goes in and never comes out (`has_token` only); it is sealed with the
instance key before it is stored. A pairing route works on the caller's own links only.

Trap: a pairing store that cannot be read answers 503 with that sentence and shows on
the admin settings; it is never emptied or recreated to make the error go away.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.errors import InvalidInputError, NotFoundError, StorageError
from skald.features.telegram.bridge import Bridge
from skald.permissions import ADMIN_SYSTEM, TELEGRAM_USE
from skald.plugins.facade import Server  # Litestar reads the routes' annotations

Url = Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]{1,500}$")]
WebUrl = Annotated[str, msgspec.Meta(pattern=r"^(https?://[^\s]{1,500})?$")]
Token = Annotated[str, msgspec.Meta(max_length=200, pattern=r"^(\d{1,20}:[A-Za-z0-9_-]{20,100})?$")]
Code = Annotated[str, msgspec.Meta(min_length=1, max_length=40)]
Prefix = Annotated[str, msgspec.Meta(max_length=40)]


class SettingsIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool
    base_url: Url = "https://api.telegram.org"
    web_url: WebUrl = ""
    token: Token | None = None  # None: keep the stored one; "": remove it


class SettingsView(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool
    base_url: str
    web_url: str
    has_token: bool
    bot_username: str
    connected: bool
    problems: list[str]
    links: int
    pending_updates: int


class GroupIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    prefix: Prefix = ""
    media: bool = False


class GroupView(msgspec.Struct, frozen=True, kw_only=True):
    chat_id: int
    title: str
    prefix: str
    media: bool


class PairIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    code: Code


class LinkView(msgspec.Struct, frozen=True, kw_only=True):
    linked_at: float
    home: bool


class MyTelegram(msgspec.Struct, frozen=True, kw_only=True):
    available: bool  # the bridge is on and connected
    bot_username: str
    links: list[LinkView]


class CodeView(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    expires_at: float


# The guards of the two groups in ROUTES.
ADMIN = [requires(ADMIN_SYSTEM)]
MEMBER = [requires(TELEGRAM_USE)]
_BROKEN = "The Telegram pairing store cannot be read; an administrator must look at it."


async def _view(bridge: Bridge) -> SettingsView:
    settings = await bridge.store.settings()
    problems = [p for p in (bridge.store_problem, bridge.connection_problem) if p]
    try:
        counts = await bridge.store.counts()
    except Exception:
        bridge.store_problem = "the pairing store cannot be read"
        counts = {"links": 0, "pending_updates": 0}
        problems = [bridge.store_problem, *problems[1:]]
    return SettingsView(
        enabled=settings.enabled,
        base_url=settings.base_url,
        web_url=settings.web_url,
        has_token=settings.token_sealed is not None,
        bot_username=bridge.bot_username if bridge.running else settings.bot_username,
        connected=bridge.running,
        problems=problems,
        links=counts["links"],
        pending_updates=counts["pending_updates"],
    )


@get("/api/telegram/settings")
async def read_settings(server: NamedDependency[Server]) -> SettingsView:
    return await _view(server.state(Bridge))


@put("/api/telegram/settings")
async def save_settings(
    server: NamedDependency[Server], data: JSONBody[SettingsIn]
) -> SettingsView:
    bridge = server.state(Bridge)
    current = await bridge.store.settings()
    no_token = data.token == "" or (data.token is None and current.token_sealed is None)
    if data.enabled and no_token:
        raise InvalidInputError("a bot token is needed to switch Telegram on")
    sealed = bridge.seal(data.token) if data.token else None
    await bridge.store.save_settings(
        enabled=data.enabled,
        base_url=data.base_url.rstrip("/"),
        web_url=data.web_url.rstrip("/"),
        token_sealed=sealed,
        keep_token=data.token is None,
    )
    bridge.reload()
    return await _view(bridge)


@get("/api/telegram/groups")
async def list_groups(server: NamedDependency[Server]) -> list[GroupView]:
    """The groups the bot has seen a message in, with their settings."""
    return [
        GroupView(chat_id=g[0], title=g[1], prefix=g[2], media=g[3])
        for g in await server.state(Bridge).store.groups()
    ]


@put("/api/telegram/groups/{chat_id:int}")
async def save_group(
    server: NamedDependency[Server], chat_id: FromPath[int], data: JSONBody[GroupIn]
) -> None:
    if not -(2**63) <= chat_id < 0:  # past SQLite's integers it could not even be bound
        raise InvalidInputError("a group chat id is a negative 64-bit number")
    await server.state(Bridge).store.set_group(chat_id, data.prefix.strip(), data.media)


@get("/api/telegram/me")
async def my_telegram(request: AuthRequest, server: NamedDependency[Server]) -> MyTelegram:
    return await _mine(server.state(Bridge), request.user.user.id)


async def _mine(bridge: Bridge, user_id: str) -> MyTelegram:
    try:
        links = await bridge.store.links_of(user_id)
    except Exception:
        bridge.store_problem = "the pairing store cannot be read"
        raise StorageError(_BROKEN) from None
    return MyTelegram(
        available=bridge.running,
        bot_username=bridge.bot_username,
        links=[LinkView(linked_at=k.linked_at, home=k.home_chat_id is not None) for k in links],
    )


@post("/api/telegram/pair", status_code=200)
async def pair(
    request: AuthRequest, server: NamedDependency[Server], data: JSONBody[PairIn]
) -> MyTelegram:
    """The member types the code the bot gave their chat."""
    bridge = server.state(Bridge)
    try:
        tg = await bridge.store.redeem_chat_code(data.code, request.user.user.id)
    except Exception:
        bridge.store_problem = "the pairing store cannot be read"
        raise StorageError(_BROKEN) from None
    if tg is None:
        raise InvalidInputError("that code is not valid or has expired")
    await bridge.notify_paired(int(tg), request.user.user.locale)
    return await _mine(bridge, request.user.user.id)


@post("/api/telegram/code", status_code=200)
async def member_code(request: AuthRequest, server: NamedDependency[Server]) -> CodeView:
    """A code for the member to type into the bot instead."""
    bridge = server.state(Bridge)
    try:
        code, expires = await bridge.store.code_for_member(request.user.user.id)
    except Exception:
        bridge.store_problem = "the pairing store cannot be read"
        raise StorageError(_BROKEN) from None
    return CodeView(code=code, expires_at=expires)


@delete("/api/telegram/me", status_code=204, responses=errors(404))
async def unpair(request: AuthRequest, server: NamedDependency[Server]) -> None:
    if not await server.state(Bridge).store.unlink(user_id=request.user.user.id):
        raise NotFoundError("no paired Telegram chat")


ROUTES = [
    group(read_settings, save_settings, list_groups, save_group, guards=ADMIN),
    group(my_telegram, pair, member_code, unpair, guards=MEMBER),
]
