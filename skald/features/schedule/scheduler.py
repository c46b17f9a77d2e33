"""The scheduler: finds due jobs of unlocked members and runs each as a turn.

Rule: one service (`run_forever`) ticks every `tick_s` on the injected clock; `tick()`
is what a test calls after moving a `FakeClock`. A due occurrence is claimed in one
transaction (the run row and the job's next time together, `ScheduleStore.claim`),
then the turn runs as one of the member's chores (`UserRuntime.services`): sent through
the conversation service into the job's conversation, as the owner, written as any
turn is. Claimed, never run again: after a crash the run is `interrupted` and the job
goes on at its next time.

Locked members: a member's jobs are in their owner database, which is readable only
while their key is in memory. Jobs due while they are locked wait; at the first tick
after the unlock each runs once, marked late, unless it was missed by more than its
skip window (then the run is recorded `skipped`). Repeating jobs run once for all the
occurrences they missed.

Trap: the first time the scheduler sees a member's runtime (boot or unlock) it turns
their left-over `running` runs into `interrupted` before claiming anything: a run of
the previous unlock was cancelled with their chores when they were locked.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from skald.core.conversations import Sent
from skald.core.unattended import CallPacer
from skald.errors import DatabaseClosedError
from skald.features.schedule.clock import Clock, SystemClock
from skald.features.schedule.config import ScheduleConfig
from skald.features.schedule.cron import Schedule, check_zone
from skald.features.schedule.jobs import SCHEDULE_USE, Jobs
from skald.features.schedule.notices import notify
from skald.features.schedule.store import Job, Run, ScheduleStore, get_min_interval, iso, parse_iso
from skald.features.schedule.tasks import Tasks
from skald.log import get_logger
from skald.permissions import can

if TYPE_CHECKING:
    from skald.core.runtime import Runtime
    from skald.core.services import ServiceSpec
    from skald.core.user_runtime import UserRuntime
    from skald.plugins.manager import Plugins

__all__ = ["Scheduler", "find_scheduler", "scheduler_of"]

log = get_logger("skald.features.schedule")

# The scheduler of each running server, found from its plugin set (a member's tools see
# only their own runtime, which shares the server's `Plugins`).
_BY_PLUGINS: weakref.WeakKeyDictionary[Plugins, Scheduler] = weakref.WeakKeyDictionary()


def find_scheduler(plugins: Plugins) -> Scheduler | None:
    """The scheduler of the server these plugins belong to (None before it starts)."""
    return _BY_PLUGINS.get(plugins)


def scheduler_of(plugins: Plugins) -> Scheduler:
    scheduler = _BY_PLUGINS.get(plugins)
    if scheduler is None:
        raise RuntimeError("the scheduler is not running in this server")
    return scheduler


class Scheduler:
    def __init__(self, rt: Runtime, config: ScheduleConfig, clock: Clock | None = None) -> None:
        self.rt = rt
        self.config = config
        self.clock: Clock = clock or SystemClock()
        # The runtime object last checked for left-over runs, per member.
        self._seen: dict[str, UserRuntime] = {}
        # Runs started by this process and not yet recorded as ended (`wait_run`).
        self._running: dict[str, asyncio.Event] = {}
        # Each member's pace of unattended model calls, kept across their unlocks.
        self._pacers: dict[str, CallPacer] = {}
        _BY_PLUGINS[rt.plugins] = self
        self.tasks = Tasks(self)

    def pacer(self, member: UserRuntime) -> CallPacer:
        """The member's one budget of model calls in runs and tasks (on the scheduler's
        clock, which a test moves)."""
        pacer = self._pacers.get(member.user.id)
        if pacer is None:
            pacer = CallPacer(
                self.config.background_calls_per_min, lambda: self.clock.now().timestamp()
            )
            self._pacers[member.user.id] = pacer
        return pacer

    async def jobs(self, member: UserRuntime) -> Jobs:
        floor = await get_min_interval(self.rt.core.registry.db, member.user.id)
        return Jobs(member, self.config, self.rt.core.registry.db, self.clock.now(), floor)

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
        for member in list(self.rt.user_runtimes.values()):
            if not can(member.role, SCHEDULE_USE):
                continue
            try:
                started += await self._member_tick(member)
            except DatabaseClosedError:
                continue  # locked meanwhile: their jobs wait for the next unlock
        return started

    async def _member_tick(self, member: UserRuntime) -> list[Run]:
        store = ScheduleStore(member.handle.db)
        now = self.clock.now()
        if self._seen.get(member.user.id) is not member:
            self._seen[member.user.id] = member
            left = await store.interrupt_running(now)
            if left:
                log.warning("runs interrupted", user_id=member.user.id, count=left)
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

    def _launch(self, member: UserRuntime, job: Job, run: Run) -> None:
        self.launch_chore(member, run.id, lambda: self.execute(member, job, run))

    def launch_chore(
        self, member: UserRuntime, key: str, work: Callable[[], Awaitable[object]]
    ) -> None:
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

    async def run_now(self, member: UserRuntime, job: Job) -> Run:
        """A person's "run now": a run outside the schedule, which does not move.

        Refused while the job runs and within the member's minimum interval of its last
        start (`RunRefusedError`): a job cannot be made to run back to back."""
        spacing = (await self.jobs(member)).min_interval_s
        run = await ScheduleStore(member.handle.db).start_run(job, self.clock.now(), spacing)
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

    async def execute(self, member: UserRuntime, job: Job, run: Run) -> Run | None:
        """Run the job's turn and record how it ended (the chore behind a claimed run).
        A reminder is no turn: its run is the notice with its own text."""
        if job.kind == "reminder":
            return await self._remind(member, job, run)
        store = ScheduleStore(member.handle.db)
        user_id = member.user.id
        svc = self.rt.conversations
        outcome, error, usage, answer = "failed", None, None, ""
        # Nobody is there to approve, and the model calls are paced.
        member.unattended.add(job.conversation_id, self.pacer(member))
        try:
            await self._use_model(member, job)
            sent = await svc.send(user_id, job.conversation_id, self._message(job, run))
            assert isinstance(sent, Sent)  # a prompt is never a slash command here
            # Not `svc.wait`: the unattended gate refuses at once, so the turn never
            # waits for a person; its end is what the run records.
            result = await sent.done
            usage, answer = result.usage, result.text
            outcome, error = {
                "done": ("succeeded", None),
                "stopped": ("cancelled", result.error or "stopped"),
                "awaiting_approval": ("needs_approval", "waiting for an approval"),
            }.get(result.status, ("failed", result.error or result.status))
        except DatabaseClosedError:
            raise  # locked under it: the next unlock marks the run interrupted
        except Exception as exc:
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"[:2000]
        finally:
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
                self.rt,
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
            await notify(self.rt, user_id, job.title, body, link=f"/?c={job.conversation_id}")
        return finished

    async def _use_model(self, member: UserRuntime, job: Job) -> None:
        """The job's conversation runs with the job's model (the one it was made with,
        or chosen on the Tasks page; None: AUTO), whatever `/model` said there since."""
        conversation = await member.hub.store.get(job.conversation_id)
        if conversation.model_id != job.model_id:
            await member.hub.update(job.conversation_id, model_id=job.model_id)

    async def _remind(self, member: UserRuntime, job: Job, run: Run) -> Run | None:
        """A reminder's run: the member is told its text, as written; no model call."""
        finished, _, _ = await ScheduleStore(member.handle.db).finish(
            run.id, self.clock.now(), "succeeded", keep=self.config.keep_runs
        )
        body = job.prompt
        if run.late and run.due_at is not None:
            due = parse_iso(run.due_at).astimezone(check_zone(job.zone)).strftime("%H:%M")
            body = f"{body} ({due})"
        await notify(self.rt, member.user.id, f"⏰ {job.title}", body, link="/tasks",
                     urgency="high")  # fmt: skip
        return finished

    async def wait_run(self, run_id: str) -> None:
        """Until a run this process started has ended (at once if it is not running)."""
        ended = self._running.get(run_id)
        if ended is not None:
            await ended.wait()
