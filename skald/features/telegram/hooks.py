"""Telegram's hooks: the bridge's state and service, its migration, routes, tool,
notification channel, capability and pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.permissions import TELEGRAM_USE
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(registry=("skald.features.telegram.store:TELEGRAM_REGISTRY",))


skald_capabilities = lazy.capabilities("skald.permissions:TELEGRAM_USE")


skald_server_state = lazy.built_with_server("skald.features.telegram.bridge:Bridge")


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


skald_routes = lazy.routes("skald.features.telegram.routes")


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
