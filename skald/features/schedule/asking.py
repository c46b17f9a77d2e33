"""Approvals of background work: a job's run or a task asks the member through the Inbox.

Rule: a run or task is added to the member's `Unattended` with a `RunAsking`, so its
turn (and its helpers) get the member's own gate: a Require waits in the Inbox like a
chat's, through the one approval path (`UserRuntime._on_request` writes the row,
`UserRuntime.decide` resolves it). This object only adds what background work needs:

- `requested`: the label (`Scheduled: <job>` / `Task: <title>`, the Inbox translates it)
  and a deadline (`window_s` from the first ask; the same call asked again on recovery
  keeps the stored one), written on the run or task row (`waiting_call`,
  `waiting_until`: the Tasks page shows it as waiting) and watched by a timer on the
  scheduler's clock.
- `decided`: approving clears the wait and the turn goes on; rejecting (or the deadline,
  which rejects through `member.expire` with its reason) stops the turn, and the run
  ends `failed` with that reason (`ended`).

Trap: the timer calls `member.expire` (the one decision path, `UserRuntime.decide`),
which calls `decided` on this very object: it must not cancel itself there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from skald.agent.approval import ApprovalRequest
from skald.core.unattended import Origin
from skald.errors import DatabaseClosedError, NotFoundError
from skald.features.schedule.store import ScheduleStore, iso, parse_iso
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.features.schedule.clock import Clock
    from skald.plugins.facade import Member

__all__ = ["DAY_S", "RunAsking", "span"]

log = get_logger("skald.features.schedule")

DAY_S = 24 * 3600


def span(seconds: float) -> str:
    """A window in words: "45 minutes", "3 hours", "1 day"."""
    seconds = int(seconds)
    if seconds >= DAY_S and seconds % DAY_S == 0:
        n, unit = seconds // DAY_S, "day"
    elif seconds >= 3600:
        n, unit = round(seconds / 3600), "hour"
    else:
        n, unit = max(1, round(seconds / 60)), "minute"
    return f"{n} {unit}{'' if n == 1 else 's'}"


class RunAsking:
    """One run's (or one task's) requests waiting for the member."""

    def __init__(
        self,
        member: Member,
        clock: Clock,
        *,
        kind: Literal["scheduled", "task"],
        title: str,
        conversation_id: str,
        table: Literal["runs", "tasks"],
        row_id: str,
        window_s: float,
        on_waiting: Callable[[], None] | None = None,
    ) -> None:
        self.member = member
        self.clock = clock
        self.kind: Literal["scheduled", "task"] = kind
        self.title = title
        self.conversation_id = conversation_id
        self.table: Literal["runs", "tasks"] = table
        self.row_id = row_id
        self.window_s = window_s
        self.on_waiting = on_waiting  # called (no arguments) when the wait starts or ends
        self.call: str | None = None
        self.tool = "a tool"
        self.until: datetime | None = None
        # Why the run must end failed (a rejection or an expiry); None: it goes on.
        self.ended: str | None = None
        self._timer: asyncio.Task[None] | None = None

    # -- the Asking protocol (core/unattended.py) ----------------------------------------

    async def requested(self, request: ApprovalRequest) -> Origin:
        if request.call_id != self.call or self.until is None:
            self.call, self.until = (
                request.call_id,
                self.clock.now() + timedelta(seconds=self.window_s),
            )
        self.tool = request.tool
        await self._store(self.call, self.until)
        self._arm()
        return Origin(kind=self.kind, title=self.title, expires_at=iso(self.until))

    async def decided(self, call_id: str, tool: str, approved: bool, reason: str) -> None:
        if call_id == self.call:
            self._disarm()
            self.call, self.until = None, None
            await self._store(None, None)
        if approved:
            return
        self.ended = reason or f"you rejected the request to use {tool}"
        with contextlib.suppress(NotFoundError):
            await self.member.conversations.stop(self.conversation_id)

    # -- after a restart -------------------------------------------------------------------

    async def restore(self, call_id: str, until: str | None) -> None:
        """Take back a wait a restart cut: the same call and deadline (an expired one
        expires now); a decision made before this (the Inbox answers at once after a
        restart) is applied here, as `decided` would have."""
        self.call = call_id
        self.until = parse_iso(until) if until else self.clock.now()
        item = await self.member.inbox_item(call_id)
        if item is not None:
            self.tool = item.tool
        status = await self.member.inbox_status(call_id)
        if status == "rejected":
            await self.decided(call_id, self.tool, False, "")
        elif status in ("approved", "settled"):
            await self.decided(call_id, self.tool, True, "")
        else:
            self._arm()

    def close(self) -> None:
        self._disarm()

    # -- the deadline ----------------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        assert self.call is not None and self.until is not None
        self._timer = asyncio.create_task(
            self._expire(self.call, self.until), name=f"approval-expiry-{self.call}"
        )

    def _disarm(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def _expire(self, call_id: str, until: datetime) -> None:
        while (left := (until - self.clock.now()).total_seconds()) > 0:
            await self.clock.sleep(min(left, 60.0))
        reason = (
            f"the approval request for {self.tool} expired: nobody answered within "
            f"{span(self.window_s)}"
        )
        log.info("approval expired", call=call_id, run=self.row_id)
        try:
            # The one path of a decision: gate, Inbox row, and back here (`decided`).
            await self.member.expire(call_id, reason)
        except NotFoundError:
            await self.decided(call_id, self.tool, False, reason)
        except DatabaseClosedError:
            return  # locked meanwhile: the next unlock takes the wait back

    async def _store(self, call_id: str | None, until: datetime | None) -> None:
        store = ScheduleStore(self.member.db)
        await store.set_waiting(
            self.table, self.row_id, call_id, None if until is None else iso(until)
        )
        if self.on_waiting is not None:
            self.on_waiting()
