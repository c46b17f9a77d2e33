"""Jobs by asking, run by the scheduler on an injected clock: a scripted model turns
"every weekday at 7:30" into the right job, the clock moves, the job runs into its own
conversation as its owner; pause stops it, delete removes it; a crash's left-over run is
interrupted and never run again; a job failing in a row pauses itself; the Tasks API
keeps to the caller's own jobs and admins see counts only."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from conftest import PASSWORD, add_models, signed_in
from fake_llm import Call, FakeLLM
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.features.schedule.jobs import JobSpec
from skald.features.schedule.store import ScheduleStore

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome (CEST)


async def test_every_weekday_at_7_30_becomes_a_job_that_runs_writes_pauses_and_is_deleted(
    runtime: Runtime,
    ada: str,
    llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    create = {
        "mode": "create",
        "title": "Train times",
        "prompt": "Check the train times to Milan",
        "cron": "30 7 * * 1-5",
    }
    llm.script(
        "model-a",
        [[Call("schedule", create)], "Done: every weekday at 7:30.", "The 8:05 is on time."],
    )
    reply = await runtime.conversations.chat(ada, "check the train times every weekday at 7:30")
    assert reply.status == "done", reply
    # The model was told the member's zone and local time in the tool's description.
    tools = llm.bodies()[0]["tools"]
    described = next(t for t in tools if t["function"]["name"] == "schedule")
    assert "Europe/Rome" in described["function"]["description"]
    assert "Monday 2026-06-01 09:00" in described["function"]["description"]

    member = runtime.user_runtimes[ada].facade
    store = ScheduleStore(member.db)
    (job,) = await store.jobs()
    assert (job.cron, job.zone, job.state, job.created_by) == (
        "30 7 * * 1-5", "Europe/Rome", "active", "member"
    )  # fmt: skip
    assert job.next_run == "2026-06-02T05:30:00Z"  # Tuesday 07:30 in Rome
    assert job.conversation_id != reply.conversation_id

    # Not yet due: nothing runs.
    clock.set(datetime(2026, 6, 2, 5, 29, tzinfo=UTC))
    assert await scheduler.tick() == []
    # Due: it runs once, as ada, into the job's conversation.
    clock.set(datetime(2026, 6, 2, 5, 30, 5, tzinfo=UTC))
    (run,) = await scheduler.tick()
    assert await scheduler.tick() == []  # claimed: a second tick does not run it again
    await scheduler.wait_run(run.id)
    history = await runtime.conversations.history(ada, job.conversation_id)
    assert [(i.role, i.text) for i in history] == [
        ("user", "Check the train times to Milan"),
        ("assistant", "The 8:05 is on time."),
    ]
    (done,) = await store.runs(job.id)
    assert (done.outcome, done.late, done.conversation_id) == (
        "succeeded",
        False,
        job.conversation_id,
    )
    assert done.started_at == "2026-06-02T05:30:05Z" and done.ended_at is not None
    assert (await store.get(job.id)).next_run == "2026-06-03T05:30:00Z"  # type: ignore[union-attr]
    # ...and its owner is notified, once, with a link to the job's conversation.
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    # The notice carries the job's own answer, under the job's title (not "Job ran: done").
    assert [(n.title, n.body, n.source, n.link) for n in notes] == [
        ("Train times", "The 8:05 is on time.", "schedule", f"/?c={job.conversation_id}")
    ]

    # Pause (the Tasks page): the next morning passes without a run.
    client = await signed_in(make_client, "ada")
    r = await client.call("PATCH", f"/api/schedule/jobs/{job.id}", json={"state": "paused"})
    assert r.status_code == 200 and r.json()["state"] == "paused", r.text
    clock.set(datetime(2026, 6, 3, 5, 31, tzinfo=UTC))
    assert await scheduler.tick() == []
    assert len(await store.runs(job.id)) == 1

    # Admins see counts, never contents.
    admin = await signed_in(make_client, "mum")
    counts = {c["username"]: c for c in (await admin.call("GET", "/api/admin/schedule")).json()}
    assert (counts["ada"]["jobs"], counts["ada"]["active"]) == (1, 0)
    assert "Milan" not in json.dumps(counts)
    assert (await admin.call("GET", f"/api/schedule/jobs/{job.id}/runs")).status_code == 404

    # Delete: gone, its runs too, the count follows.
    assert (await client.call("DELETE", f"/api/schedule/jobs/{job.id}")).status_code == 204
    assert await store.jobs() == [] and await store.runs(job.id) == []
    counts = {c["username"]: c for c in (await admin.call("GET", "/api/admin/schedule")).json()}
    assert counts["ada"]["jobs"] == 0
    assert (await client.call("DELETE", f"/api/schedule/jobs/{job.id}")).status_code == 404


async def test_a_bad_expression_comes_back_to_the_model_as_an_error_it_can_correct(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a")
    bad = {"mode": "create", "title": "x", "prompt": "y", "cron": "30 7 * * mon-fry"}
    good = {**bad, "cron": "30 7 * * mon-fri"}
    fake_llm.script("model-a", [[Call("schedule", bad)], [Call("schedule", good)], "ok"])
    await runtime.conversations.chat(ada, "weekday mornings")
    sent_back = json.dumps(fake_llm.bodies()[1]["messages"][-1])
    assert "not valid" in sent_back and "minute hour day-of-month month day-of-week" in sent_back
    (job,) = await ScheduleStore(runtime.user_runtimes[ada].handle.db).jobs()
    assert job.cron == "30 7 * * mon-fri"


async def test_a_run_left_running_by_a_crash_is_interrupted_and_the_next_time_still_runs(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    llm.script("model-a", ["first", "second"])
    member = runtime.user_runtimes[ada].facade
    jobs = await scheduler.jobs(member)
    job = await jobs.create(JobSpec(title="bins", prompt="Remind me of the bins", cron="0 8 * * *"))
    store = ScheduleStore(member.db)
    # A crash right after the claim: the run row says running, the job has moved on.
    clock.set(datetime(2026, 6, 1, 6, 0, 1, tzinfo=UTC))
    claimed = await scheduler._claim(store, job, clock.now())
    assert claimed is not None and claimed.outcome == "running"
    # The restarted scheduler sees the member for the first time: interrupted.
    scheduler._seen.clear()
    assert await scheduler.tick() == []
    (interrupted,) = await store.runs(job.id)
    assert interrupted.outcome == "interrupted" and interrupted.ended_at is not None
    # The occurrence is not run again; the next one is.
    clock.set(datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    outcomes = sorted(r.outcome for r in await store.runs(job.id))
    assert outcomes == ["interrupted", "succeeded"]
    texts = [i.text for i in await runtime.conversations.history(ada, job.conversation_id)]
    assert texts.count("Remind me of the bins") == 1


async def test_a_job_failing_in_a_row_pauses_itself(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    llm.script("model-a", [400, 400, 400, 400, 400, 400])
    member = runtime.user_runtimes[ada].facade
    job = await (await scheduler.jobs(member)).create(
        JobSpec(title="flaky", prompt="do it", cron="0 * * * *")
    )
    store = ScheduleStore(member.db)
    for hour in (1, 2):  # max_failures = 2 in the test config
        clock.set(MONDAY_9 + timedelta(hours=hour, seconds=5))
        (run,) = await scheduler.tick()
        await scheduler.wait_run(run.id)
    current = await store.get(job.id)
    assert current is not None and (current.state, current.failures) == ("paused", 2)
    assert all(r.outcome == "failed" and r.error for r in await store.runs(job.id))
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert [n.title for n in notes] == ["Job paused: flaky", "flaky"]
    clock.set(MONDAY_9 + timedelta(hours=3, seconds=5))
    assert await scheduler.tick() == []


async def test_limits_active_jobs_and_the_shortest_interval_an_admin_may_lower(
    runtime: Runtime,
    ada: str,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, _ = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    from skald.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="shortest interval allowed is 60 s"):
        await (await scheduler.jobs(member)).create(
            JobSpec(title="x", prompt="y", cron="*/10 * * * * *")
        )
    admin = await signed_in(make_client, "mum")
    r = await admin.call("PUT", f"/api/admin/schedule/{ada}/limits", json={"min_interval_s": 5})
    assert r.status_code == 204, r.text
    job = await (await scheduler.jobs(member)).create(
        JobSpec(title="x", prompt="y", cron="*/10 * * * * *")
    )
    assert job.state == "active"
    # The member cannot change their own limits.
    mine = await signed_in(make_client, "ada")
    r = await mine.call("PUT", f"/api/admin/schedule/{ada}/limits", json={"min_interval_s": 1})
    assert r.status_code == 403


async def test_unattended_work_that_may_not_ask_has_a_call_needing_a_person_refused_at_once(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    """What system agents keep: a conversation added to `unattended` without an
    `Asking` gets the unattended gate (jobs and tasks ask: test_schedule_approvals)."""
    from skald.core.unattended import CallPacer

    await add_models(runtime, fake_llm, "model-a")
    write = Call("write_file", {"path": "shared-memory/bins.md", "content": "Monday"})
    fake_llm.script("model-a", [[write], "I could not write it."])
    member = runtime.user_runtimes[ada]
    conversation = await runtime.conversations.create(ada, "agent")
    member.unattended.add(conversation.id, CallPacer(30, lambda: 0.0))
    assert member.gate_for(conversation.id) is member.unattended_gate
    sent = await runtime.conversations.send(ada, conversation.id, "note the bins day")
    assert (await sent.done).status == "done"  # type: ignore[union-attr]
    told = json.dumps(fake_llm.bodies()[-1]["messages"][-1])
    assert "nobody was there to approve it" in told
    assert await member.inbox.pending() == []
    member.unattended.discard(conversation.id)
    assert member.gate_for(conversation.id) is member.gate


async def test_a_jobs_run_history_keeps_the_last_n_runs(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    import msgspec

    scheduler, clock = with_clock(runtime, MONDAY_9)
    scheduler.config = msgspec.structs.replace(scheduler.config, keep_runs=2)
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", ["one", "two", "three"])
    member = runtime.user_runtimes[ada].facade
    job = await (await scheduler.jobs(member)).create(
        JobSpec(title="n", prompt="count", cron="0 8 * * *")
    )
    store = ScheduleStore(member.db)
    kept = []
    for _ in range(3):  # three "run now"s, a minute apart
        clock.advance(timedelta(minutes=1))
        run = await scheduler.run_now(member, job)
        await scheduler.wait_run(run.id)
        kept.append(run.id)
    runs = await store.runs(job.id)
    assert [r.id for r in runs] == kept[:0:-1]  # the newest two, newest first
    assert all(r.outcome == "succeeded" for r in runs)


async def test_a_members_own_time_zone_is_the_one_the_model_is_told_and_jobs_use(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM
) -> None:
    ada = household["ada"]
    await runtime.core.registry.update_user(ada, profile={"timezone": "America/New_York"})
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    scheduler, _ = with_clock(runtime, MONDAY_9)
    member = runtime.user_runtimes[ada].facade
    from skald.features.schedule.tool import ScheduleTool

    described = ScheduleTool(member, scheduler).spec.description
    assert "America/New_York" in described and "Monday 2026-06-01 03:00" in described
    job = await (await scheduler.jobs(member)).create(
        JobSpec(title="x", prompt="y", cron="30 7 * * *")
    )
    assert (job.zone, job.next_run) == ("America/New_York", "2026-06-01T11:30:00Z")
    # A name that is no time zone falls back to the household's.
    await runtime.core.registry.update_user(household["mum"], profile={"timezone": "Mars/Base"})
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    assert (
        "Europe/Rome"
        in ScheduleTool(runtime.user_runtimes[household["mum"]].facade, scheduler).spec.description
    )


async def test_deleting_a_job_while_it_runs_ends_cleanly(
    runtime: Runtime, ada: str, llm: FakeLLM
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    llm.script("model-a", ["done"])
    member = runtime.user_runtimes[ada].facade
    jobs = await scheduler.jobs(member)
    job = await jobs.create(JobSpec(title="d", prompt="do", cron="0 8 * * *"))
    store = ScheduleStore(member.db)
    run = await store.start_run(job, clock.now(), 60)
    await jobs.delete(job.id)  # its runs go with it, the running one included
    assert await scheduler.execute(member, job, run) is None
    assert await store.runs() == []


async def test_an_occurrence_due_while_the_previous_run_goes_on_is_skipped_not_piled_up(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    from fake_llm import Hang

    scheduler, clock = with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a")
    fake_llm.script("model-a", [Hang()])
    member = runtime.user_runtimes[ada].facade
    await (await scheduler.jobs(member)).create(
        JobSpec(title="slow", prompt="take your time", cron="*/5 * * * *")
    )
    clock.set(datetime(2026, 6, 1, 7, 5, 1, tzinfo=UTC))
    (first,) = await scheduler.tick()
    assert first.outcome == "running"
    clock.set(datetime(2026, 6, 1, 7, 10, 1, tzinfo=UTC))
    (second,) = await scheduler.tick()
    assert second.outcome == "skipped" and second.error == "the previous run had not finished"


async def test_the_tool_is_told_the_hour_not_the_minute_and_in_minutes_counts_from_now(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM
) -> None:
    """The description stays the same for an hour (a per-minute one would make providers
    re-read the tools and the conversation every turn); 'in 10 minutes' still lands on
    the minute, through `in_minutes`."""
    from skald.features.schedule.tool import ScheduleTool

    ada = household["ada"]
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    scheduler, clock = with_clock(runtime, MONDAY_9 + timedelta(minutes=17))
    member = runtime.user_runtimes[ada].facade
    tool = ScheduleTool(member, scheduler)
    assert "Monday 2026-06-01 09:00" in tool.spec.description
    assert "09:17" not in tool.spec.description
    # Built once per hour and zone (not at every turn), and new as soon as either moves.
    clock.set(MONDAY_9 + timedelta(minutes=59))
    assert ScheduleTool(member, scheduler).spec is tool.spec
    clock.set(MONDAY_9 + timedelta(minutes=61))
    assert "Monday 2026-06-01 10:00" in ScheduleTool(member, scheduler).spec.description
    from skald.features.schedule.tool import _spec

    tokyo = _spec(MONDAY_9, "Asia/Tokyo")
    assert "Asia/Tokyo" in tokyo.description and tokyo is not tool.spec
    clock.set(MONDAY_9 + timedelta(minutes=17))
    create = {"mode": "create", "title": "tea", "prompt": "Say the tea is ready", "in_minutes": 10}
    asked_in = await runtime.conversations.create(ada)
    assert (await tool._run("create", create, asked_in.id)).startswith("Created job")
    (job,) = await (await scheduler.jobs(member)).list()
    assert job.run_at == "2026-06-01T07:27:00Z" and job.cron is None
