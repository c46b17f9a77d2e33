"""Telegram's hooks: the bridge's state and service, its migration, routes, tool,
notification channel, capability and pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.features.telegram.store import TELEGRAM_REGISTRY
from skald.permissions import TELEGRAM_USE
from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.permissions import Capability
    from skald.plugins.facade import Member, Server
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [TELEGRAM_REGISTRY] if schema == "registry" else []


@hookimpl
def skald_capabilities() -> list[Capability]:
    return [TELEGRAM_USE]


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.telegram.bridge import Bridge

    return [Bridge(server)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.telegram.bridge import Bridge

    return [ServiceSpec("telegram", server.state(Bridge).run, order=70)]


@hookimpl
def skald_notification_channels(server: Server) -> list[Any]:
    from skald.features.telegram.bridge import Bridge
    from skald.features.telegram.channel import TelegramChannel

    return [TelegramChannel(server.state(Bridge))]


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    from skald.features.telegram.bridge import Bridge

    bridge = member.server.state(Bridge, None)
    if bridge is None or not bridge.running or not member.can(TELEGRAM_USE):
        return None
    from skald.features.telegram.tool import SendAttachmentTool  # a running bot only

    return [SendAttachmentTool(member, bridge)]


skald_routes = lazy_routes("skald.features.telegram.routes")


WEB = FeatureWeb(__file__, "telegram")
WEB.page(
    "/telegram",
    "TelegramPage",
    say_not_allowed=False,
    capability=TELEGRAM_USE.name,
    order=60,
    icon="chat",
)
WEB.page(
    "/admin/telegram",
    "AdminTelegramPage",
    say_not_allowed=False,
    title="nav.admin_telegram",
    capability="admin.system",
    order=165,
    icon="chat",
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
