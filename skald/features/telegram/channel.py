"""Notifications to Telegram: the `telegram` channel of the notifications feature.

Rule: it is available to a member with a paired chat while the bridge is connected; a
batch goes to their home chat (`/sethome`, else their private chat) as one message.
Quiet hours and batching are the notification service's: a channel only delivers.

Trap: `deliver` runs inside the member's delivery lock on the event loop; a Telegram
failure returns False (the web fallback then takes the batch), it never raises into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skald.features.telegram.bridge import Bridge

__all__ = ["TelegramChannel"]


class TelegramChannel:
    name = "telegram"

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    async def available(self, user_id: str) -> bool:
        return self.bridge.api is not None and await self.bridge.store.home_of(user_id) is not None

    async def deliver(self, delivery: Any) -> bool:  # a notifications `Delivery`
        api = self.bridge.api
        chat = await self.bridge.store.home_of(delivery.user_id)
        if api is None or chat is None:
            return False
        from skald.features.telegram.botapi import NetworkDown, TelegramError
        from skald.features.telegram.render import split

        text = "\n\n".join(
            f"{n.title}\n{n.body}".strip() if n.body else n.title for n in delivery.items
        )
        try:
            for piece in split(text):
                await api.call("sendMessage", {"chat_id": chat, "text": piece})
        except (TelegramError, NetworkDown):
            return False
        return True
