"""Where a batch of notifications goes: the channel contract and what a channel gets.

A channel is anything with a `name`, `available(user_id)` and `deliver(delivery)`: the
web (the live event and Web Push, built in) now, the Telegram bridge later. Channels
come from the `skald_notification_channels(runtime)` hook or
`runtime.notifications.register(channel)`; each member lists the ones they want, in
order (`NotificationPrefs.channels`). Every available chosen channel gets the batch; when
none of them took it, the web does (the fallback), so nothing goes nowhere.

Trap: `deliver` runs on the event loop inside the member's delivery lock: no blocking
I/O, and a slow channel delays that member's next batch (not other members').
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

from skald.features.notifications.store import Notification, Urgency

__all__ = ["Delivery", "NotificationChannel"]


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One batch for one member: the notifications (oldest first) and their unread count."""

    user_id: str
    items: list[Notification]
    unread: int
    urgency: Urgency  # the highest of the items'


@runtime_checkable
class NotificationChannel(Protocol):
    name: str  # what members choose in their settings ("web", "telegram", ...)

    async def available(self, user_id: str) -> bool:
        """Whether this channel can reach the member now (linked, enabled...)."""

    async def deliver(self, delivery: Delivery) -> bool:
        """Hand the batch over; True when it went out (False or an exception: it did not)."""
