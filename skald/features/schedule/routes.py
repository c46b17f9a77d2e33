"""The Tasks page's API: the caller's jobs and their runs (capability `schedule.use`),
and the counts and limits admins see (`admin.users`; never a job's content).

Thin: parse, authorise, call `Jobs`/`Scheduler`, serialise. Another member's job id is
"not found". The handlers see the facade only: the caller as `Member` (what the
scheduler and `Jobs` take), the household through `Server` (the registry's schedule
counts through `server.db`, accounts through the core's `AccountService`, the "work while
signed out" key through `server.works_signed_out` / `set_works_signed_out`).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import msgspec
from litestar import delete, get, patch, post, put
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.core.accounts import AccountService
from skald.core.users import ADMIN_USERS
from skald.features.schedule.jobs import MAX_TITLE, SCHEDULE_USE, JobChange, Jobs, JobSpec, Preview
from skald.features.schedule.scheduler import Scheduler
from skald.features.schedule.store import (
    Job,
    Run,
    Task,
    all_counts,
    get_min_interval,
    set_min_interval,
)
from skald.features.schedule.words import lang_of
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.rows import effective_locale

# MINE: the guard of the group in ROUTES; ADMIN: the two admin routes' own.
MINE = [requires(SCHEDULE_USE)]
ADMIN = [requires(ADMIN_USERS)]


Title = Annotated[str, msgspec.Meta(max_length=MAX_TITLE)]
Prompt = Annotated[str, msgspec.Meta(max_length=8000)]
Cron = Annotated[str, msgspec.Meta(max_length=200)]
At = Annotated[str, msgspec.Meta(max_length=64)]
InMinutes = Annotated[int, msgspec.Meta(ge=1, le=527040)]
ModelId = Annotated[str, msgspec.Meta(max_length=100)]
Kind = Literal["prompt", "reminder"]
Window = Annotated[int, msgspec.Meta(ge=0, le=7 * 24 * 3600)]


class JobPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    state: Literal["active", "paused"] | None = None
    title: Title | None = None
    prompt: Prompt | None = None
    cron: Cron | None = None
    at: At | None = None
    in_minutes: InMinutes | None = None
    skip_after_s: Annotated[int, msgspec.Meta(ge=0)] | None = None
    kind: Kind | None = None
    # "": AUTO.
    model_id: ModelId | None = None
    # How long a run's approval request waits in the Inbox; 0: the default.
    approval_window_s: Window | None = None


class JobIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A job made on the Tasks page: what to do, and exactly one of `cron`, `at` (local
    date-time in the member's zone) and `in_minutes`. Title: the text's start if empty."""

    prompt: Prompt
    title: Title = ""
    kind: Kind = "reminder"
    cron: Cron | None = None
    at: At | None = None
    in_minutes: InMinutes | None = None
    model_id: ModelId | None = None
    approval_window_s: Window | None = None


class WhenIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A schedule to preview: the time fields of `JobIn` (and the model it would use)."""

    cron: Cron | None = None
    at: At | None = None
    in_minutes: InMinutes | None = None
    model_id: ModelId | None = None
    # Editing this job: it already holds its place if active (not counted twice).
    job_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class MemberCounts(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    username: str
    jobs: int
    active: int
    min_interval_s: int | None
    # A fact, not the key: this member lets their assistant work while signed out.
    works_signed_out: bool


class KeepKey(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # "Let my assistant work while I'm signed out": the key is kept, sealed, on disk.
    enabled: bool


class LimitsIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # The shortest interval this member's repeating jobs may have; null: the default.
    min_interval_s: Annotated[int, msgspec.Meta(ge=1, le=366 * 86_400)] | None = None


# The caller's scheduler, facade and jobs: the `mine` dependency of the member's routes.
Mine = tuple[Scheduler, Member, Jobs]


async def _jobs(server: NamedDependency[Server], member: NamedDependency[Member]) -> Mine:
    scheduler = server.state(Scheduler)
    return scheduler, member, await scheduler.jobs(member)


class JobView(Job, frozen=True, kw_only=True):
    # When it runs, in words, in the caller's language ("every weekday at 7:30").
    when_text: str = ""


@get("/api/schedule/jobs")
async def list_jobs(request: AuthRequest, mine: NamedDependency[Mine]) -> list[JobView]:
    _, member, jobs = mine
    lang = _lang(request, member)
    return [
        JobView(**msgspec.structs.asdict(job), when_text=jobs.words(job, lang))
        for job in await jobs.list()
    ]


def _lang(request: AuthRequest, member: Member) -> str:
    # The caller's row as this request read it (their facade's is as at their unlock).
    household = member.server.instance.current.language
    return lang_of(effective_locale(request.user.user.locale, household))


def _title(data: JobIn) -> str:
    """The given title, else the first line of what to do (cut at 60 characters)."""
    lines = data.prompt.strip().splitlines()
    title = data.title.strip() or (lines[0] if lines else "")
    return title if len(title) <= 60 else title[:59].rstrip() + "…"


@post("/api/schedule/preview", status_code=200, responses=errors(400, 404))
async def preview_schedule(
    data: JSONBody[WhenIn],
    request: AuthRequest,
    mine: NamedDependency[Mine],
) -> Preview:
    """When a job with this schedule would run (the next 3 runs and a plain sentence,
    in the caller's zone and language), with the checks of creating it: a time in the
    past, a bad cron, an interval under the minimum, the active-jobs limit: 400."""
    _, member, jobs = mine
    spec = JobSpec(
        title="-",
        prompt="-",
        cron=data.cron or None,
        at=data.at or None,
        in_minutes=data.in_minutes,
        model_id=data.model_id or None,
    )
    counted = True
    if data.job_id:
        counted = (await jobs.get(data.job_id)).state != "active"
    return await jobs.preview(spec, _lang(request, member), count_limit=counted)


@post("/api/schedule/jobs", status_code=201, responses=errors(400))
async def create_job(data: JSONBody[JobIn], mine: NamedDependency[Mine]) -> Job:
    """A job from the Tasks page (a `reminder` notifies its text; a `prompt` is a turn)."""
    _, _, jobs = mine
    return await jobs.create(
        JobSpec(
            title=_title(data),
            prompt=data.prompt,
            kind=data.kind,
            cron=data.cron or None,
            at=data.at or None,
            in_minutes=data.in_minutes,
            model_id=data.model_id or None,
            approval_window_s=data.approval_window_s,
        )
    )


@patch("/api/schedule/jobs/{job_id:str}", responses=errors(400, 404))
async def change_job(
    job_id: FromPath[str],
    data: JSONBody[JobPatch],
    mine: NamedDependency[Mine],
) -> Job:
    _, _, jobs = mine
    # The patch's fields by their names (`state` is not one: it is applied below).
    job = await jobs.change(job_id, msgspec.convert(data, JobChange, from_attributes=True))
    if data.state == "paused":
        job = await jobs.pause(job_id)
    elif data.state == "active":
        job = await jobs.resume(job_id)
    return job


@post("/api/schedule/jobs/{job_id:str}/run", status_code=202, responses=errors(404, 409))
async def run_job(job_id: FromPath[str], mine: NamedDependency[Mine]) -> Run:
    scheduler, member, jobs = mine
    return await scheduler.run_now(member, await jobs.get(job_id))


@delete("/api/schedule/jobs/{job_id:str}", status_code=204, responses=errors(404))
async def delete_job(job_id: FromPath[str], mine: NamedDependency[Mine]) -> None:
    _, _, jobs = mine
    await jobs.delete(job_id)


@get("/api/schedule/jobs/{job_id:str}/runs", responses=errors(404))
async def job_runs(job_id: FromPath[str], mine: NamedDependency[Mine]) -> list[Run]:
    _, _, jobs = mine
    await jobs.get(job_id)
    return await jobs.store.runs(job_id)


@get("/api/schedule/runs")
async def recent_runs(mine: NamedDependency[Mine]) -> list[Run]:
    _, _, jobs = mine
    return await jobs.store.runs(None, limit=50)


@get("/api/schedule/tasks")
async def list_tasks(mine: NamedDependency[Mine]) -> list[Task]:
    scheduler, member, _ = mine
    return await scheduler.tasks.recent(member)


@post("/api/schedule/tasks/{task_id:str}/cancel", responses=errors(404))
async def cancel_task(task_id: FromPath[str], mine: NamedDependency[Mine]) -> Task:
    scheduler, member, _ = mine
    return await scheduler.tasks.cancel(member, task_id)


@get("/api/admin/schedule", guards=ADMIN)
async def admin_counts(server: NamedDependency[Server]) -> list[MemberCounts]:
    db = server.db
    counts = await all_counts(db)
    out = []
    for user in await server.state(AccountService).registry.list_users():
        jobs, active = counts.get(user.id, (0, 0))
        out.append(
            MemberCounts(
                user_id=user.id,
                username=user.username,
                jobs=jobs,
                active=active,
                min_interval_s=await get_min_interval(db, user.id),
                works_signed_out=await asyncio.to_thread(server.works_signed_out, user.id),
            )
        )
    return out


@put(
    "/api/admin/schedule/{user_id:str}/limits", guards=ADMIN, status_code=204, responses=errors(404)
)
async def admin_limits(
    user_id: FromPath[str], data: JSONBody[LimitsIn], server: NamedDependency[Server]
) -> None:
    await server.state(AccountService).get(user_id)  # NotFoundError: "no such user"
    await set_min_interval(server.db, user_id, data.min_interval_s)


@get("/api/schedule/keep-key")
async def get_keep_key(request: AuthRequest, server: NamedDependency[Server]) -> KeepKey:
    user = request.user.user
    return KeepKey(enabled=await asyncio.to_thread(server.works_signed_out, user.id))


@put("/api/schedule/keep-key", responses=errors(400))
async def put_keep_key(
    data: JSONBody[KeepKey], request: AuthRequest, server: NamedDependency[Server]
) -> KeepKey:
    user = request.user.user
    await server.set_works_signed_out(user, data.enabled)
    return KeepKey(enabled=await asyncio.to_thread(server.works_signed_out, user.id))


ROUTES = [
    group(
        get_keep_key,
        put_keep_key,
        list_tasks,
        cancel_task,
        list_jobs,
        preview_schedule,
        create_job,
        change_job,
        run_job,
        delete_job,
        job_runs,
        recent_runs,
        guards=MINE,
        dependencies={"mine": Provide(_jobs)},
    ),
    admin_counts,
    admin_limits,
]
