"""Whose time zone a job uses: the one accessor, `Member.timezone()` (the member's own
`timezone` in their profile when valid, else the household's from the Settings page,
else `[assistant] timezone`).

Trap: `member.user` is the row as it was when their data was unlocked: a profile edit
applies to new jobs from their next unlock (existing jobs keep the zone they were
created in).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from skald.plugins.facade import Member

__all__ = ["member_zone"]


def member_zone(member: Member) -> ZoneInfo:
    """The member's time zone (falls back to the household's)."""
    return member.timezone()
