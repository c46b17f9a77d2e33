"""The scheduler: finds due jobs of unlocked members and runs each as a turn.

Rule: one service (`run_forever`) ticks every `tick_s` on the injected clock; `tick()`
is what a test calls after moving a `FakeClock`. A due occurrence is claimed in one
transaction (the run row and the job's next time together, `ScheduleStore.claim`),
then the turn runs as one of the member's chores (`member.services`): sent through
the conversation service into the job's conversation, as the owner, written as any
turn is. Claimed, never run again: after a crash the run is `interrupted` and the job
goes on at its next time.

Locked members: a member's jobs are in their owner database, which is readable only
while their key is in memory. Jobs due while they are locked wait; at the first tick
after the unlock each runs once, marked late, unless it was missed by more than its
skip window (then the run is recorded `skipped`). Repeating jobs run once for all the
occurrences they missed.

Trap: the first time the scheduler sees a member's `Member` (their runtime builds one
per unlock: boot or unlock) it turns their left-over `running` runs into `interrupted`
before claiming anything: a run of the previous unlock was cancelled with their chores
when they were locked.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from skald.agent import TurnResult
from skald.core.conversations import Sent
from skald.core.unattended import CallPacer
from skald.errors import DatabaseClosedError
from skald.features.schedule.asking import DAY_S, RunAsking
from skald.features.schedule.clock import Clock, SystemClock
from skald.features.schedule.config import ScheduleConfig
from skald.features.schedule.cron import Schedule, check_zone
from skald.features.schedule.jobs import SCHEDULE_USE, Jobs
from skald.features.schedule.notices import notify
from skald.features.schedule.store import (
    Job,
    Run,
    ScheduleStore,
    get_min_interval,
    iso,
    parse_iso,
)
from skald.features.schedule.tasks import Tasks
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.core.services import ServiceSpec
    from skald.plugins.facade import Member, Server

__all__ = ["Scheduler"]

log = get_logger("skald.features.schedule")


class Scheduler:
    def __init__(self, server: Server, config: ScheduleConfig, clock: Clock | None = None) -> None:
        self.server = server
        self.config = config
        self.clock: Clock = clock or SystemClock()
        # The `Member` last checked for left-over runs, per member: their runtime builds
        # one per unlock, so a new object is a new unlock.
        self._seen: dict[str, Member] = {}
        # Runs started by this process and not yet recorded as ended (`wait_run`).
        self._running: dict[str, asyncio.Event] = {}
        # Each member's pace of unattended model calls, kept across their unlocks.
        self._pacers: dict[str, CallPacer] = {}
        self.tasks = Tasks(self)

    def pacer(self, member: Member) -> CallPacer:
        """The member's one budget of model calls in runs and tasks (on the scheduler's
        clock, which a test moves)."""
        pacer = self._pacers.get(member.id)
        if pacer is None:
            pacer = CallPacer(
                self.config.background_calls_per_min, lambda: self.clock.now().timestamp()
            )
            self._pacers[member.id] = pacer
        return pacer

    async def jobs(self, member: Member) -> Jobs:
        floor = await get_min_interval(self.server.db, member.id)
        return Jobs(member, self.config, self.server.db, self.clock.now(), floor)

    async def run_forever(self) -> None:
        # The first look is one tick after the start: by then the members unlocked at
        # boot are attached (and a test has injected its clock).
        while True:
            await self.clock.sleep(self.config.tick_s)
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler tick failed")

    async def tick(self) -> list[Run]:
        """Claim and start every due job of every unlocked member; returns the runs."""
        started: list[Run] = []
        for member in self.server.unlocked():
            if not member.can(SCHEDULE_USE):
                continue
            try:
                started += await self._member_tick(member)
            except DatabaseClosedError:
                continue  # locked meanwhile: their jobs wait for the next unlock
        return started

    async def _member_tick(self, member: Member) -> list[Run]:
        store = ScheduleStore(member.db)
        now = self.clock.now()
        if self._seen.get(member.id) is not member:
            self._seen[member.id] = member
            left = await store.interrupt_running(now)
            if left:
                log.warning("runs interrupted", user_id=member.id, count=left)
            await self._take_back_waiting(member, store)
            await self.tasks.recover(member)
        out = []
        for job in await store.due(now):
            run = await self._claim(store, job, now)
            if run is None:
                continue
            out.append(run)
            if run.outcome == "running":
                self._launch(member, job, run)
        return out

    async def _take_back_waiting(self, member: Member, store: ScheduleStore) -> None:
        """Runs a restart cut while they waited for an approval go on (not interrupted)."""
        for run in await store.waiting_runs():
            job = await store.get(run.job_id or "")
            if job is None:
                continue
            log.info("run waiting for an approval taken back", run=run.id, job=job.id)
            self.launch_chore(
                member, run.id, functools.partial(self.resume_waiting, member, job, run)
            )

    async def _claim(self, store: ScheduleStore, job: Job, now: datetime) -> Run | None:
        assert job.next_run is not None
        due = parse_iso(job.next_run)
        missed_by = (now - due).total_seconds()
        next_run: str | None = None
        if job.cron is not None:
            try:
                found = Schedule(job.cron).next_after(now, check_zone(job.zone))
            except Exception as exc:  # a stored expression that no longer parses
                log.error("job has a bad schedule", job=job.id, error=str(exc))
                found = None
            next_run = None if found is None else iso(found)
        # A run still going on makes this one `skipped` too: the store sees it.
        return await store.claim(
            job,
            now,
            next_run,
            late=missed_by > self.config.late_after_s,
            skipped=missed_by > job.skip_after_s and job.skip_after_s > 0,
        )

    def _launch(self, member: Member, job: Job, run: Run) -> None:
        self.launch_chore(member, run.id, lambda: self.execute(member, job, run))

    def launch_chore(self, member: Member, key: str, work: Callable[[], Awaitable[object]]) -> None:
        """Run `work` as one of the member's chores (stopped when they are locked);
        `wait_run(key)` waits for it."""
        from skald.core.services import ServiceSpec

        ended = self._running[key] = asyncio.Event()

        async def chore() -> None:
            try:
                await work()
            finally:
                ended.set()
                self._running.pop(key, None)

        spec: ServiceSpec = ServiceSpec(f"schedule-{key}", chore, restart=False)
        member.services.add(spec)

    async def run_now(self, member: Member, job: Job) -> Run:
        """A person's "run now": a run outside the schedule, which does not move.

        Refused while the job runs and within the member's minimum interval of its last
        start (`RunRefusedError`): a job cannot be made to run back to back."""
        spacing = (await self.jobs(member)).min_interval_s
        run = await ScheduleStore(member.db).start_run(job, self.clock.now(), spacing)
        self._launch(member, job, run)
        return run

    def _message(self, job: Job, run: Run) -> str:
        text = job.prompt
        if run.late and run.due_at is not None:
            zone = check_zone(job.zone)
            due = parse_iso(run.due_at).astimezone(zone).strftime("%Y-%m-%d %H:%M")
            text = (
                f"(This scheduled job was due at {due} {zone.key} and runs late: the "
                f"member's space was locked.)\n\n{text}"
            )
        return text

    def window_of(self, job: Job) -> float:
        """How long a run's approval request waits: the job's own window, else until its
        next occurrence (read after the claim moved it), at most 24 h, at least a minute."""
        if job.approval_window_s is not None:
            return float(job.approval_window_s)
        if job.cron is None or job.next_run is None:
            return float(DAY_S)
        until = (parse_iso(job.next_run) - self.clock.now()).total_seconds()
        return float(min(DAY_S, max(60.0, until)))

    async def _asking(self, member: Member, job: Job, run: Run) -> RunAsking:
        current = await ScheduleStore(member.db).get(job.id)
        return RunAsking(
            member,
            self.clock,
            kind="scheduled",
            title=job.title,
            conversation_id=job.conversation_id,
            table="runs",
            row_id=run.id,
            window_s=self.window_of(current or job),
        )

    async def execute(self, member: Member, job: Job, run: Run) -> Run | None:
        """Run the job's turn and record how it ended (the chore behind a claimed run).
        A reminder is no turn: its run is the notice with its own text."""
        if job.kind == "reminder":
            return await self._remind(member, job, run)
        user_id = member.id
        svc = self.server.conversations

        async def start() -> asyncio.Future[TurnResult]:
            await self._use_model(member, job)
            sent = await svc.send(user_id, job.conversation_id, self._message(job, run))
            assert isinstance(sent, Sent)  # a prompt is never a slash command here
            return sent.done

        return await self._attend(member, job, run, await self._asking(member, job, run), start)

    async def resume_waiting(self, member: Member, job: Job, run: Run) -> Run | None:
        """After a restart: a run that waited for an approval goes on. The chat recovery
        resumes the job's turn from its stored history (the open call goes through the
        gate again under the same id, so the Inbox item stays answerable and a decision
        made in between applies); this queues behind that resume and records the end.
        The call runs at most once: it never started before the approval."""
        asking = await self._asking(member, job, run)
        assert run.waiting_call is not None
        await asking.restore(run.waiting_call, run.waiting_until)

        async def start() -> asyncio.Future[TurnResult]:
            return await member.conversations.resume(job.conversation_id)

        return await self._attend(member, job, run, asking, start, resumed=True)

    async def _attend(
        self,
        member: Member,
        job: Job,
        run: Run,
        asking: RunAsking,
        start: Callable[[], Awaitable[asyncio.Future[TurnResult]]],
        *,
        resumed: bool = False,
    ) -> Run | None:
        store = ScheduleStore(member.db)
        user_id = member.id
        outcome, error, usage, answer = "failed", None, None, ""
        # Nobody watches, so the model calls are paced; a request waits in the Inbox.
        member.unattended.add(job.conversation_id, self.pacer(member), asking)
        try:
            if asking.ended is None:
                result = await (await start())
                usage, answer = result.usage, result.text
                if resumed and result.status == "done" and not answer:
                    answer = await self._last_answer(member, job.conversation_id)
                outcome, error = {
                    "done": ("succeeded", None),
                    "stopped": ("cancelled", result.error or "stopped"),
                }.get(result.status, ("failed", result.error or result.status))
            if asking.ended is not None:  # rejected, or expired unanswered
                outcome, error = "failed", asking.ended
        except DatabaseClosedError:
            raise  # locked under it: the next unlock marks the run interrupted
        except Exception as exc:
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            asking.close()
            member.unattended.discard(job.conversation_id)
        finished, current, paused = await store.finish(
            run.id,
            self.clock.now(),
            outcome,  # type: ignore[arg-type]
            error=error,
            cost_usd=None if usage is None else usage.cost_usd,
            input_tokens=0 if usage is None else usage.input_tokens,
            output_tokens=0 if usage is None else usage.output_tokens,
            keep=self.config.keep_runs,
            max_failures=self.config.max_failures,
        )
        if paused and current is not None:
            await (await self.jobs(member)).counts_changed()
            await notify(
                self.server,
                user_id,
                f"Job paused: {job.title}",
                f"It failed {current.failures} times in a row (last: {error}). "
                "Resume it on the Tasks page when it is fixed.",
                link="/tasks",
                urgency="high",
            )
        else:
            # The job's own words: its answer, or what went wrong (never "done").
            body = answer.strip() or job.prompt
            if outcome != "succeeded":
                body = f"{outcome}: {error or ''}".strip()
            await notify(
                self.server,
                user_id,
                job.title,
                body,
                link=f"/?c={job.conversation_id}",
                # An expired or refused approval: the member should learn it soon.
                urgency="high" if asking.ended is not None else "normal",
            )
        return finished

    @staticmethod
    async def _last_answer(member: Member, conversation_id: str) -> str:
        items = await member.conversations.store.items(conversation_id)
        return next((i.text for i in reversed(items) if i.role == "assistant" and i.text), "")

    async def _use_model(self, member: Member, job: Job) -> None:
        """The job's conversation runs with the job's model (the one it was made with,
        or chosen on the Tasks page; None: AUTO), whatever `/model` said there since."""
        conversation = await member.conversations.store.get(job.conversation_id)
        if conversation.model_id != job.model_id:
            await member.conversations.update(job.conversation_id, model_id=job.model_id)

    async def _remind(self, member: Member, job: Job, run: Run) -> Run | None:
        """A reminder's run: the member is told its text, as written; no model call."""
        finished, _, _ = await ScheduleStore(member.db).finish(
            run.id, self.clock.now(), "succeeded", keep=self.config.keep_runs
        )
        body = job.prompt
        if run.late and run.due_at is not None:
            due = parse_iso(run.due_at).astimezone(check_zone(job.zone)).strftime("%H:%M")
            body = f"{body} ({due})"
        await notify(self.server, member.id, f"⏰ {job.title}", body, link="/tasks",
                     urgency="high")  # fmt: skip
        return finished

    async def wait_run(self, run_id: str) -> None:
        """Until a run this process started has ended (at once if it is not running)."""
        ended = self._running.get(run_id)
        if ended is not None:
            await ended.wait()
