"""Scheduled jobs and their runs, in the member's owner database; counts in the registry.

A job is a prompt the assistant runs by itself, into the job's own conversation, at the
times of a cron expression or once at a date-time. A run is one execution of a job (or
of a background task): start, end, outcome, cost and the conversation written to.

Rule: claiming a run is one transaction (`claim_due`): the run row is written
`running` and the job's `next_run` moves past now together, so a crash after the claim
never runs that occurrence again; start-up turns the left-over `running` rows into
`interrupted` (`interrupt_running`). Times are UTC text `YYYY-MM-DDTHH:MM:SSZ`, so the
due query compares strings on an index.

Trap: the registry's `schedule_counts` holds numbers only (admins see counts, never
contents); it is refreshed after every change of a member's jobs, from their open
database, so a locked member's count is the last one written.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict, Unpack
from zoneinfo import ZoneInfo

import apsw
import msgspec

from skald.errors import ConflictError, InvalidInputError
from skald.store.conversations import insert_conversation
from skald.store.database import Database, changed, fetch_all, fetch_one
from skald.store.migrations import Feature, Migration

__all__ = [
    "JOBS_FEATURE",
    "SCHEDULE_COUNTS",
    "ActiveLimitError",
    "Job",
    "JobKind",
    "JobState",
    "Run",
    "RunOutcome",
    "RunRefusedError",
    "ScheduleStore",
    "Task",
    "TaskEnd",
    "TaskState",
    "TaskStore",
    "iso",
    "parse_iso",
]

JobState = Literal["active", "paused", "done"]
RunOutcome = Literal[
    "running", "succeeded", "failed", "interrupted", "skipped", "cancelled", "needs_approval"
]
CreatedBy = Literal["member", "system"]
JobKind = Literal["prompt", "reminder"]

_OWNER_V1 = """
CREATE TABLE schedule_jobs(
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    prompt TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    cron TEXT,
    run_at TEXT,
    zone TEXT NOT NULL,
    next_run TEXT,
    state TEXT NOT NULL CHECK (state IN ('active', 'paused', 'done')),
    created_by TEXT NOT NULL CHECK (created_by IN ('member', 'system')),
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    skip_after_s INTEGER NOT NULL CHECK (skip_after_s >= 0),
    failures INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK ((cron IS NULL) != (run_at IS NULL))
) WITHOUT ROWID;
CREATE INDEX schedule_jobs_due ON schedule_jobs(state, next_run);
CREATE TABLE schedule_runs(
    id TEXT PRIMARY KEY,
    job_id TEXT REFERENCES schedule_jobs(id) ON DELETE CASCADE,
    task_id TEXT,
    due_at TEXT,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    outcome TEXT NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed',
        'interrupted', 'skipped', 'cancelled', 'needs_approval')),
    late INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    cost_usd REAL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    conversation_id TEXT
) WITHOUT ROWID;
CREATE INDEX schedule_runs_job ON schedule_runs(job_id, started_at);
CREATE INDEX schedule_runs_running ON schedule_runs(outcome) WHERE outcome = 'running';
CREATE TABLE schedule_tasks(
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    prompt TEXT NOT NULL,
    origin_conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    state TEXT NOT NULL
        CHECK (state IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    result TEXT,
    error TEXT,
    relayed INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    ended_at TEXT
) WITHOUT ROWID;
CREATE INDEX schedule_tasks_state ON schedule_tasks(state, relayed);
"""

_REGISTRY_V1 = """
CREATE TABLE schedule_counts(
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    jobs INTEGER NOT NULL,
    active INTEGER NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE schedule_limits(
    user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    min_interval_s INTEGER NOT NULL CHECK (min_interval_s >= 1)
) WITHOUT ROWID;
"""

# Every write that changes what a claim would do bumps `version` (member changes, claims,
# the pause after failures), so a claim made with a copy read before it records nothing.
_OWNER_V2_VERSION = "ALTER TABLE schedule_jobs ADD COLUMN version INTEGER NOT NULL DEFAULT 0;"

# A job's kind ('prompt': a turn of the assistant; 'reminder': the text is notified as
# it is, no model) and the model it runs with (NULL: AUTO), chosen where it was made.
_OWNER_V3_KIND_MODEL = """
ALTER TABLE schedule_jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'prompt'
    CHECK (kind IN ('prompt', 'reminder'));
ALTER TABLE schedule_jobs ADD COLUMN model_id TEXT;
"""

# Approvals of background work wait in the Inbox: how long a job's request may wait
# (NULL: until its next occurrence, at most 24 h), and the call a run or a task waits
# for with its deadline (NULL when it waits for nobody). A run that waits stays
# 'running' (one run per job at a time still holds); `waiting_call` is what the Tasks
# page shows as "waiting for your approval" and what a restart takes back.
_OWNER_V4_WAITING = """
ALTER TABLE schedule_jobs ADD COLUMN approval_window_s INTEGER
    CHECK (approval_window_s IS NULL OR approval_window_s >= 60);
ALTER TABLE schedule_runs ADD COLUMN waiting_call TEXT;
ALTER TABLE schedule_runs ADD COLUMN waiting_until TEXT;
ALTER TABLE schedule_tasks ADD COLUMN waiting_call TEXT;
ALTER TABLE schedule_tasks ADD COLUMN waiting_until TEXT;
"""

JOBS_FEATURE = Feature(
    "schedule",
    (
        Migration(1, "jobs, runs and background tasks", _OWNER_V1),
        Migration(2, "a version per job, checked by the claim", _OWNER_V2_VERSION),
        Migration(3, "a job's kind (prompt or reminder) and its model", _OWNER_V3_KIND_MODEL),
        Migration(4, "approvals of runs and tasks wait in the Inbox", _OWNER_V4_WAITING),
    ),
    after=("chat",),
)
SCHEDULE_COUNTS = Feature(
    "schedule",
    (Migration(1, "job counts and limits per member", _REGISTRY_V1),),
    after=("accounts",),
)

_FMT = "%Y-%m-%dT%H:%M:%SZ"


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime(_FMT)


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, _FMT).replace(tzinfo=UTC)


class Job(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    title: str
    prompt: str
    agent_id: str
    cron: str | None
    run_at: str | None
    zone: str
    next_run: str | None
    state: JobState
    created_by: CreatedBy
    conversation_id: str
    skip_after_s: int
    failures: int
    created_at: str
    updated_at: str
    # Bumped by every change a claim depends on (`ScheduleStore.claim` checks it).
    version: int = 0
    # 'reminder': a run notifies the member with `prompt` as it is, with no model call.
    kind: JobKind = "prompt"
    # The model its runs use (the one of the conversation it was made in); None: AUTO.
    model_id: str | None = None
    # How long a run's approval request waits in the Inbox; None: until the next
    # occurrence, at most 24 h (`Scheduler.window_of`).
    approval_window_s: int | None = None


class Run(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    job_id: str | None
    task_id: str | None
    due_at: str | None
    started_at: str
    ended_at: str | None
    outcome: RunOutcome
    late: bool
    error: str | None
    cost_usd: float | None
    input_tokens: int
    output_tokens: int
    conversation_id: str | None
    # While the run waits for the member's approval: the call and its deadline.
    waiting_call: str | None = None
    waiting_until: str | None = None


TaskState = Literal["queued", "running", "completed", "failed", "cancelled"]


class TaskEnd(TypedDict, total=False):
    """What a task's move writes beside its state (`TaskStore.move`): when it ended, its
    answer, its error; one left out, or None, keeps what is stored."""

    now: str | None
    result: str | None
    error: str | None


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """A background task: a helper's work in its own conversation, for another one."""

    id: str
    title: str
    prompt: str
    origin_conversation: str
    conversation_id: str
    state: TaskState
    result: str | None
    error: str | None
    relayed: bool
    created_at: str
    ended_at: str | None
    # While the task waits for the member's approval: the call and its deadline.
    waiting_call: str | None = None
    waiting_until: str | None = None


_TASK_COLS = (
    "id, title, prompt, origin_conversation, conversation_id, state, result, error, "
    "relayed, created_at, ended_at, waiting_call, waiting_until"
)


def _task(r: tuple[Any, ...]) -> Task:
    d = dict(zip(_TASK_COLS.split(", "), r, strict=True))
    d["relayed"] = bool(d["relayed"])
    return Task(**d)


_JOB_COLS = (
    "id, title, prompt, agent_id, cron, run_at, zone, next_run, state, created_by, "
    "conversation_id, skip_after_s, failures, created_at, updated_at, version, kind, model_id, "
    "approval_window_s"
)
_RUN_COLS = (
    "id, job_id, task_id, due_at, started_at, ended_at, outcome, late, error, cost_usd, "
    "input_tokens, output_tokens, conversation_id, waiting_call, waiting_until"
)


# What a new run row is written with (it waits for nobody yet).
_RUN_NEW = _RUN_COLS.removesuffix(", waiting_call, waiting_until")


def _job(r: tuple[Any, ...]) -> Job:
    return Job(**dict(zip(_JOB_COLS.split(", "), r, strict=True)))


def _run(r: tuple[Any, ...]) -> Run:
    d = dict(zip(_RUN_COLS.split(", "), r, strict=True))
    d["late"] = bool(d["late"])
    return Run(**d)


def new_id() -> str:
    return secrets.token_hex(8)


class ActiveLimitError(InvalidInputError):
    """The member's active-jobs limit is reached (checked in the write's own statement)."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__(
            f"you have {active} active jobs, the most allowed is {limit}: pause or delete one first"
        )


class RunRefusedError(ConflictError):
    """A "run now" the job's state refuses: a run is going on, or one started too lately."""


_ACTIVE = "SELECT count(*) FROM schedule_jobs WHERE state='active'"


def _active(c: apsw.Connection) -> int:
    row = fetch_one(c, _ACTIVE)
    return 0 if row is None else int(row[0])


class ScheduleStore:
    """One member's jobs and runs (their owner database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, job: Job, *, active_limit: int, conversation_title: str) -> Job:
        """Write the job and its own new conversation, in one transaction that first
        counts the active jobs: parallel creates cannot both take the last place."""
        values = tuple(msgspec.structs.astuple(job))

        def step(c: apsw.Connection) -> None:
            if job.state == "active" and (active := _active(c)) >= active_limit:
                raise ActiveLimitError(active, active_limit)
            insert_conversation(c, job.conversation_id, job.agent_id, conversation_title)
            c.execute(
                f"INSERT INTO schedule_jobs({_JOB_COLS}) VALUES ({','.join('?' * len(values))})",
                values,
            )

        await self.db.transaction(step)
        return job

    async def get(self, job_id: str) -> Job | None:
        row = await self.db.fetch_one(
            f"SELECT {_JOB_COLS} FROM schedule_jobs WHERE id=?", (job_id,)
        )
        return None if row is None else _job(row)

    async def jobs(self) -> list[Job]:
        rows = await self.db.fetch_all(
            f"SELECT {_JOB_COLS} FROM schedule_jobs ORDER BY created_at, id"
        )
        return [_job(r) for r in rows]

    async def counts(self) -> tuple[int, int]:
        """(jobs, active jobs)."""
        jobs, active = await self.db.fetch_ints(
            "SELECT count(*), coalesce(sum(state='active'), 0) FROM schedule_jobs"
        )
        return jobs, active

    async def update(
        self, job_id: str, *, active_limit: int | None = None, **fields: object
    ) -> Job | None:
        """Change a job (None: no such job). A change that makes it active is held to
        `active_limit` in the UPDATE's own WHERE, so two parallel ones cannot both pass."""
        if not fields:
            return await self.get(job_id)
        activating = fields.get("state") == "active"
        if activating and active_limit is None:
            raise TypeError("a change that makes a job active needs the active_limit")
        fields["updated_at"] = iso(datetime.now(UTC))
        sets = ", ".join(f"{n}=?" for n in fields)
        where, params = "id=?", (*fields.values(), job_id)
        if activating:
            where += f" AND (state='active' OR ({_ACTIVE}) < ?)"
            params = (*params, active_limit)

        def step(c: apsw.Connection) -> tuple[Any, ...] | None:
            c.execute(f"UPDATE schedule_jobs SET {sets}, version=version+1 WHERE {where}", params)
            changed = c.changes()
            row = fetch_one(c, f"SELECT {_JOB_COLS} FROM schedule_jobs WHERE id=?", (job_id,))
            if row is not None and changed == 0:
                assert active_limit is not None
                raise ActiveLimitError(_active(c), active_limit)
            return row

        row = await self.db.transaction(step)
        return None if row is None else _job(row)

    async def delete(self, job_id: str) -> bool:
        sql = "DELETE FROM schedule_jobs WHERE id=?"
        return await self.db.call(lambda c: changed(c, sql, (job_id,)))

    async def due(self, now: datetime) -> list[Job]:
        rows = await self.db.fetch_all(
            f"SELECT {_JOB_COLS} FROM schedule_jobs "
            "WHERE state='active' AND next_run <= ? ORDER BY next_run",
            (iso(now),),
        )
        return [_job(r) for r in rows]

    async def next_due(self) -> str | None:
        row = await self.db.fetch_one(
            "SELECT min(next_run) FROM schedule_jobs WHERE state='active'"
        )
        return None if row is None else row[0]

    async def claim(
        self, job: Job, now: datetime, next_run: str | None, *, late: bool, skipped: bool
    ) -> Run | None:
        """Take one due occurrence: write its run and move the job on, in one transaction.

        None when the job changed since `job` was read (its `version`: a concurrent
        claim, an edit, a pause and resume): the copy is out of date, nothing is written.
        The run is `skipped` past the skip window, and while another run of the job is
        still `running` (a job never has two runs at once)."""
        run_id = new_id()
        stamp = iso(now)
        state = job.state if job.cron is not None or next_run is not None else "done"

        def step(c: apsw.Connection) -> Run | None:
            c.execute(
                "UPDATE schedule_jobs SET next_run=?, state=?, updated_at=?, version=version+1 "
                "WHERE id=? AND version=? AND state='active' AND next_run=?",
                (next_run, state, stamp, job.id, job.version, job.next_run),
            )
            if c.changes() == 0:
                return None
            reason = BUSY if _running(c, job.id) else SKIPPED if skipped else None
            c.execute(
                f"INSERT INTO schedule_runs({_RUN_NEW}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    job.id,
                    None,
                    job.next_run,
                    stamp,
                    None if reason is None else stamp,
                    "running" if reason is None else "skipped",
                    int(late),
                    reason,
                    None,
                    0,
                    0,
                    job.conversation_id,
                ),
            )
            return _fetch_run(c, run_id)

        return await self.db.transaction(step)

    async def start_task_run(self, task: Task, now: datetime) -> Run:
        run_id = new_id()
        values = (run_id, None, task.id, None, iso(now), None, "running", 0, None, None, 0, 0,
                  task.conversation_id)  # fmt: skip

        def step(c: apsw.Connection) -> Run:
            c.execute(
                f"INSERT INTO schedule_runs({_RUN_NEW}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                values,
            )
            row = fetch_one(c, f"SELECT {_RUN_COLS} FROM schedule_runs WHERE id=?", (run_id,))
            assert row is not None
            return _run(row)

        return await self.db.transaction(step)

    async def start_run(self, job: Job, now: datetime, spacing_s: int) -> Run:
        """A run asked for by a person (run now): the schedule does not move.

        Refused (`RunRefusedError`), in the same transaction as the write, while a run
        of the job is going on, and within `spacing_s` of the start of its last run
        that was not skipped: parallel requests cannot start two runs."""
        run_id = new_id()
        values = (run_id, job.id, None, None, iso(now), None, "running", 0, None, None, 0, 0,
                  job.conversation_id)  # fmt: skip

        def step(c: apsw.Connection) -> Run:
            if _running(c, job.id):
                raise RunRefusedError(f"{job.title!r} is running now: wait for that run to end")
            last = fetch_one(
                c,
                "SELECT max(started_at) FROM schedule_runs WHERE job_id=? AND outcome!='skipped'",
                (job.id,),
            )
            if last is not None and last[0] is not None:
                again = parse_iso(last[0]) + timedelta(seconds=spacing_s)
                if now < again:
                    local = again.astimezone(ZoneInfo(job.zone)).strftime("%H:%M:%S")
                    raise RunRefusedError(
                        f"{job.title!r} ran less than {spacing_s} s ago: it can run again "
                        f"from {local} ({job.zone})"
                    )
            c.execute(
                f"INSERT INTO schedule_runs({_RUN_NEW}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                values,
            )
            return _fetch_run(c, run_id)

        return await self.db.transaction(step)

    async def finish(
        self,
        run_id: str,
        now: datetime,
        outcome: RunOutcome,
        *,
        error: str | None = None,
        cost_usd: float | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        keep: int = 50,
        max_failures: int = 0,
    ) -> tuple[Run | None, Job | None, bool]:
        """Close a run; count the job's failures in a row; keep its last `keep` runs.

        Returns the run (None: its job was deleted meanwhile, and its runs with it), the
        job as it is now, and whether this run paused the job (`max_failures` failures
        in a row; 0 never pauses)."""

        def step(c: apsw.Connection) -> tuple[Run | None, Job | None, bool]:
            c.execute(
                "UPDATE schedule_runs SET ended_at=?, outcome=?, error=?, cost_usd=?, "
                "input_tokens=?, output_tokens=?, waiting_call=NULL, waiting_until=NULL "
                "WHERE id=? AND outcome='running'",
                (iso(now), outcome, error, cost_usd, input_tokens, output_tokens, run_id),
            )
            row = fetch_one(c, f"SELECT {_RUN_COLS} FROM schedule_runs WHERE id=?", (run_id,))
            if row is None:
                return None, None, False
            run = _run(row)
            paused = False
            job = None
            if run.job_id is not None:
                if outcome == "failed":
                    c.execute(
                        "UPDATE schedule_jobs SET failures=failures+1 WHERE id=?", (run.job_id,)
                    )
                elif outcome == "succeeded":
                    c.execute("UPDATE schedule_jobs SET failures=0 WHERE id=?", (run.job_id,))
                if max_failures > 0:
                    c.execute(
                        "UPDATE schedule_jobs SET state='paused', updated_at=?, "
                        "version=version+1 WHERE id=? AND state='active' AND failures>=?",
                        (iso(now), run.job_id, max_failures),
                    )
                    paused = c.changes() > 0
                _prune(c, run.job_id, keep)
                jr = fetch_one(
                    c, f"SELECT {_JOB_COLS} FROM schedule_jobs WHERE id=?", (run.job_id,)
                )
                job = None if jr is None else _job(jr)
            if run.task_id is not None:
                _prune_tasks(c, keep)
            return run, job, paused

        return await self.db.transaction(step)

    async def runs(self, job_id: str | None = None, limit: int = 100) -> list[Run]:
        where, params = ("WHERE job_id=?", (job_id, limit)) if job_id else ("", (limit,))
        rows = await self.db.fetch_all(
            f"SELECT {_RUN_COLS} FROM schedule_runs {where} "
            "ORDER BY started_at DESC, id DESC LIMIT ?",
            params,
        )
        return [_run(r) for r in rows]

    async def interrupt_running(self, now: datetime) -> int:
        """At start-up (or unlock): runs a crash left `running` end as interrupted."""

        def step(c: apsw.Connection) -> int:
            c.execute(
                "UPDATE schedule_runs SET outcome='interrupted', ended_at=?, "
                "error='the server stopped during the run' "
                "WHERE outcome='running' AND waiting_call IS NULL",
                (iso(now),),
            )
            return c.changes()

        return await self.db.transaction(step)

    async def waiting_runs(self) -> list[Run]:
        """Runs of jobs left waiting for an approval (taken back after a restart)."""
        rows = await self.db.fetch_all(
            f"SELECT {_RUN_COLS} FROM schedule_runs "
            "WHERE outcome='running' AND waiting_call IS NOT NULL AND job_id IS NOT NULL"
        )
        return [_run(r) for r in rows]

    async def set_waiting(
        self, table: Literal["runs", "tasks"], row_id: str, call_id: str | None, until: str | None
    ) -> None:
        """Mark a running run or task as waiting for `call_id` until `until` (None: not)."""
        name = "schedule_runs" if table == "runs" else "schedule_tasks"
        await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE {name} SET waiting_call=?, waiting_until=? WHERE id=?",
                (call_id, until, row_id),
            )
        )


