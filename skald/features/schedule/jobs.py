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

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

import msgspec

from skald.core.events import ConversationUpdated
from skald.errors import InvalidInputError, NotFoundError
from skald.features.schedule.config import ScheduleConfig
from skald.features.schedule.cron import Schedule, check_zone, min_interval_s, parse_when
from skald.features.schedule.store import (
    ActiveLimitError,
    Job,
    JobKind,
    ScheduleStore,
    iso,
    new_id,
    parse_iso,
    put_counts,
)
from skald.features.schedule.words import describe, phrase, when_text
from skald.features.schedule.zone import member_zone
from skald.permissions import declare

if TYPE_CHECKING:
    from skald.plugins.facade import Member
    from skald.store.database import Database

__all__ = ["SCHEDULE_USE", "JobChange", "JobSpec", "Jobs", "Preview", "next_run_of"]

# Jobs, background tasks, the Tasks page and the `schedule` tool.
SCHEDULE_USE = declare("schedule.use", "Schedule jobs and background tasks")

MAX_PROMPT = 8000
MAX_TITLE = 200
MAX_IN_MINUTES = 366 * 24 * 60
PREVIEW_RUNS = 3


MAX_WINDOW_S = 7 * 24 * 3600


def _window(seconds: int | None) -> int | None:
    """A job's approval window as given (None or 0: the default)."""
    if not seconds:
        return None
    if not 60 <= seconds <= MAX_WINDOW_S:
        raise InvalidInputError(
            "approval_window_s must be between 60 seconds and 7 days (0: the default)"
        )
    return seconds


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A new job: exactly one of `cron`, `at` (ISO date-time, local if no offset) and
    `in_minutes` (from now); `model_id` None: AUTO."""

    title: str
    prompt: str
    cron: str | None = None
    at: str | None = None
    in_minutes: int | None = None
    zone: str | None = None
    agent_id: str | None = None
    skip_after_s: int | None = None
    created_by: Literal["member", "system"] = "member"
    kind: JobKind = "prompt"
    model_id: str | None = None
    # How long a run's approval request waits in the Inbox (None: until the next
    # occurrence, at most 24 h).
    approval_window_s: int | None = None


class JobChange(msgspec.Struct, frozen=True, kw_only=True):
    title: str | None = None
    prompt: str | None = None
    cron: str | None = None
    at: str | None = None
    in_minutes: int | None = None
    zone: str | None = None
    skip_after_s: int | None = None
    kind: JobKind | None = None
    # "" : back to AUTO; None: unchanged.
    model_id: str | None = None
    # 0: back to the default (until the next occurrence, at most 24 h).
    approval_window_s: int | None = None


class Preview(msgspec.Struct, frozen=True, kw_only=True):
    """When a job would run, for people: the rule and its next runs in the member's
    language and the job's zone (`next_runs` are the same instants, UTC)."""

    description: str
    next_runs: list[str]
    next_runs_text: list[str]
    zone: str


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
        member: Member,
        config: ScheduleConfig,
        registry_db: Database,
        now: datetime,
        min_interval_s: int | None = None,
    ) -> None:
        self.member = member
        self.store = ScheduleStore(member.db)
        self.config = config
        self.registry_db = registry_db
        self.now = now
        self.min_interval_s = config.min_interval_s if min_interval_s is None else min_interval_s

    @property
    def user_id(self) -> str:
        return self.member.id

    async def counts_changed(self) -> None:
        jobs, active = await self.store.counts()
        await put_counts(self.registry_db, self.user_id, jobs, active)

    async def get(self, job_id: str) -> Job:
        job = await self.store.get(job_id)
        if job is None:
            raise NotFoundError("no such job")
        return job

    def _at_in(self, minutes: int | None, at: str | None, zone: ZoneInfo) -> str | None:
        """`in_minutes` as the local date-time `at` takes (on the scheduler's clock)."""
        if minutes is None:
            return at
        if at is not None:
            raise InvalidInputError("give either `at` or `in_minutes`, not both")
        if not 1 <= minutes <= MAX_IN_MINUTES:
            raise InvalidInputError(f"`in_minutes` must be 1 to {MAX_IN_MINUTES}")
        when = (self.now + timedelta(minutes=minutes)).astimezone(zone)
        return when.replace(tzinfo=None).isoformat(timespec="seconds")

    async def model_of(self, model_id: str | None) -> str | None:
        """A model a job may run with (an enabled chat model), or None for AUTO."""
        if not model_id:
            return None
        models = await self.member.server.llm.store.models()
        if not any(m.id == model_id and m.enabled and m.kind == "chat" for m in models):
            raise InvalidInputError(f"no chat model {model_id!r} is set up")
        return model_id

    async def preview(self, spec: JobSpec, lang: str, *, count_limit: bool = True) -> Preview:
        """When `spec` would run, with the checks `create` makes of its time and limits
        (nothing written): the Tasks page shows it before saving."""
        zone = check_zone(spec.zone) if spec.zone else member_zone(self.member)
        at = self._at_in(spec.in_minutes, spec.at, zone)
        cron, _, first = self._when(spec.cron, at, zone)
        _, active = await self.store.counts()
        if count_limit and active >= self.config.max_active_jobs:
            raise ActiveLimitError(active, self.config.max_active_jobs)
        await self.model_of(spec.model_id)
        return self.preview_of(cron, first, zone, lang)

    def preview_of(self, cron: str | None, first: str | None, zone: ZoneInfo, lang: str) -> Preview:
        runs = [] if first is None else [parse_iso(first)]
        if cron is not None:
            schedule = Schedule(cron)
            while runs and len(runs) < PREVIEW_RUNS:
                found = schedule.next_after(runs[-1], zone)
                if found is None:
                    break
                runs.append(found)
        now = self.now.astimezone(zone)
        texts = [when_text(r.astimezone(zone), now, lang) for r in runs]
        if cron is None:
            words = phrase(lang, "once", w=texts[0]) if texts else ""
        else:
            rule = describe(cron, lang)
            words = phrase(lang, "next", d=rule, w=texts[0]) if texts else rule
        return Preview(
            description=words,
            next_runs=[iso(r) for r in runs],
            next_runs_text=texts,
            zone=zone.key,
        )

    def words(self, job: Job, lang: str) -> str:
        """When `job` runs, in words ("every weekday at 7:30", "once, tomorrow at 9:00")."""
        if job.cron is not None:
            return describe(job.cron, lang)
        if job.run_at is None:
            return ""
        zone = check_zone(job.zone)
        at = when_text(parse_iso(job.run_at).astimezone(zone), self.now.astimezone(zone), lang)
        return phrase(lang, "once", w=at)

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
        at = self._at_in(spec.in_minutes, spec.at, zone)
        cron, run_at, next_run = self._when(spec.cron, at, zone)
        model_id = await self.model_of(spec.model_id)
        agent_id = spec.agent_id or self.member.conversations.default_agent
        agent = self.member.agents.get(agent_id)
        if agent is None or agent.type != "chat":
            raise InvalidInputError(f"no chat agent named {agent_id!r}")
        skip = self.config.default_skip_after_s if spec.skip_after_s is None else spec.skip_after_s
        if skip < 0:
            raise InvalidInputError("skip_after_s cannot be negative")
        window = _window(spec.approval_window_s)
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
            kind=spec.kind,
            model_id=model_id,
            approval_window_s=window,
        )
        # The job's own conversation, with the job's agent, every run writes there: it is
        # written with the job, after the active-jobs limit, in one transaction.
        await self.store.add(
            job, active_limit=self.config.max_active_jobs, conversation_title=f"⏰ {title}"
        )
        conversation = await self.member.conversations.store.get(job.conversation_id)
        self.member.server.events.publish(
            self.user_id, ConversationUpdated(conversation=conversation)
        )
        await self.counts_changed()
        return job

    async def list(self) -> list[Job]:
        return await self.store.jobs()

    async def pause(self, job_id: str) -> Job:
        job = await self.get(job_id)
        if job.state == "done":
            raise InvalidInputError("this job has already run and will not run again")
        return await self._update(job_id, state="paused")

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
        return await self._update(job_id, state="active", next_run=next_run, failures=0)

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
        if change.kind is not None:
            fields["kind"] = change.kind
        if change.approval_window_s is not None:
            fields["approval_window_s"] = _window(change.approval_window_s)
        if change.model_id is not None:
            fields["model_id"] = await self.model_of(change.model_id)
        zone = check_zone(change.zone) if change.zone else check_zone(job.zone)
        new_at = self._at_in(change.in_minutes, change.at, zone)
        if change.cron is not None or new_at is not None or change.zone is not None:
            cron = change.cron if (change.cron or new_at) else job.cron
            at = new_at if (change.cron or new_at) else job.run_at
            cron, run_at, next_run = self._when(cron, at, zone)
            fields.update(cron=cron, run_at=run_at, zone=zone.key)
            if job.state != "paused":
                fields.update(next_run=next_run, state="active")
            else:
                fields["next_run"] = next_run
        return await self._update(job_id, **fields)

    async def _update(self, job_id: str, **fields: object) -> Job:
        """Write a change of a job that exists, then tell the counts. A change that makes
        it active (a resume; a finished one-off given a new time) is held to the limit."""
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
