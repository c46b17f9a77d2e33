"""Jobs: what members (through the `schedule` tool or the Tasks page) may do with theirs.

Rule: every change goes through `Jobs`, which checks the expression, the member's
limits (active jobs, minimum interval) and keeps the registry's counts current; the
tool and the routes only translate. Everything resolves in the member's own owner
database, so another member's job id is "not found".

Trap: the minimum interval is checked on the next runs as they fall in the job's own
zone: "every minute between 2 and 3" passes a sampled check only if the sample reaches
that hour, so the sample starts now and covers 48 runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

import msgspec

from skald.core.events import ConversationUpdated
from skald.errors import InvalidInputError, NotFoundError
from skald.permissions import declare
from skald.schedule.config import ScheduleConfig
from skald.schedule.cron import Schedule, check_zone, min_interval_s, parse_when
from skald.schedule.zone import member_zone
from skald.store.schedule import Job, ScheduleStore, iso, new_id, put_counts

if TYPE_CHECKING:
    from skald.core.user_runtime import UserRuntime
    from skald.store.database import Database

__all__ = ["SCHEDULE_USE", "JobChange", "JobSpec", "Jobs", "next_run_of"]

# Jobs, background tasks, the Tasks page and the `schedule` tool.
SCHEDULE_USE = declare("schedule.use", "Schedule jobs and background tasks")

MAX_PROMPT = 8000
MAX_TITLE = 200


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A new job: exactly one of `cron` and `at` (ISO date-time, local if no offset)."""

    title: str
    prompt: str
    cron: str | None = None
    at: str | None = None
    zone: str | None = None
    agent_id: str | None = None
    skip_after_s: int | None = None
    created_by: Literal["member", "system"] = "member"


class JobChange(msgspec.Struct, frozen=True, kw_only=True):
    title: str | None = None
    prompt: str | None = None
    cron: str | None = None
    at: str | None = None
    zone: str | None = None
    skip_after_s: int | None = None


def next_run_of(
    job_cron: str | None, run_at: str | None, zone: ZoneInfo, now: datetime
) -> str | None:
    if job_cron is not None:
        found = Schedule(job_cron).next_after(now, zone)
        return None if found is None else iso(found)
    return run_at


