"""A job cannot restart itself: `run_now` is refused in unattended runs (a job's run, a
background task), a job never has two runs at once (the store's claim and run-now say
so), a person's run-now keeps the minimum interval from the job's last start, and a
member's unattended model requests are paced per minute with a clear failure."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from conftest import signed_in
from fake_llm import Call, FakeLLM, Hang
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.features.schedule.clock import FakeClock
from skald.features.schedule.jobs import JobSpec
from skald.features.schedule.scheduler import Scheduler
from skald.features.schedule.store import Job, RunRefusedError, ScheduleStore, TaskStore
from skald.plugins.facade import Member

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome (CEST)
REFUSED = "run_now is not available in a scheduled job's run or a background task"


async def _job(
    scheduler: Scheduler, member: Member, title: str = "news", cron: str = "0 8 * * *"
) -> Job:
    return await (await scheduler.jobs(member)).create(
        JobSpec(title=title, prompt=f"do {title}", cron=cron)
    )


async def _news(runtime: Runtime, ada: str) -> tuple[Scheduler, FakeClock, Member, Job]:
    """Where every test here starts: Monday 09:00 on a fake clock, ada's daily news job."""
    scheduler, clock = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    return scheduler, clock, member, await _job(scheduler, member)


def _told(fake: FakeLLM) -> str:
    """Everything the model was sent, as text."""
    return json.dumps(fake.bodies())


