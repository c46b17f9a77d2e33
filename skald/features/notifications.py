"""Notifications: the member's bell (store, routes, page), the `notify` tool, the
held-delivery loop and the `[notifications]` config section (docs/dev/notifications.md)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from skald.core.services import ServiceSpec
from skald.notify.config import NotificationsConfig
from skald.notify.tool import NotifyTool
from skald.plugins import hookimpl
from skald.store.migrations import Feature
from skald.store.notifications import NOTIFICATIONS

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.notify.channels import NotificationChannel
    from skald.plugins.facade import Member, Server


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [NOTIFICATIONS] if schema == "owner" else []


@hookimpl
def skald_event_types() -> list[type[msgspec.Struct]]:
    from skald.notify.events import NotificationsChanged, Notified

    return [NotificationsChanged, Notified]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"notifications": NotificationsConfig}


@hookimpl
def skald_routes() -> list[Any]:
    from skald.api.routes import notifications

    return list(notifications.ROUTES)


@hookimpl
def skald_tools(member: Member) -> list[Tool]:
    return [NotifyTool(partial(member.server.notifications.notify, member.id))]


@hookimpl
def skald_notification_channels(server: Server) -> list[NotificationChannel]:
    # The web (live event and Web Push) is a channel like any other, and the fallback.
    from skald.core.notifications import WebChannel

    service = server.notifications
    return [WebChannel(server.events, service.push)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    return [ServiceSpec("notifications", server.notifications.run)]
