"""Notifications: the member's bell (store, routes, page), the `notify` tool, the
held-delivery loop and the `[notifications]` config section (docs/dev/notifications.md)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from skald.core.services import ServiceSpec
from skald.features.notifications.config import NotificationsConfig
from skald.features.notifications.store import NOTIFICATIONS
from skald.features.notifications.tool import NotifyTool
from skald.plugins import hookimpl
from skald.store.migrations import Feature

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [NOTIFICATIONS] if schema == "owner" else []


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"notifications": NotificationsConfig}


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.notifications import routes as notifications

    return list(notifications.ROUTES)


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool]:
    service = member.notifications
    if service is None:  # a bare member runtime (tests) has no server around it
        return []
    return [NotifyTool(partial(service.notify, member.user.id))]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    return [ServiceSpec("notifications", runtime.notifications.run)]
