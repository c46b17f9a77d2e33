"""The schedule's limits at their edges: the active-jobs limit whatever path makes a job
active (create, update, resume; the Tasks API and the `schedule` tool; in parallel), the
shortest interval (5-, 6- and 7-field forms), and the claim that a changed job refuses
(never two runs for one occurrence)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from conftest import add_models, signed_in
from fake_llm import Call, FakeLLM
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.schedule.jobs import JobChange, JobSpec
from skald.features.schedule.scheduler import Scheduler
from skald.features.schedule.store import Job, ScheduleStore
from skald.plugins.facade import Member

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome (CEST)
LIMIT = "the most allowed is 2"


def _limit_two(runtime: Runtime) -> Scheduler:
    scheduler, _ = with_clock(runtime, MONDAY_9)
    scheduler.config = msgspec.structs.replace(scheduler.config, max_active_jobs=2)
    return scheduler


async def _create(scheduler: Scheduler, member: Member, title: str, **when: str) -> Job:
    return await (await scheduler.jobs(member)).create(
        JobSpec(title=title, prompt=f"do {title}", **when)
    )


async def _active(member: Member) -> int:
    return (await ScheduleStore(member.db).counts())[1]


async def _finished_one_off(
    runtime: Runtime, scheduler: Scheduler, member: Member, fake_llm: FakeLLM
) -> Job:
    """A one-off job that has run: `done`, no longer counted as active."""
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", ["done"])
    job = await _create(scheduler, member, "once", at="2026-06-01T10:00")
    scheduler.clock.set(MONDAY_9 + timedelta(hours=1, seconds=1))  # type: ignore[attr-defined]
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    done = await ScheduleStore(member.db).get(job.id)
    assert done is not None and done.state == "done"
    return done


async def _one_slot_left(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> tuple[Scheduler, Member, Job, Job]:
    """ada at a limit of two active jobs with one active: a finished one-off (`done`), a
    paused job and one active job; returns the scheduler, her runtime, done and paused."""
    scheduler = _limit_two(runtime)
    member = runtime.user_runtimes[ada].facade
    done = await _finished_one_off(runtime, scheduler, member, fake_llm)
    paused = await _create(scheduler, member, "paused", cron="0 8 * * *")
    await (await scheduler.jobs(member)).pause(paused.id)
    await _create(scheduler, member, "first", cron="0 9 * * *")
    return scheduler, member, done, paused


async def test_the_third_active_job_is_refused_whatever_path_makes_it_active(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, member, done, paused = await _one_slot_left(runtime, ada, fake_llm)
    second = await _create(scheduler, member, "second", cron="0 10 * * *")  # the edge: 2 of 2
    assert await _active(member) == 2

    # Create, resume and update (Jobs, the Tasks API, the tool): each refused at 2 of 2.
    with pytest.raises(InvalidInputError, match=LIMIT):
        await _create(scheduler, member, "third", cron="0 11 * * *")
    with pytest.raises(InvalidInputError, match=LIMIT):
        await (await scheduler.jobs(member)).resume(paused.id)
    with pytest.raises(InvalidInputError, match=LIMIT):
        await (await scheduler.jobs(member)).change(done.id, JobChange(cron="0 12 * * *"))
    client = await signed_in(make_client, "ada")
    for body in ({"cron": "0 12 * * *"}, {"at": "2026-06-03T12:00", "state": "active"}):
        r = await client.call("PATCH", f"/api/schedule/jobs/{done.id}", json=body)
        assert r.status_code == 400 and LIMIT in r.text, (body, r.text)
    r = await client.call("PATCH", f"/api/schedule/jobs/{paused.id}", json={"state": "active"})
    assert r.status_code == 400 and LIMIT in r.text, r.text
    calls = [
        {"mode": "create", "title": "t", "prompt": "p", "cron": "0 13 * * *"},
        {"mode": "update", "job_id": done.id, "at": "2026-06-04T09:00"},
        {"mode": "resume", "job_id": paused.id},
    ]
    fake_llm.script("model-a", [[Call("schedule", c) for c in calls], "ok"])
    await runtime.conversations.chat(ada, "more jobs please")
    told = json.dumps(fake_llm.bodies()[-1]["messages"][-3:])
    assert told.count(LIMIT) == 3, told
    assert await _active(member) == 2
    store = ScheduleStore(member.db)
    assert (await store.get(done.id)).state == "done"  # type: ignore[union-attr]
    assert (await store.get(paused.id)).state == "paused"  # type: ignore[union-attr]

    # One slot free again: exactly one of the paths fits (the edge from below).
    await (await scheduler.jobs(member)).pause(second.id)
    r = await client.call("PATCH", f"/api/schedule/jobs/{done.id}", json={"cron": "0 12 * * *"})
    assert r.status_code == 200 and r.json()["state"] == "active", r.text
    assert await _active(member) == 2
    # A change to an already active job does not count it twice.
    r = await client.call("PATCH", f"/api/schedule/jobs/{done.id}", json={"cron": "0 14 * * *"})
    assert r.status_code == 200, r.text


async def test_parallel_requests_cannot_both_take_the_last_active_slot(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, member, done, paused = await _one_slot_left(runtime, ada, fake_llm)
    client = await signed_in(make_client, "ada")
    store = ScheduleStore(member.db)

    async def create(n: int) -> object:
        return await _create(scheduler, member, f"new {n}", cron=f"{n} 9 * * *")

    async def patch(job_id: str, body: dict[str, str]) -> object:
        r = await client.call("PATCH", f"/api/schedule/jobs/{job_id}", json=body)
        if r.status_code == 400 and LIMIT in r.text:
            raise InvalidInputError(r.text)
        assert r.status_code == 200, r.text
        return r.json()

    results = await asyncio.gather(
        create(1),
        create(2),
        patch(done.id, {"cron": "0 12 * * *"}),
        patch(paused.id, {"state": "active"}),
        (await scheduler.jobs(member)).resume(paused.id),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, InvalidInputError)]
    assert len(refused) >= 3, results
    assert not [r for r in results if isinstance(r, BaseException) and r not in refused]
    assert await _active(member) == 2
    # A refused create leaves no job and no orphan conversation behind.
    jobs = await store.jobs()
    titles = {j.title for j in jobs}
    assert len(titles & {"new 1", "new 2"}) == sum(
        1 for r in results[:2] if not isinstance(r, BaseException)
    )
    kept = {c.id for c in await member.conversations.store.all()}
    assert {j.conversation_id for j in jobs} <= kept
    assert len(
        [c for c in await member.conversations.store.all() if c.title.startswith("⏰")]
    ) == len(jobs)


@pytest.mark.parametrize(
    ("cron", "allowed"),
    [
        ("*/30 * * * * *", False),  # 6 fields: every 30 s
        ("0,59 * * * * *", False),  # 59 s then 1 s: the shortest gap counts
        ("0 * * * * *", True),  # 6 fields: every 60 s, the floor itself
        ("* * * * *", True),  # 5 fields: every minute
        ("*/30 * * * * * *", False),  # 7 fields (year last): every 30 s
        ("0 * * * * * 2026-2030", True),  # 7 fields: every 60 s
        ("0 * * * * * *", True),
    ],
)
async def test_the_shortest_interval_is_held_at_its_edge_in_every_field_form(
    runtime: Runtime, ada: str, cron: str, allowed: bool
) -> None:
    """With a 60 s floor (the test config), every 30 s is refused and every 60 s taken."""
    scheduler, _ = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    jobs = await scheduler.jobs(member)
    assert jobs.min_interval_s == 60
    if allowed:
        assert (await jobs.create(JobSpec(title="x", prompt="y", cron=cron))).state == "active"
        return
    with pytest.raises(InvalidInputError, match="shortest interval allowed is 60 s"):
        await jobs.create(JobSpec(title="x", prompt="y", cron=cron))
    # An update to the same expression is held to the same floor.
    job = await jobs.create(JobSpec(title="ok", prompt="y", cron="0 8 * * *"))
    with pytest.raises(InvalidInputError, match="shortest interval allowed is 60 s"):
        await jobs.change(job.id, JobChange(cron=cron))


async def test_a_claim_with_a_copy_read_before_the_job_changed_records_no_run(
    runtime: Runtime, ada: str
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    store = ScheduleStore(member.db)
    job = await _create(scheduler, member, "bins", cron="0 8 * * *")
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))  # due: 08:00 in Rome
    (stale,) = await store.due(clock.now())
    # The member edits the prompt after the scheduler read the job: same next time.
    await (await scheduler.jobs(member)).change(job.id, JobChange(prompt="the green bin"))
    assert await scheduler._claim(store, stale, clock.now()) is None
    assert await store.runs(job.id) == []
    # Paused and resumed in between: the same next time again, still another job.
    (copy,) = await store.due(clock.now())
    jobs = await scheduler.jobs(member)
    await jobs.pause(job.id)
    clock.set(datetime(2026, 6, 2, 5, 59, tzinfo=UTC))
    await (await scheduler.jobs(member)).resume(job.id)
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    (fresh,) = await store.due(clock.now())
    assert (fresh.next_run, fresh.state) == (copy.next_run, copy.state)
    assert await scheduler._claim(store, copy, clock.now()) is None
    assert await store.runs(job.id) == []
    # The fresh copy claims it, once: it runs the prompt as it is now.
    run = await scheduler._claim(store, fresh, clock.now())
    assert run is not None and run.outcome == "running"
    assert await scheduler._claim(store, fresh, clock.now()) is None
    assert [r.id for r in await store.runs(job.id)] == [run.id]


async def test_two_claimers_of_one_occurrence_record_one_run(runtime: Runtime, ada: str) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    store = ScheduleStore(member.db)
    job = await _create(scheduler, member, "bins", cron="0 8 * * *")
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    (one,) = await store.due(clock.now())
    (two,) = await store.due(clock.now())
    won = await asyncio.gather(*(scheduler._claim(store, j, clock.now()) for j in (one, two)))
    assert sum(r is not None for r in won) == 1
    assert len(await store.runs(job.id)) == 1
    # A copy changed meanwhile and a fresh one racing: still one run for the next day.
    clock.set(datetime(2026, 6, 3, 6, 0, 1, tzinfo=UTC))
    (stale,) = await store.due(clock.now())
    change = (await scheduler.jobs(member)).change(job.id, JobChange(title="bins!"))
    claims = scheduler._claim(store, stale, clock.now())
    _, claimed = await asyncio.gather(change, claims)
    if claimed is None:  # the change came first: a fresh copy takes the occurrence
        (fresh,) = await store.due(clock.now())
        assert fresh.title == "bins!"
        assert await scheduler._claim(store, fresh, clock.now()) is not None
    # Whichever came first, the day's occurrence has exactly one run.
    assert await store.due(clock.now()) == []
    assert len(await store.runs(job.id)) == 2
