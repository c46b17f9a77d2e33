"""When a job runs next: cron expressions and one-off times, in the member's time zone.

Rule: the expression arithmetic is `cronsim`'s (a small, typed, maintained library that
implements Debian cron's daylight-saving rules); this module only chooses the field
layout, adds the optional year field, checks the minimum interval and turns errors into
sentences a model can act on. Accepted forms:

- 5 fields `minute hour day-of-month month day-of-week` (standard cron);
- 6 fields: `second` first, then the five;
- 7 fields: `second`, the five, then `year` (e.g. `2027` or `2027-2030` or `*/2`);
- the macros `@yearly @annually @monthly @weekly @daily @midnight @hourly`;
- `L` (last day of month), `LW`, `6L`, `1#2` (cronsim's extensions).

Daylight saving (fixed-time 5-field jobs, as Debian cron): a time that does not exist on
the spring-forward day runs once, at the first valid instant after the gap; a time that
happens twice on the fall-back day runs once, on its first pass. Jobs more frequent than
hourly (a `*` or step in the minute or hour field) run on absolute time instead.

Trap: `CronSim` takes a timezone-aware start and answers in the same zone; the scheduler
stores UTC. Give it the member's zone, never UTC, or "7:30" drifts by the DST offset.
Trap: cronsim's iterator is unbounded: an expression that never matches (30 February)
raises at parse time, but a year field with only past years would loop; `next_after`
stops at the last listed year.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from skald.errors import InvalidInputError

__all__ = ["MACROS", "Schedule", "check_zone", "min_interval_s", "next_after", "parse_when"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
YEAR_MIN, YEAR_MAX = 1970, 2199
_FIELD_HELP = (
    "use 5 fields 'minute hour day-of-month month day-of-week' (e.g. '30 7 * * 1-5' for "
    "weekdays at 7:30), or 6 with seconds first, or 7 with seconds first and a year last"
)


def check_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInputError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Rome"
        ) from None


def _years(text: str) -> frozenset[int] | None:
    """The year field: `*`, `2027`, `2027-2030`, `*/2`, `2026-2040/5`, comma lists."""
    if text == "*":
        return None
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"(\*|\d{4})(?:-(\d{4}))?(?:/(\d+))?", part)
        if m is None:
            raise InvalidInputError(f"bad year field {text!r}: use e.g. 2027, 2027-2030 or */2")
        lo = YEAR_MIN if m[1] == "*" else int(m[1])
        hi = int(m[2]) if m[2] else (YEAR_MAX if m[1] == "*" or m[3] else lo)
        step = int(m[3]) if m[3] else 1
        if not (YEAR_MIN <= lo <= hi <= YEAR_MAX) or step < 1:
            raise InvalidInputError(
                f"bad year field {text!r}: years go from {YEAR_MIN} to {YEAR_MAX}, low to high"
            )
        out.update(range(lo, hi + 1, step))
    return frozenset(out)


class Schedule:
    """A parsed cron expression: the part cronsim reads and the optional years."""

    def __init__(self, expr: str) -> None:
        text = " ".join(expr.split())
        if not text:
            raise InvalidInputError(f"the cron expression is empty: {_FIELD_HELP}")
        text = MACROS.get(text.lower(), text)
        if text.startswith("@"):
            raise InvalidInputError(
                f"unknown macro {text.split()[0]!r}: use one of {', '.join(MACROS)} or fields"
            )
        fields = text.split(" ")
        if len(fields) not in (5, 6, 7):
            raise InvalidInputError(
                f"the cron expression {expr!r} has {len(fields)} fields: {_FIELD_HELP}"
            )
        self.years = _years(fields[6]) if len(fields) == 7 else None
        self.cron = " ".join(fields[:6])
        self.expr = text
        try:
            # Parsing happens in the constructor; the start time is irrelevant here.
            CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise InvalidInputError(
                f"the cron expression {expr!r} is not valid ({exc}): {_FIELD_HELP}"
            ) from None
        except (ValueError, IndexError):
            raise InvalidInputError(
                f"the cron expression {expr!r} is not valid: {_FIELD_HELP}"
            ) from None

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """The first run strictly after `after` (aware), in `zone`, or None if never."""
        start = after.astimezone(zone)
        while True:
            if self.years is not None:
                later = [y for y in self.years if y >= start.year]
                if not later:
                    return None
                if min(later) > start.year:
                    start = datetime(min(later), 1, 1, tzinfo=zone) - timedelta(seconds=1)
            found = self._next(start, zone)
            if found is None:
                return None
            if self.years is None or found.year in self.years:
                return found
            start = datetime(found.year + 1, 1, 1, tzinfo=zone) - timedelta(seconds=1)

    @property
    def fixed_time(self) -> bool:
        """Debian cron's "fixed time" job: 5 fields, minute and hour without `*`."""
        fields = self.cron.split(" ")
        if len(fields) != 5:
            return False
        return not fields[0].startswith("*") and not fields[1].startswith("*")

    def _next(self, start: datetime, zone: ZoneInfo) -> datetime | None:
        """The first instant after `start` whose wall-clock time in `zone` matches.

        cronsim matches the fields on the naive wall clock; the wall times are mapped to
        instants here. (cronsim's own aware iteration was checked against croniter on the
        corpus and skipped runs after Lord Howe's half-hour shift and a fixed 02:01 on a
        spring-forward day, so its DST handling is not used.)"""
        wall = start.astimezone(zone).replace(tzinfo=None) - timedelta(hours=3)
        best: datetime | None = None
        for w in CronSim(self.cron, wall):
            first = w.replace(tzinfo=zone).astimezone(UTC)
            if first.astimezone(zone).replace(tzinfo=None) != w:
                # In a spring-forward gap: a fixed-time job runs once, at the first valid
                # instant after the gap; a frequent one simply has no such minute.
                if not self.fixed_time:
                    continue
                first = _gap_end(w, zone)
                candidates = [first]
            elif self.fixed_time:
                candidates = [first]  # a repeated hour: the first pass only
            else:
                candidates = [first, w.replace(tzinfo=zone, fold=1).astimezone(UTC)]
            if best is not None and first >= best:
                break
            for instant in candidates:
                if instant > start and (best is None or instant < best):
                    best = instant
        return None if best is None else best.astimezone(zone)

    def upcoming(self, after: datetime, zone: ZoneInfo, count: int) -> list[datetime]:
        out: list[datetime] = []
        at: datetime | None = after
        for _ in range(count):
            assert at is not None
            at = self.next_after(at, zone)
            if at is None:
                break
            out.append(at)
        return out


