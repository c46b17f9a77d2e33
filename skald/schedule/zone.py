"""Whose time zone a job uses: the one accessor (the member's own setting will plug in
here; today the household's, `[assistant] timezone`)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from skald.core.user_runtime import UserRuntime

__all__ = ["member_zone"]


def member_zone(member: UserRuntime) -> ZoneInfo:
    """The member's time zone (falls back to the household's)."""
    return ZoneInfo(member.config.timezone)
