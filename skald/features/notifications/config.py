"""`[notifications]` of config.toml (registered through the config-sections hook)."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["NotificationsConfig"]


class NotificationsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Notifications arriving within this many milliseconds go out as one delivery.
    batch_ms: Annotated[int, msgspec.Meta(ge=0, le=10_000)] = 200
    # How often held deliveries (quiet hours, a crash) are looked at again, in seconds.
    held_check_s: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 30
    # The contact push services see in every VAPID token (mailto: or https:).
    vapid_subject: str = "mailto:admin@localhost"
    # How long a push service keeps a message for an offline device, in seconds.
    push_ttl_s: Annotated[int, msgspec.Meta(ge=0, le=2_419_200)] = 86_400
    push_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=60)] = 10.0
    # Accept push endpoints on private addresses and plain http (tests, LAN services).
    push_allow_private: bool = False