async def test_a_scheduled_run_that_calls_run_now_on_its_own_job_is_refused_and_runs_once(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, clock, member, job = await _news(runtime, ada)
    other = await _job(scheduler, member, "other", cron="0 12 * * 0")
    again = [Call("schedule", {"mode": "run_now", "job_id": j.id}) for j in (job, other)]
    llm.script("model-a", [again, "I could not start them.", "spare", "spare"])
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    store = ScheduleStore(member.db)
    assert [r.id for r in await store.runs(job.id)] == [run.id]
    assert await store.runs(other.id) == []
    assert llm.remaining("model-a") == 2  # nothing else asked the model
    assert _told(llm).count(REFUSED) == 2


async def test_a_background_task_cannot_start_a_job_and_a_person_in_a_chat_can(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, _, member, job = await _news(runtime, ada)
    run_now = Call("schedule", {"mode": "run_now", "job_id": job.id})
    llm.script("model-a", [[run_now], "could not", "relayed"])
    origin = await runtime.conversations.create(ada, "plans")
    task = await scheduler.tasks.start(member, origin.id, "kick", "start the news job")
    await scheduler.wait_run(f"task-{task.id}")
    await scheduler.tasks.relay_turns[task.id]
    assert await ScheduleStore(member.db).runs(job.id) == []
    assert REFUSED in _told(llm)
    ended = await TaskStore(member.db).get(task.id)
    assert ended is not None and ended.state == "completed"
    # In a chat somebody is there: the same call starts the job.
    llm.script("model-a", [[run_now], "Started.", "the news"])
    reply = await runtime.conversations.chat(ada, "run the news job now")
    assert reply.status == "done"
    (started,) = await ScheduleStore(member.db).runs(job.id)
    await scheduler.wait_run(started.id)


async def test_a_job_never_has_two_runs_at_once_whatever_starts_them(
    runtime: Runtime,
    ada: str,
    llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, clock, member, job = await _news(runtime, ada)
    llm.script("model-a", [Hang()])
    store = ScheduleStore(member.db)
    first = await scheduler.run_now(member, job)
    # An hour later the first run still goes on: a second "run now" is refused...
    clock.advance(timedelta(hours=1))
    with pytest.raises(RunRefusedError, match="is running now"):
        await scheduler.run_now(member, job)
    client = await signed_in(make_client, "ada")
    r = await client.call("POST", f"/api/schedule/jobs/{job.id}/run")
    assert r.status_code == 409 and "is running now" in r.text, r.text
    # ...and the due occurrence is claimed as skipped, by the store's own look at the
    # runs (another scheduler object knows nothing of this one's chores).
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    fresh = Scheduler(runtime.server, scheduler.config, clock)
    (due,) = await store.due(clock.now())
    second = await fresh._claim(store, due, clock.now())
    assert second is not None
    assert (second.outcome, second.error) == ("skipped", "the previous run had not finished")
    assert [r.id for r in await store.runs(job.id) if r.outcome == "running"] == [first.id]


async def test_parallel_run_nows_start_one_run(runtime: Runtime, ada: str, llm: FakeLLM) -> None:
    scheduler, _, member, job = await _news(runtime, ada)
    llm.script("model-a", ["one", "two", "three"])
    results = await asyncio.gather(
        *(scheduler.run_now(member, job) for _ in range(3)), return_exceptions=True
    )
    started = [r for r in results if not isinstance(r, BaseException)]
    assert len(started) == 1, results
    assert all(isinstance(r, RunRefusedError) for r in results if r not in started)
    await scheduler.wait_run(started[0].id)
    assert len(await ScheduleStore(member.db).runs(job.id)) == 1


async def test_run_now_waits_the_minimum_interval_after_the_jobs_last_start(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    """The test config's floor is 60 s: 59 s after the last start is refused, 60 s not."""
    scheduler, clock, member, job = await _news(runtime, ada)
    llm.script("model-a", ["one", "two"])
    run = await scheduler.run_now(member, job)
    await scheduler.wait_run(run.id)  # ended: only the spacing is left to hold it
    clock.advance(timedelta(seconds=59))
    with pytest.raises(
        RunRefusedError, match=r"less than 60 s ago: it can run again from 09:01:00"
    ):
        await scheduler.run_now(member, job)
    clock.advance(timedelta(seconds=1))
    again = await scheduler.run_now(member, job)
    await scheduler.wait_run(again.id)
    # A scheduled start counts as a start too.
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    llm.script("model-a", ["scheduled"])
    (scheduled,) = await scheduler.tick()
    await scheduler.wait_run(scheduled.id)
    with pytest.raises(RunRefusedError, match="less than 60 s ago"):
        await scheduler.run_now(member, job)
    outcomes = [r.outcome for r in await ScheduleStore(member.db).runs(job.id)]
    assert outcomes == ["succeeded"] * 3


async def test_a_members_unattended_model_calls_are_paced_per_minute_and_chats_are_not(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, clock, member, job = await _news(runtime, ada)
    scheduler.config = msgspec.structs.replace(scheduler.config, background_calls_per_min=3)
    listing = [Call("schedule", {"mode": "list"})]
    llm.script("model-a", [listing, listing, listing, "never asked"])
    run = await scheduler.run_now(member, job)
    await scheduler.wait_run(run.id)
    (failed,) = await ScheduleStore(member.db).runs(job.id)
    assert failed.outcome == "failed"
    assert failed.error is not None and "at most 3 times a minute" in failed.error
    assert len(llm.bodies()) == 3  # the fourth request never left
    # A chat is somebody's: not paced.
    reply = await runtime.conversations.chat(ada, "hello")
    assert (reply.status, reply.reply) == ("done", "never asked")
    # A background task in the same minute shares the member's budget: refused at once.
    llm.script("model-a", ["task done", "relayed"])
    origin = await runtime.conversations.create(ada, "plans")
    task = await scheduler.tasks.start(member, origin.id, "t", "something")
    await scheduler.wait_run(f"task-{task.id}")
    ended = await TaskStore(member.db).get(task.id)
    assert ended is not None and ended.state == "failed"
    assert ended.error is not None and "at most 3 times a minute" in ended.error
    # A minute after those calls, the next run asks again.
    clock.advance(timedelta(seconds=60))
    llm.script("model-a", ["fine"])
    again = await scheduler.run_now(member, job)
    await scheduler.wait_run(again.id)
    outcomes = [r.outcome for r in await ScheduleStore(member.db).runs(job.id)]
    assert outcomes == ["succeeded", "failed"]


async def test_a_helper_inside_an_unattended_run_spends_the_same_per_minute_budget(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    """The run's own request and its helper's (`execute_task`) count alike: with 2 a
    minute, the run's request after the helper's answer is refused."""
    scheduler, _, member, job = await _news(runtime, ada)
    scheduler.config = msgspec.structs.replace(scheduler.config, background_calls_per_min=2)
    delegate = Call("execute_task", {"task": "count the bins", "agent": "worker"})
    llm.script("model-a", [[delegate], "three bins", "never asked"])
    run = await scheduler.run_now(member, job)
    await scheduler.wait_run(run.id)
    (failed,) = await ScheduleStore(member.db).runs(job.id)
    assert failed.outcome == "failed", failed
    assert failed.error is not None and "at most 2 times a minute" in failed.error
    assert len(llm.bodies()) == 2
