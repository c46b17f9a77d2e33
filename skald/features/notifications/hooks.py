"""Notifications: the member's bell (store, routes, page), the `notify` tool, the
held-delivery loop and the `[notifications]` config section (docs/dev/notifications.md)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import msgspec

from skald.core.services import ServiceSpec
from skald.features.notifications.tool import NotifyTool
from skald.plugins import hookimpl, lazy

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.features.notifications.channels import NotificationChannel
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(owner=("skald.features.notifications.store:NOTIFICATIONS",))


@hookimpl
def skald_event_types() -> list[type[msgspec.Struct]]:
    from skald.features.notifications.events import NotificationsChanged, Notified

    return [NotificationsChanged, Notified]


skald_config_sections = lazy.config_section(
    "notifications", "skald.features.notifications.config:NotificationsConfig"
)


skald_routes = lazy.routes("skald.features.notifications.routes")


@hookimpl
def skald_tools(member: Member) -> list[Tool]:
    return [NotifyTool(partial(member.server.notifications.notify, member.id))]


@hookimpl
def skald_notification_channels(server: Server) -> list[NotificationChannel]:
    # The web (live event and Web Push) is a channel like any other, and the fallback.
    from skald.features.notifications.service import WebChannel

    service = server.notifications
    return [WebChannel(server.events, service.push)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    return [ServiceSpec("notifications", server.notifications.run)]