class TaskStore:
    """One member's background tasks (their owner database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, task: Task) -> None:
        values = tuple(msgspec.structs.astuple(task))
        await self.db.execute(
            f"INSERT INTO schedule_tasks({_TASK_COLS}) VALUES ({','.join('?' * len(values))})",
            values,
        )

    async def get(self, task_id: str) -> Task | None:
        row = await self.db.fetch_one(
            f"SELECT {_TASK_COLS} FROM schedule_tasks WHERE id=?", (task_id,)
        )
        return None if row is None else _task(row)

    async def recent(self, limit: int = 50) -> list[Task]:
        rows = await self.db.fetch_all(
            f"SELECT {_TASK_COLS} FROM schedule_tasks ORDER BY created_at DESC, id LIMIT ?",
            (limit,),
        )
        return [_task(r) for r in rows]

    async def active_count(self) -> int:
        row = await self.db.fetch_one(
            "SELECT count(*) FROM schedule_tasks WHERE state IN ('queued', 'running')"
        )
        return 0 if row is None else int(row[0])

    async def move(
        self,
        task_id: str,
        state: TaskState,
        *,
        only_from: tuple[TaskState, ...],
        **end: Unpack[TaskEnd],
    ) -> bool:
        """Change the state if it is one of `only_from` (so an end is written once)."""
        marks = ",".join("?" * len(only_from))
        sql = (
            f"UPDATE schedule_tasks SET state=?, result=coalesce(?, result), "
            f"error=coalesce(?, error), ended_at=coalesce(?, ended_at), "
            f"waiting_call=NULL, waiting_until=NULL "
            f"WHERE id=? AND state IN ({marks})"
        )
        params = (state, end.get("result"), end.get("error"), end.get("now"), task_id, *only_from)
        return await self.db.call(lambda c: changed(c, sql, params))

    async def relayed(self, task_id: str) -> None:
        await self.db.execute("UPDATE schedule_tasks SET relayed=1 WHERE id=?", (task_id,))

    async def left_over(self) -> tuple[list[Task], list[Task]]:
        """(tasks a crash left queued or running, ended tasks never relayed)."""

        def step(c: apsw.Connection) -> tuple[list[Task], list[Task]]:
            open_ = fetch_all(
                c,
                f"SELECT {_TASK_COLS} FROM schedule_tasks WHERE state IN ('queued', 'running')",
            )
            unrelayed = fetch_all(
                c,
                f"SELECT {_TASK_COLS} FROM schedule_tasks "
                "WHERE state NOT IN ('queued', 'running') AND relayed=0",
            )
            return [_task(r) for r in open_], [_task(r) for r in unrelayed]

        return await self.db.call(step)


BUSY = "the previous run had not finished"
SKIPPED = "missed by more than the job's skip window"


def _running(c: apsw.Connection, job_id: str) -> bool:
    return (
        fetch_one(c, "SELECT 1 FROM schedule_runs WHERE job_id=? AND outcome='running'", (job_id,))
        is not None
    )


def _fetch_run(c: apsw.Connection, run_id: str) -> Run:
    row = fetch_one(c, f"SELECT {_RUN_COLS} FROM schedule_runs WHERE id=?", (run_id,))
    assert row is not None
    return _run(row)


def _prune(c: apsw.Connection, job_id: str, keep: int) -> None:
    c.execute(
        "DELETE FROM schedule_runs WHERE job_id=? AND outcome!='running' AND id NOT IN ("
        "SELECT id FROM schedule_runs WHERE job_id=? ORDER BY started_at DESC, id DESC "
        "LIMIT ?)",
        (job_id, job_id, keep),
    )


def _prune_tasks(c: apsw.Connection, keep: int) -> None:
    """Background tasks' runs, and ended and relayed tasks, beyond the newest `keep`."""
    c.execute(
        "DELETE FROM schedule_runs WHERE job_id IS NULL AND outcome!='running' AND id NOT IN ("
        "SELECT id FROM schedule_runs WHERE job_id IS NULL ORDER BY started_at DESC, id DESC "
        "LIMIT ?)",
        (keep,),
    )
    c.execute(
        "DELETE FROM schedule_tasks WHERE relayed=1 AND state NOT IN ('queued', 'running') "
        "AND id NOT IN (SELECT id FROM schedule_tasks ORDER BY created_at DESC, id DESC "
        "LIMIT ?)",
        (keep,),
    )


