"""Whose time zone a job uses: the one accessor. The member's own (`timezone` in their
profile, an IANA name) when set and valid, else the household's (`[assistant]
timezone`). Instance defaults from the onboarding wizard plug in here.

Trap: `member.user` is the row as it was when their data was unlocked: a profile edit
applies to new jobs from their next unlock (existing jobs keep the zone they were
created in).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from skald.log import get_logger

if TYPE_CHECKING:
    from skald.core.user_runtime import UserRuntime

__all__ = ["member_zone"]

log = get_logger("skald.schedule")


def member_zone(member: UserRuntime) -> ZoneInfo:
    """The member's time zone (falls back to the household's)."""
    own = member.user.profile.get("timezone", "").strip()
    if own:
        try:
            return ZoneInfo(own)
        except (ZoneInfoNotFoundError, ValueError):
            log.warning("unknown time zone in a profile", user_id=member.user.id, zone=own[:60])
    return ZoneInfo(member.config.timezone)
