"""Next-run times agree with a second, independent cron implementation (croniter) on a
corpus: croniter's own test expressions plus generated ones, in Europe/Rome,
America/New_York and Australia/Lord_Howe (a half-hour DST shift), started around the
spring-forward gaps and fall-back overlaps; one-off times; the year field and macros.

The one documented difference: on a fall-back day croniter runs a fixed-time job in both
passes of the repeated hour; Skald's rule (Debian cron's, cronsim's) is once. The
comparison drops croniter's second pass of the same wall-clock time for such jobs, and a
separate test pins "once" explicitly."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from skald.errors import InvalidInputError
from skald.features.schedule.cron import Schedule, min_interval_s, parse_when

ZONES = ("Europe/Rome", "America/New_York", "Australia/Lord_Howe")
# Local noon two days before each 2026 transition, and one ordinary day.
STARTS = {
    "Europe/Rome": [datetime(2026, 3, 27, 12), datetime(2026, 10, 23, 12), datetime(2026, 6, 1)],
    "America/New_York": [
        datetime(2026, 3, 6, 12),
        datetime(2026, 10, 30, 12),
        datetime(2026, 6, 1),
    ],
    "Australia/Lord_Howe": [
        datetime(2026, 4, 3, 12),
        datetime(2026, 10, 2, 12),
        datetime(2026, 1, 1),
    ],
}
CORPUS = [
    line.strip()
    for line in (Path(__file__).parent / "data" / "cron_corpus.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def _generated(n: int, seed: int = 14) -> list[str]:
    rnd = random.Random(seed)

    def field(lo: int, hi: int) -> str:
        kind = rnd.choice(["*", "n", "range", "step", "list"])
        if kind == "*":
            return "*"
        if kind == "n":
            return str(rnd.randint(lo, hi))
        if kind == "range":
            # Never `N-N`: croniter 7 misreads single-value ranges (see the corpus file).
            a = rnd.randint(lo, hi - 1)
            return f"{a}-{rnd.randint(a + 1, hi)}"
        if kind == "step":
            return f"*/{rnd.randint(2, max(2, (hi - lo) // 2))}"
        return ",".join(str(v) for v in sorted(rnd.sample(range(lo, hi + 1), 3)))

    out = []
    for _ in range(n):
        # Hours around the transitions (1-3) are over-represented on purpose.
        hour = rnd.choice([str(rnd.randint(1, 3)), field(0, 23)])
        out.append(f"{field(0, 59)} {hour} {field(1, 28)} {field(1, 12)} {field(0, 6)}")
    return out


def _fixed_time(expr: str) -> bool:
    if len(expr.split()) != 5:
        return False
    minute, hour = expr.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _croniter_runs(expr: str, start: datetime, count: int) -> list[datetime]:
    fields = expr.split()
    # Vixie/Debian cron: day-of-month and day-of-week are OR-ed only when neither starts
    # with `*` (so `*/2` in one of them means AND); croniter's default ORs unless `*`.
    day_or = len(fields) != 5 or not (fields[2].startswith("*") or fields[4].startswith("*"))
    it = croniter(expr, start, day_or=day_or)
    out: list[datetime] = []
    seen: set[datetime] = set()
    while len(out) < count:
        at = it.get_next(datetime)
        wall = at.replace(tzinfo=None)
        # croniter repeats a fixed time in the fall-back overlap; the rule is once.
        if _fixed_time(expr) and wall in seen:
            continue
        seen.add(wall)
        out.append(at)
    return out


def _ours(expr: str, start: datetime, zone: ZoneInfo, count: int) -> list[datetime]:
    return Schedule(expr).upcoming(start, zone, count)


def _agrees_with_croniter(expr: str, zone_name: str, count: int) -> int:
    """Our next `count` runs of `expr` from each of the zone's starts are croniter's; how
    many starts were checked."""
    zone = ZoneInfo(zone_name)
    checked = 0
    for start in STARTS[zone_name]:
        begin = start.replace(tzinfo=zone)
        ours = _ours(expr, begin, zone, count)
        theirs = _croniter_runs(expr, begin, len(ours))
        assert [t.astimezone(UTC) for t in ours] == [t.astimezone(UTC) for t in theirs], (
            expr,
            zone_name,
            start,
        )
        checked += 1
    return checked


@pytest.mark.parametrize("zone_name", ZONES)
def test_next_runs_agree_with_croniter_on_its_own_test_expressions(zone_name: str) -> None:
    checked = sum(_agrees_with_croniter(expr, zone_name, 8) for expr in CORPUS)
    assert checked == len(CORPUS) * 3


@pytest.mark.parametrize("zone_name", ZONES)
def test_next_runs_agree_with_croniter_on_generated_expressions(zone_name: str) -> None:
    for expr in _generated(60):
        _agrees_with_croniter(expr, zone_name, 6)


def test_a_single_value_range_with_a_step_means_that_one_value_as_debian_cron_reads_it() -> None:
    """`1-1/3` is the range 1..1 stepped by 3: January only (Vixie/Debian cron). croniter 7
    and cronsim before 2.9 read it as `1/3` (January, April, July, October)."""
    rome = ZoneInfo("Europe/Rome")
    runs = _ours("0 0 1 1-1/3 *", datetime(2026, 3, 27, 12, tzinfo=rome), rome, 2)
    assert [r.date().isoformat() for r in runs] == ["2027-01-01", "2028-01-01"]


def test_a_time_in_the_spring_forward_gap_runs_once_at_the_next_valid_time() -> None:
    rome = ZoneInfo("Europe/Rome")
    runs = _ours("30 2 * * *", datetime(2026, 3, 28, 12, tzinfo=rome), rome, 2)
    # 2026-03-29 02:30 does not exist in Rome: once, at 03:00 (the first valid instant).
    assert [r.isoformat() for r in runs] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    howe = ZoneInfo("Australia/Lord_Howe")  # moves by half an hour: 02:00 -> 02:30
    runs = _ours("15 2 * * *", datetime(2026, 10, 3, 12, tzinfo=howe), howe, 2)
    assert [r.isoformat() for r in runs] == [
        "2026-10-04T02:30:00+11:00",
        "2026-10-05T02:15:00+11:00",
    ]


@pytest.mark.parametrize(
    ("zone_name", "expr", "start"),
    [
        ("Europe/Rome", "30 2 * * *", datetime(2026, 10, 24, 12)),
        ("America/New_York", "30 1 * * *", datetime(2026, 10, 31, 12)),
        ("Australia/Lord_Howe", "45 1 * * *", datetime(2026, 4, 4, 12)),
    ],
)
def test_a_time_that_happens_twice_on_the_fall_back_day_runs_once(
    zone_name: str, expr: str, start: datetime
) -> None:
    zone = ZoneInfo(zone_name)
    runs = _ours(expr, start.replace(tzinfo=zone), zone, 3)
    days = [r.date() for r in runs]
    assert days == sorted(set(days)), runs  # one run per calendar day
    assert (runs[1] - runs[0]) > timedelta(hours=23)


def test_seconds_and_year_fields_and_the_macros() -> None:
    rome = ZoneInfo("Europe/Rome")
    start = datetime(2026, 5, 1, 8, 0, 0, tzinfo=rome)
    # Seconds first (6 fields).
    assert [r.second for r in _ours("*/20 * * * * *", start, rome, 3)] == [20, 40, 0]
    # A year field (7 fields): nothing before 2028, then every day at 07:30 of 2028.
    first = Schedule("0 30 7 * * * 2028").next_after(start, rome)
    assert first is not None and first.isoformat() == "2028-01-01T07:30:00+01:00"
    assert Schedule("0 30 7 * * * 2024-2025").next_after(start, rome) is None
    years = [r.year for r in Schedule("0 0 0 1 1 * */2").upcoming(start, rome, 3)]
    assert years == [2028, 2030, 2032]  # */2 counts from 1970
    # Macros agree with croniter's.
    for macro in ("@daily", "@hourly", "@weekly", "@monthly", "@yearly"):
        ours = _ours(macro, start, rome, 3)
        theirs = _croniter_runs(macro, start, 3)
        assert [t.astimezone(UTC) for t in ours] == [t.astimezone(UTC) for t in theirs]


def test_one_off_times_are_local_to_the_zone_unless_they_carry_an_offset() -> None:
    ny = ZoneInfo("America/New_York")
    assert parse_when("2026-07-04T09:00", ny) == datetime(2026, 7, 4, 13, 0, tzinfo=UTC)
    assert parse_when("2026-07-04T09:00+02:00", ny) == datetime(2026, 7, 4, 7, 0, tzinfo=UTC)
    # A one-off time in the spring-forward gap: the first valid instant after it.
    assert parse_when("2026-03-08T02:30", ny) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("", "empty"),
        ("30 7 * *", "4 fields"),
        ("61 7 * * *", "not valid"),
        ("30 7 * * 1-5 x y z", "8 fields"),
        ("@often", "unknown macro"),
        ("0 30 7 * * * 20x", "year field"),
        ("0 0 30 2 *", "not valid"),
    ],
)
def test_a_bad_expression_is_refused_with_a_sentence_the_model_can_act_on(
    expr: str, says: str
) -> None:
    with pytest.raises(InvalidInputError, match=says) as info:
        Schedule(expr)
    assert "minute hour day-of-month month day-of-week" in str(info.value) or says in (
        "unknown macro",
        "year field",
    )


def test_the_shortest_interval_is_measured_on_the_coming_runs() -> None:
    rome = ZoneInfo("Europe/Rome")
    now = datetime(2026, 5, 1, tzinfo=rome)
    assert min_interval_s(Schedule("*/5 * * * *"), rome, now) == 300
    assert min_interval_s(Schedule("* * * * * *"), rome, now) == 1
    assert min_interval_s(Schedule("30 7 * * 1-5"), rome, now) >= 86400 - 3600
