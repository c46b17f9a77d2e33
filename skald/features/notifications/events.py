"""The notifications' events on a member's stream (registered by the notifications
feature through `skald_event_types`)."""

from __future__ import annotations

import msgspec

from skald.features.notifications.store import Notification

__all__ = ["NotificationsChanged", "Notified"]


class NotificationsChanged(msgspec.Struct, tag="notifications_changed", kw_only=True):
    """The member's notifications changed (new, read, deleted); `unread` counts them now."""

    unread: int


class Notified(msgspec.Struct, tag="notified", kw_only=True):
    """A batch of notifications delivered to the web (oldest first): show it now."""

    items: list[Notification]
    unread: int
