"""Quiet hours: from `start` to `end` local time (over midnight when end < start).

Local time is the wall clock in the member's zone (the household's unless they chose
one), so a 22:00-07:00 window follows daylight-saving changes. Start equal to end is
refused (it would mean "never" or "always"; nobody means either).
"""

from __future__ import annotations

import re
from datetime import datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from skald.errors import InvalidInputError
from skald.features.notifications.store import QuietHours

__all__ = ["check_quiet", "default_zone", "is_quiet"]

_HHMM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")


def _parse(value: str, what: str) -> time:
    m = _HHMM.fullmatch(value)
    if m is None:
        raise InvalidInputError(f"quiet hours: {what} must be a time such as 22:00, got {value!r}")
    return time(int(m[1]), int(m[2]))


def check_quiet(quiet: QuietHours) -> QuietHours:
    """The quiet hours as given, or InvalidInputError saying what is wrong."""
    if _parse(quiet.start, "start") == _parse(quiet.end, "end"):
        raise InvalidInputError("quiet hours: start and end are the same time")
    if quiet.timezone is not None:
        try:
            ZoneInfo(quiet.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInputError(
                f"quiet hours: unknown timezone {quiet.timezone!r} (e.g. Europe/Rome)"
            ) from None
    return quiet


def _zone(quiet: QuietHours, household: str) -> ZoneInfo:
    return ZoneInfo(quiet.timezone or household)


def default_zone(profile_zone: str | None, household: str) -> str:
    """The zone of quiet hours without one of their own: the member's (`timezone` in
    their profile, as the scheduler reads it) when it is a real zone, else the
    household's."""
    name = (profile_zone or "").strip()
    if name:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            return household
        return name
    return household


def is_quiet(quiet: QuietHours | None, now: datetime, household: str) -> bool:
    if quiet is None:
        return False
    start, end = _parse(quiet.start, "start"), _parse(quiet.end, "end")
    local = now.astimezone(_zone(quiet, household)).time().replace(tzinfo=None)
    if start < end:
        return start <= local < end
    return local >= start or local < end
