"""`schedule`: the assistant creates and manages the member's jobs from plain language.

The description carries the member's time zone and current local time (built each turn,
as the tool list is), so "every weekday at 7:30" becomes `30 7 * * 1-5` in the right
zone and "tomorrow at 9" a correct ISO date-time. Errors come back as tool errors the
model can correct (the cron module's messages say what a valid expression looks like).

Rule: `run_now` is refused in unattended conversations (a job's run, a background task):
a run that starts runs would restart itself without end.

Trap: one mode per call; `job_id` is the member's own (another member's is "no such
job", never a hint that it exists).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from skald.agent.subagent import root_of
from skald.agent.tools import Tool, ToolContext, ToolResult, Touches
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.features.schedule.jobs import MAX_TITLE, JobChange, JobSpec
from skald.features.schedule.store import Job, parse_iso
from skald.features.schedule.zone import member_zone
from skald.llm.types import ToolSpec, tool_spec

if TYPE_CHECKING:
    from skald.features.schedule.scheduler import Scheduler
    from skald.plugins.facade import Member

__all__ = ["BackgroundTaskTool", "ScheduleTool", "describe_job"]

MODES = ("create", "list", "pause", "resume", "update", "run_now", "delete")
UNATTENDED_RUN_NOW = (
    "run_now is not available in a scheduled job's run or a background task: nobody is "
    "here to watch what it starts. Do not try again; if a job should run now, tell the "
    "user, who can start it from the Tasks page or ask for it in a chat."
)


def _spec(now_local: datetime, zone: str) -> ToolSpec:
    """The tool's spec for this hour in this zone: built once per (hour, zone), not at
    every turn (the description changes only with them; the spec is frozen)."""
    return _spec_for(f"{now_local:%A %Y-%m-%d %H}", zone)


@functools.lru_cache(maxsize=64)
def _spec_for(hour: str, zone: str) -> ToolSpec:
    return tool_spec(
        "schedule",
        "The user's scheduled jobs: a prompt you run by yourself later, once (`at`) or "
        "repeatedly (`cron`), each run in the job's own conversation. "
        # To the hour, as the prompt's DATETIME: a description that changed every minute
        # would make providers re-read the tools and the conversation each turn.
        f"The user's time zone is {zone}; it is {hour}:00 there "
        "(to the hour: for 'in N minutes' give `in_minutes` instead of `at`). "
        "`cron`: 'minute hour day-of-month month day-of-week' in that zone (weekdays at "
        "7:30 = '30 7 * * 1-5', Sunday 0; optional seconds first, year last; @daily...). "
        "`at`: local ISO date-time, e.g. 2027-03-01T09:00. `prompt`: your instruction at "
        "run time ('Remind the user to put the bins out'). Modes: create (title, prompt, "
        "cron/at/in_minutes), list, pause, resume, update (job_id + changes), run_now, "
        "delete (job_id).",
        {
            "mode": {"type": "string", "enum": list(MODES)},
            "job_id": {"type": "string"},
            "title": {"type": "string", "maxLength": MAX_TITLE},
            "prompt": {"type": "string", "maxLength": 8000},
            "cron": {"type": "string", "maxLength": 200},
            "at": {"type": "string", "maxLength": 64},
            "in_minutes": {"type": "integer", "minimum": 1, "maximum": 527040},
            "skip_after_minutes": {"type": "integer", "minimum": 0},
        },
        ["mode"],
    )


def describe_job(job: Job) -> str:
    when = f"cron '{job.cron}'" if job.cron else f"once at {job.run_at}"
    nxt = "never again"
    if job.next_run and job.state == "active":
        from zoneinfo import ZoneInfo

        nxt = parse_iso(job.next_run).astimezone(ZoneInfo(job.zone)).strftime("%Y-%m-%d %H:%M")
    return f"{job.id}: {job.title} [{job.state}] {when} ({job.zone}), next run {nxt}"


class ScheduleTool(Tool):
    kind = "other"
    concurrency_safe = False
    chat_only = True  # jobs are the member's conversation's business, not a helper's

    def __init__(self, member: Member, scheduler: Scheduler) -> None:
        self.member = member
        self.scheduler = scheduler
        zone = member_zone(member)
        self.spec = _spec(scheduler.clock.now().astimezone(zone), zone.key)

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        mode = args.get("mode")
        if mode == "run_now" and root_of(ctx.conversation_id)[0] in self.member.unattended:
            # A run that starts runs (its own job, or any) would run without end and
            # without anybody watching: only a person starts one.
            return ToolResult.error(UNATTENDED_RUN_NOW)
        try:
            return ToolResult(content=await self._run(str(mode), args, ctx.conversation_id))
        except (InvalidInputError, NotFoundError, ConflictError) as exc:
            return ToolResult.error(str(exc))

    async def _run(self, mode: str, args: dict[str, Any], conversation_id: str) -> str:
        jobs = await self.scheduler.jobs(self.member)
        job_id = str(args.get("job_id") or "")
        skip = args.get("skip_after_minutes")
        skip_s = None if skip is None else int(skip) * 60
        if args.get("in_minutes") and not args.get("at"):
            args = {**args, "at": self._minutes_from_now(int(args["in_minutes"]))}
        if mode == "create":
            # The job runs with the model of the conversation it was asked for in.
            origin = await self.member.conversations.store.get(root_of(conversation_id)[0])
            job = await jobs.create(
                JobSpec(
                    title=str(args.get("title") or ""),
                    prompt=str(args.get("prompt") or ""),
                    cron=args.get("cron") or None,
                    at=args.get("at") or None,
                    skip_after_s=skip_s,
                    model_id=origin.model_id,
                )
            )
            return f"Created job {describe_job(job)}"
        if mode == "list":
            listed = await jobs.list()
            return "\n".join(describe_job(j) for j in listed) or "No jobs."
        if not job_id:
            raise InvalidInputError(f"mode {mode!r} needs job_id (see mode 'list')")
        if mode == "pause":
            return f"Paused {describe_job(await jobs.pause(job_id))}"
        if mode == "resume":
            return f"Resumed {describe_job(await jobs.resume(job_id))}"
        if mode == "update":
            change = JobChange(
                title=args.get("title"),
                prompt=args.get("prompt"),
                cron=args.get("cron") or None,
                at=args.get("at") or None,
                skip_after_s=skip_s,
            )
            return f"Updated {describe_job(await jobs.change(job_id, change))}"
        if mode == "run_now":
            job = await jobs.get(job_id)
            run = await self.scheduler.run_now(self.member, job)
            return f"Started job {job.title} now (run {run.id}); it writes to its own conversation."
        if mode == "delete":
            await jobs.delete(job_id)
            return f"Deleted job {job_id}."
        raise InvalidInputError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")

    def _minutes_from_now(self, minutes: int) -> str:
        """`in_minutes` as the local ISO date-time `at` takes (the scheduler's clock)."""
        zone = member_zone(self.member)
        when = self.scheduler.clock.now().astimezone(zone) + timedelta(minutes=minutes)
        return when.strftime("%Y-%m-%dT%H:%M:%S")


_TASK_SPEC = tool_spec(
    "background_task",
    "Hand longer work to a background helper and keep talking. It sees nothing of this "
    "conversation, so `task` must say everything; its result, failure or cancellation "
    "comes back here as a message for you to relay. Modes: start (task, title), list, "
    "cancel (task_id). For an answer needed now use execute_task.",
    {
        "mode": {"type": "string", "enum": ["start", "list", "cancel"]},
        "task": {"type": "string", "maxLength": 20000},
        "title": {"type": "string", "maxLength": 120},
        "task_id": {"type": "string"},
    },
    ["mode"],
)


class BackgroundTaskTool(Tool):
    spec = _TASK_SPEC
    kind = "other"
    concurrency_safe = False
    chat_only = True  # a helper does its work itself rather than handing it on again

    def __init__(self, member: Member, scheduler: Scheduler) -> None:
        self.member = member
        self.scheduler = scheduler

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        tasks = self.scheduler.tasks
        mode = str(args.get("mode"))
        try:
            if mode == "start":
                origin, _ = root_of(ctx.conversation_id)
                task = await tasks.start(
                    self.member, origin, str(args.get("title") or ""), str(args.get("task") or "")
                )
                return ToolResult(
                    content=f"Started background task {task.id} ({task.title}). Its result "
                    "will arrive in this conversation; carry on with the user meanwhile."
                )
            if mode == "list":
                listed = await tasks.recent(self.member)
                return ToolResult(
                    content="\n".join(f"{t.id}: {t.title} [{t.state}]" for t in listed)
                    or "No background tasks."
                )
            if mode == "cancel":
                task = await tasks.cancel(self.member, str(args.get("task_id") or ""))
                return ToolResult(content=f"Task {task.id} is {task.state}.")
            raise InvalidInputError(f"unknown mode {mode!r}: use start, list or cancel")
        except (InvalidInputError, NotFoundError) as exc:
            return ToolResult.error(str(exc))