class Jobs:
    """One member's jobs, with the limits of `[schedule]` and the admin's overrides."""

    def __init__(
        self,
        member: UserRuntime,
        config: ScheduleConfig,
        registry_db: Database,
        now: datetime,
        min_interval_s: int | None = None,
    ) -> None:
        self.member = member
        self.store = ScheduleStore(member.handle.db)
        self.config = config
        self.registry_db = registry_db
        self.now = now
        self.min_interval_s = config.min_interval_s if min_interval_s is None else min_interval_s

    @property
    def user_id(self) -> str:
        return self.member.user.id

    async def counts_changed(self) -> None:
        jobs, active = await self.store.counts()
        await put_counts(self.registry_db, self.user_id, jobs, active)

    async def get(self, job_id: str) -> Job:
        job = await self.store.get(job_id)
        if job is None:
            raise NotFoundError("no such job")
        return job

    def _when(
        self, cron: str | None, at: str | None, zone: ZoneInfo
    ) -> tuple[str | None, str | None, str | None]:
        """(cron, run_at, next_run) for a job, checked."""
        if (cron is None) == (at is None):
            raise InvalidInputError("give exactly one of `cron` (repeating) and `at` (once)")
        if cron is not None:
            schedule = Schedule(cron)
            first = schedule.next_after(self.now, zone)
            if first is None:
                raise InvalidInputError(f"the cron expression {cron!r} never runs after now")
            gap = min_interval_s(schedule, zone, self.now)
            if gap < self.min_interval_s:
                raise InvalidInputError(
                    f"the cron expression {cron!r} runs every {gap:.0f} s; the shortest "
                    f"interval allowed is {self.min_interval_s} s"
                )
            return schedule.expr, None, iso(first)
        assert at is not None
        when = parse_when(at, zone)
        if when <= self.now:
            local = self.now.astimezone(zone).strftime("%Y-%m-%d %H:%M")
            raise InvalidInputError(f"{at!r} is in the past (it is now {local} in {zone.key})")
        return None, iso(when), iso(when)

    async def create(self, spec: JobSpec) -> Job:
        title = spec.title.strip()[:MAX_TITLE]
        prompt = spec.prompt.strip()
        if not title or not prompt:
            raise InvalidInputError("a job needs a title and a prompt")
        if len(prompt) > MAX_PROMPT:
            raise InvalidInputError(f"the prompt is longer than {MAX_PROMPT} characters")
        zone = check_zone(spec.zone) if spec.zone else member_zone(self.member)
        cron, run_at, next_run = self._when(spec.cron, spec.at, zone)
        agent_id = spec.agent_id or self.member.hub.default_agent
        agent = self.member.agents.get(agent_id)
        if agent is None or agent.type != "chat":
            raise InvalidInputError(f"no chat agent named {agent_id!r}")
        skip = self.config.default_skip_after_s if spec.skip_after_s is None else spec.skip_after_s
        if skip < 0:
            raise InvalidInputError("skip_after_s cannot be negative")
        stamp = iso(self.now)
        job = Job(
            id=new_id(),
            title=title,
            prompt=prompt,
            agent_id=agent_id,
            cron=cron,
            run_at=run_at,
            zone=zone.key,
            next_run=next_run,
            state="active",
            created_by=spec.created_by,
            conversation_id=new_id(),
            skip_after_s=skip,
            failures=0,
            created_at=stamp,
            updated_at=stamp,
        )
        # The job's own conversation, with the job's agent, every run writes there: it is
        # written with the job, after the active-jobs limit, in one transaction.
        await self.store.add(
            job, active_limit=self.config.max_active_jobs, conversation_title=f"⏰ {title}"
        )
        conversation = await self.member.hub.store.get(job.conversation_id)
        self.member.events.publish(self.user_id, ConversationUpdated(conversation=conversation))
        await self.counts_changed()
        return job

    async def list(self) -> list[Job]:
        return await self.store.jobs()

    async def pause(self, job_id: str) -> Job:
        job = await self.get(job_id)
        if job.state == "done":
            raise InvalidInputError("this job has already run and will not run again")
        updated = await self.store.update(job_id, state="paused")
        await self.counts_changed()
        assert updated is not None
        return updated

    async def resume(self, job_id: str) -> Job:
        job = await self.get(job_id)
        if job.state == "active":
            return job
        zone = check_zone(job.zone)
        if job.cron is None and job.run_at is not None and job.run_at <= iso(self.now):
            raise InvalidInputError(
                "this one-off job's time has passed: give it a new time with `at`"
            )
        next_run = next_run_of(job.cron, job.run_at, zone, self.now)
        updated = await self.store.update(
            job_id,
            active_limit=self.config.max_active_jobs,
            state="active",
            next_run=next_run,
            failures=0,
        )
        await self.counts_changed()
        assert updated is not None
        return updated

    async def change(self, job_id: str, change: JobChange) -> Job:
        job = await self.get(job_id)
        fields: dict[str, object] = {}
        if change.title is not None:
            if not change.title.strip():
                raise InvalidInputError("the title is empty")
            fields["title"] = change.title.strip()[:MAX_TITLE]
        if change.prompt is not None:
            if not change.prompt.strip() or len(change.prompt) > MAX_PROMPT:
                raise InvalidInputError(f"the prompt must be 1 to {MAX_PROMPT} characters")
            fields["prompt"] = change.prompt.strip()
        if change.skip_after_s is not None:
            if change.skip_after_s < 0:
                raise InvalidInputError("skip_after_s cannot be negative")
            fields["skip_after_s"] = change.skip_after_s
        zone = check_zone(change.zone) if change.zone else check_zone(job.zone)
        if change.cron is not None or change.at is not None or change.zone is not None:
            cron = change.cron if (change.cron or change.at) else job.cron
            at = change.at if (change.cron or change.at) else job.run_at
            cron, run_at, next_run = self._when(cron, at, zone)
            fields.update(cron=cron, run_at=run_at, zone=zone.key)
            if job.state != "paused":
                fields.update(next_run=next_run, state="active")
            else:
                fields["next_run"] = next_run
        # A finished one-off job given a new time becomes active: held to the limit.
        updated = await self.store.update(
            job_id, active_limit=self.config.max_active_jobs, **fields
        )
        await self.counts_changed()
        assert updated is not None
        return updated

    async def delete(self, job_id: str) -> None:
        if not await self.store.delete(job_id):
            raise NotFoundError("no such job")
        await self.counts_changed()
