"""Spending caps: refuse a turn at 100 %, warn once at 80 %, before any model call.

Rule: one place decides, the turn's start (`skald_turn_starting`, which every channel's
turn passes: the web, `POST /api/chat` and `skald chat`, scheduled jobs, tasks). The
caps are read fresh from the registry at every turn, so an administrator raising a cap
unblocks the next turn at once. A member's own caps replace their role's as a whole.
Turns and tokens count whatever the model costs (a local model's zero cost still counts
turns and tokens).

When neither the member nor their role has a cap (most households), that answer is
kept (skald/store/kept.py, while `usage_caps` is not written) and the turn is counted
without the turn waiting for the write: no trip to the registry before the model
request. Setting a cap writes `usage_caps`, so the very next turn is judged in full.

Traps: the check runs before the turn, so one turn may still go past a token or cost cap
(the next one is refused); a turn cap is exact. A turn counted without waiting is on the
registry's one thread before any later turn's check (its write is sent first), so a
cap set meanwhile still counts it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from skald.errors import LimitReachedError
from skald.features.usage.store import MEASURES, Caps, Totals, UsageStore
from skald.log import get_logger
from skald.store.kept import KeptReads

log = get_logger("skald.usage")

WARN_AT = 0.8
PERIODS = ("day", "month")


@dataclass(frozen=True)
class Window:
    period: str  # day | month
    key: str  # day:2026-12-02 | month:2026-12
    start: float  # epoch seconds
    reset: datetime  # the next window's start, in the member's zone


def windows(now: datetime) -> tuple[Window, Window]:
    """Today and this month in the zone of `now` (an aware datetime)."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    next_day = (day + timedelta(days=1, hours=2)).replace(hour=0)  # DST-proof
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return (
        Window("day", f"day:{day:%Y-%m-%d}", day.timestamp(), next_day),
        Window("month", f"month:{month:%Y-%m}", month.timestamp(), next_month),
    )


_WHAT = {"turns": "messages", "tokens": "tokens", "cost": "spending"}


def _amount(measure: str, value: float) -> str:
    return f"${value:.2f}" if measure == "cost" else f"{int(value):,}"


def when(reset: datetime, now: datetime) -> str:
    """The reset time in plain words: 'at midnight (in 3 hours)', 'on 1 January'."""
    left = reset - now
    hours = int(left.total_seconds() // 3600)
    minutes = int(left.total_seconds() % 3600 // 60)
    soon = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    if left < timedelta(days=1):
        at = "midnight" if (reset.hour, reset.minute) == (0, 0) else f"{reset:%H:%M}"
        return f"at {at} (in {soon})"
    return f"on {reset.day} {reset:%B} at {reset:%H:%M}"


def refusal(measure: str, window: Window, limit: float, now: datetime) -> str:
    period = "daily" if window.period == "day" else "monthly"
    return (
        f"You have reached your {period} limit of {_amount(measure, limit)} "
        f"{_WHAT[measure]}. It resets {when(window.reset, now)}. "
        "An administrator can raise the limit."
    )


def warning(measure: str, window: Window, used: float, limit: float, now: datetime) -> str:
    period = "today's" if window.period == "day" else "this month's"
    return (
        f"You have used {_amount(measure, used)} of {period} {_amount(measure, limit)} "
        f"{_WHAT[measure]} (80 %). It resets {when(window.reset, now)}."
    )


def judge(
    caps: Caps, used: dict[str, Totals], wins: tuple[Window, ...], now: datetime
) -> tuple[str | None, list[tuple[Window, str, str]]]:
    """(the refusal, or None; the 80 % warnings due) for these totals."""
    warnings: list[tuple[Window, str, str]] = []
    for window in wins:
        totals = used[window.period]
        for measure in MEASURES:
            limit = caps.limit(window.period, measure)
            if limit <= 0:
                continue
            spent = totals.of(measure)
            if spent >= limit:
                return refusal(measure, window, limit, now), []
            if spent >= WARN_AT * limit:
                warnings.append((window, measure, warning(measure, window, spent, limit, now)))
    return None, warnings


def _counted(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and (error := done.exception()) is not None:
        log.warning("a turn was not counted in the usage figures", error=type(error).__name__)


class CapGate:
    """The server's cap check (a state slot): `check` refuses or warns, then counts."""

    def __init__(self, store: UsageStore, notify: object) -> None:
        self.store = store
        self.notify = notify  # NotificationService.notify (title=, body=, link=, urgency=)
        # By (member, role): no cap applies. Only that answer is kept.
        self._uncapped: KeptReads[tuple[str, str], bool] = KeptReads(
            store.db, frozenset({"usage_caps"}), keep=lambda uncapped: uncapped
        )

    async def check(self, user_id: str, role: str, zone: ZoneInfo) -> None:
        """Refuse (LimitReachedError) or count the turn, with its 80 % warnings: one
        transaction in the registry (`UsageStore.check_and_count`), then the notices;
        no trip when no cap applies (see the module's rule)."""
        if self._uncapped.kept((user_id, role)) is not None:
            self._count_soon(user_id)
            return
        now = datetime.now(zone)
        wins = windows(now)

        def decide(
            caps: Caps, day: Totals, month: Totals
        ) -> tuple[str | None, list[tuple[str, str, str]]]:
            refused, due = judge(caps, {"day": day, "month": month}, wins, now)
            return refused, [(window.key, measure, text) for window, measure, text in due]

        starts = (wins[0].start, wins[1].start)
        before = self._uncapped.before()
        refused, send, capped = await self.store.check_and_count(
            user_id, role, starts, time.time(), decide
        )
        self._uncapped.put((user_id, role), not capped, before)
        if refused is not None:
            raise LimitReachedError(refused)
        for text in send:
            await self._tell(user_id, text)

    def _count_soon(self, user_id: str) -> None:
        # Queued on the registry's thread now, so before any later check's transaction.
        self.store.count_turn(user_id, time.time()).add_done_callback(_counted)

    async def _tell(self, user_id: str, text: str) -> None:
        try:
            await self.notify(  # type: ignore[operator]
                user_id,
                title="Usage limit nearly reached",
                body=text,
                link="/usage",
                source="usage",
            )
        except Exception as exc:  # a failed notice must not cost the member their turn
            log.warning("usage warning not delivered", error=type(exc).__name__)