def _gap_end(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant whose wall-clock time in `zone` is at or after `wall` (a wall
    time inside a spring-forward gap): the moment the clocks jumped."""
    at = wall.replace(tzinfo=zone, fold=1).astimezone(UTC).replace(second=0)
    while at.astimezone(zone).replace(tzinfo=None) < wall:
        at += timedelta(minutes=1)
    return at


def min_interval_s(schedule: Schedule, zone: ZoneInfo, start: datetime, sample: int = 48) -> float:
    """The shortest gap between runs over the next `sample` runs (inf for fewer than two).

    Sampled, not proven: a rule like "every second on the 1st" shows its smallest gap in
    the first runs anyway, which is what a limit needs."""
    times = list(islice(iter(schedule.upcoming(start, zone, sample)), sample))
    if len(times) < 2:
        return float("inf")
    return min((b - a).total_seconds() for a, b in pairwise(times))


def parse_when(text: str, zone: ZoneInfo) -> datetime:
    """A one-off time: ISO 8601 with or without an offset (then local to `zone`)."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"{text!r} is not a date-time: use ISO 8601 such as 2027-03-01T07:30"
        ) from None
    if at.tzinfo is not None:
        return at.astimezone(UTC)
    utc = at.replace(tzinfo=zone).astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != at:
        return _gap_end(at, zone)  # in a spring-forward gap: as a cron job runs
    return utc


def next_after(expr: str, after: datetime, zone: ZoneInfo) -> datetime | None:
    return Schedule(expr).next_after(after, zone)
