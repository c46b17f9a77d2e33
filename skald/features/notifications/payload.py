"""What a Web Push message carries: `{"count", "unread", "items": [{id, title, body,
link}]}`, the newest items first, cut to fit one message (`web/sw.js` shows it).

Trap: a push service must accept 4,096 bytes of encrypted body, not more; the batch is
cut (oldest items dropped, then the one left has its text halved) until it fits.
"""

from __future__ import annotations

import msgspec

from skald.features.notifications.channels import Delivery
from skald.features.notifications.webpush import MAX_PAYLOAD

__all__ = ["push_payload"]


class _PushItem(msgspec.Struct, frozen=True):
    id: str
    title: str
    body: str
    link: str | None


class _PushPayload(msgspec.Struct, frozen=True):
    count: int
    unread: int
    items: list[_PushItem]


def push_payload(delivery: Delivery) -> bytes:
    """What the service worker shows: the newest items first, cut to fit one message."""
    items = [_PushItem(n.id, n.title, n.body, n.link) for n in reversed(delivery.items)]
    while True:
        data = msgspec.json.encode(
            _PushPayload(count=len(delivery.items), unread=delivery.unread, items=items)
        )
        if len(data) <= MAX_PAYLOAD:
            return data
        if len(items) > 1:
            items = items[:-1]
        elif items[0].body:  # one item too long: its text shortened
            first = items[0]
            items = [msgspec.structs.replace(first, body=first.body[: len(first.body) // 2])]
        else:  # cannot happen within the limits; never loop forever
            items = [msgspec.structs.replace(items[0], title=items[0].title[:100], link=None)]