async def put_counts(registry_db: Database, user_id: str, jobs: int, active: int) -> None:
    stamp = iso(datetime.now(UTC))
    await registry_db.execute(
        "INSERT INTO schedule_counts(user_id, jobs, active, updated_at) VALUES (?,?,?,?) "
        "ON CONFLICT(user_id) DO UPDATE SET jobs=excluded.jobs, active=excluded.active, "
        "updated_at=excluded.updated_at",
        (user_id, jobs, active, stamp),
    )


async def all_counts(registry_db: Database) -> dict[str, tuple[int, int]]:
    rows = await registry_db.fetch_all("SELECT user_id, jobs, active FROM schedule_counts")
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


async def get_min_interval(registry_db: Database, user_id: str) -> int | None:
    row = await registry_db.fetch_one(
        "SELECT min_interval_s FROM schedule_limits WHERE user_id=?", (user_id,)
    )
    return None if row is None else int(row[0])


async def set_min_interval(registry_db: Database, user_id: str, seconds: int | None) -> None:
    """An admin's override of the shortest interval for one member (None: the default)."""
    if seconds is None:
        await registry_db.execute("DELETE FROM schedule_limits WHERE user_id=?", (user_id,))
        return
    await registry_db.execute(
        "INSERT INTO schedule_limits(user_id, min_interval_s) VALUES (?,?) "
        "ON CONFLICT(user_id) DO UPDATE SET min_interval_s=excluded.min_interval_s",
        (user_id, seconds),
    )
