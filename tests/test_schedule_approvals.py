"""Approvals from background work wait in the owner's Inbox: a scheduled job's run (or a
background task) whose call needs a person is labelled with the job (or task) there and
shown as waiting; approving completes the run, rejecting fails it with that reason, an
unanswered request expires at the end of the job's window (the run fails and the member
is told); another member can neither see nor decide it. The call here is a write to the
household's notes, which the shipped rules send to a person (no Docker needed)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from conftest import PASSWORD, add_models, signed_in
from fake_llm import Call, FakeLLM
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.errors import NotFoundError
from skald.features.schedule.jobs import JobSpec
from skald.features.schedule.scheduler import Scheduler
from skald.features.schedule.store import Job, Run, ScheduleStore, TaskStore
from skald.features.schedule.tasks import completion_message
from skald.plugins.facade import Member
from skald.store.inbox import InboxItem

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome (CEST)
TUESDAY_8 = datetime(2026, 6, 2, 6, 0, 1, tzinfo=UTC)  # the job's time, in Rome
WRITE = Call("write_file", {"path": "shared-memory/bins.md", "content": "Monday"})


async def _waiting(member: Member) -> InboxItem:
    for _ in range(400):
        items = await member.inbox()
        if items:
            (item,) = items
            return item
        await asyncio.sleep(0.025)
    raise AssertionError("no request reached the Inbox")


async def _job_waits(
    runtime: Runtime, ada: str, fake: FakeLLM, window_s: int | None = None
) -> tuple[Scheduler, Member, Job, Run, InboxItem]:
    """A daily job whose run writes a household note: the run waits for ada."""
    scheduler, clock = with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake, "model-a")
    fake.script("model-a", [[WRITE], "I noted the bins day."])
    member = runtime.user_runtimes[ada].facade
    job = await (await scheduler.jobs(member)).create(
        JobSpec(
            title="Bins day",
            prompt="Note the bins day",
            cron="0 8 * * *",
            approval_window_s=window_s,
        )
    )
    clock.set(TUESDAY_8)
    (run,) = await scheduler.tick()
    item = await _waiting(member)
    return scheduler, member, job, run, item


async def _note(runtime: Runtime) -> str | None:
    try:
        return await runtime.shared_memory.note_get("bins.md")
    except NotFoundError:
        return None


async def test_a_jobs_request_waits_in_the_inbox_labelled_with_the_job_and_approving_completes_it(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, member, job, run, item = await _job_waits(runtime, ada, fake_llm)
    # Labelled with the job; it waits until the next occurrence (a day away).
    assert (item.origin, item.origin_title, item.tool) == ("scheduled", "Bins day", "write_file")
    assert item.conversation_id == job.conversation_id
    assert item.expires_at == "2026-06-03T06:00:00Z"
    # The run is shown waiting, in the store and through the Tasks API.
    client = await signed_in(make_client, "ada")
    runs = (await client.call("GET", f"/api/schedule/jobs/{job.id}/runs")).json()
    assert [(r["id"], r["outcome"], r["waiting_call"]) for r in runs] == [
        (run.id, "running", item.id)
    ]
    assert runs[0]["waiting_until"] == item.expires_at
    listed = (await client.call("GET", "/api/inbox")).json()
    assert [(i["id"], i["origin"], i["origin_title"]) for i in listed] == [
        (item.id, "scheduled", "Bins day")
    ]
    assert await _note(runtime) is None  # nothing written before the decision
    r = await client.call("POST", f"/api/inbox/{item.id}/approve")
    assert r.status_code == 204, r.text
    await scheduler.wait_run(run.id)
    (done,) = await ScheduleStore(member.db).runs(job.id)
    assert (done.outcome, done.error, done.waiting_call) == ("succeeded", None, None)
    assert await _note(runtime) == "Monday"
    assert await member.inbox() == []
    assert job.conversation_id not in member.unattended  # only while the run lasts


async def test_rejecting_a_jobs_request_fails_the_run_with_that_reason_and_writes_nothing(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, member, job, run, item = await _job_waits(runtime, ada, fake_llm)
    asked = len(fake_llm.bodies())
    client = await signed_in(make_client, "ada")
    r = await client.call("POST", f"/api/inbox/{item.id}/reject")
    assert r.status_code == 204, r.text
    await scheduler.wait_run(run.id)
    (done,) = await ScheduleStore(member.db).runs(job.id)
    assert done.outcome == "failed"
    assert done.error == "you rejected the request to use write_file"
    assert await _note(runtime) is None
    # The run is stopped: at most the request already on its way when the decision
    # landed reaches the model, and nothing after it.
    assert len(fake_llm.bodies()) <= asked + 1
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert any("rejected the request" in n.body for n in notes)


async def test_an_unanswered_request_expires_at_the_end_of_the_jobs_window_and_the_member_is_told(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    scheduler, member, job, run, item = await _job_waits(runtime, ada, fake_llm, window_s=600)
    assert item.expires_at == "2026-06-02T06:10:01Z"  # the job's own window
    clock = scheduler.clock
    assert hasattr(clock, "advance")
    clock.advance(timedelta(seconds=599))
    await asyncio.sleep(0.1)
    assert (await ScheduleStore(member.db).runs(job.id))[0].outcome == "running"
    clock.advance(timedelta(seconds=2))
    await asyncio.wait_for(scheduler.wait_run(run.id), 10)
    (done,) = await ScheduleStore(member.db).runs(job.id)
    assert done.outcome == "failed"
    assert done.error == (
        "the approval request for write_file expired: nobody answered within 10 minutes"
    )
    assert await member.inbox() == []
    assert await member.inbox_status(item.id) == "rejected"
    assert await _note(runtime) is None
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    told = [n for n in notes if n.title == "Bins day"]
    assert told and "expired" in told[0].body and told[0].urgency == "high"


async def test_another_member_can_neither_see_nor_decide_a_jobs_request(
    runtime: Runtime,
    ada: str,
    household: dict[str, str],
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, member, job, run, item = await _job_waits(runtime, ada, fake_llm)
    # mum is an administrator: still not hers to see or decide.
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("GET", "/api/inbox")).json() == []
    for path in (
        f"/api/inbox/{item.id}/approve",
        f"/api/inbox/{item.id}/reject",
        f"/api/approvals/{item.id}",
    ):
        body = {"decision": "approve"} if path.startswith("/api/approvals") else None
        r = await mum.call("POST", path, json=body)
        assert r.status_code in (403, 404), (path, r.status_code, r.text)
    r = await mum.call("GET", f"/api/schedule/jobs/{job.id}/runs")
    assert r.status_code == 404, r.text  # nor the waiting run
    # Straight at her runtime: there is no such request in her data.
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    with pytest.raises(NotFoundError):
        await runtime.user_runtimes[household["mum"]].decide(item.id, True)
    # Still waiting for ada, who can decide it.
    assert [i.id for i in await member.inbox()] == [item.id]
    (waiting,) = await ScheduleStore(member.db).runs(job.id)
    assert (waiting.outcome, waiting.waiting_call) == ("running", item.id)
    await runtime.conversations.decide(ada, item.id, True)
    await scheduler.wait_run(run.id)
    assert (await ScheduleStore(member.db).runs(job.id))[0].outcome == "succeeded"


async def test_a_background_tasks_request_is_labelled_with_the_task_and_a_rejection_fails_it(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    from fake_llm import ToolCalls

    scheduler, _ = with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a", "model-b")
    start = {"mode": "start", "title": "bins note", "task": "Write the bins day in the notes"}
    fake_llm.script("model-b", [[Call("background_task", start)], "Started.", "Relayed."])
    fake_llm.script("model-a", [ToolCalls([WRITE], text="Writing the note now."), "Done."])
    svc = runtime.conversations
    conversation = await svc.create(ada, "plans")
    await svc.command(ada, conversation.id, "/model model-b")
    reply = await svc.chat(ada, "note the bins day in the background", conversation.id)
    assert reply.status == "done"
    member = runtime.user_runtimes[ada].facade
    item = await _waiting(member)
    (task,) = await TaskStore(member.db).recent()
    assert (item.origin, item.origin_title) == ("task", "bins note")
    assert item.expires_at == "2026-06-02T07:00:00Z"  # the tasks' default: 24 h
    waiting = await TaskStore(member.db).get(task.id)
    assert waiting is not None and (waiting.state, waiting.waiting_call) == ("running", item.id)
    await runtime.conversations.decide(ada, item.id, False)
    await scheduler.wait_run(f"task-{task.id}")
    ended = await TaskStore(member.db).get(task.id)
    assert ended is not None
    assert (ended.state, ended.error) == ("failed", "you rejected the request to use write_file")
    assert await _note(runtime) is None
    await scheduler.tasks.relay_turns[task.id]
    relayed = [i.text for i in await svc.history(ada, conversation.id) if i.role == "user"][-1]
    assert 'The background task "bins note" FAILED' in relayed
    assert "you rejected the request to use write_file" in relayed
    assert "Last thing the task said before stopping:\nWriting the note now." in relayed


def test_a_failed_or_stopped_tasks_message_says_so_and_carries_what_it_last_said() -> None:
    from skald.features.schedule.store import Task

    base = Task(
        id="t", title="tides", prompt="p", origin_conversation="o", conversation_id="c",
        state="failed", result=None, error="the service is closed", relayed=False,
        created_at="2026-06-01T07:00:00Z", ended_at=None,
    )  # fmt: skip
    failed = completion_message(base, "Looking at the harbour page.")
    assert 'The background task "tides" FAILED' in failed
    assert "never reached a final answer" in failed and "Error: the service is closed" in failed
    assert "Last thing the task said before stopping:\nLooking at the harbour page." in failed
    import msgspec

    stopped = completion_message(
        msgspec.structs.replace(base, state="cancelled", error="stopped by the user"),
        "Half of the list.",
    )
    assert "was STOPPED before it finished" in stopped
    assert "must not be reported as done" in stopped
    assert "Last thing the task said before stopping:\nHalf of the list." in stopped
    # Nothing said: no empty "last thing" line.
    assert "Last thing" not in completion_message(base, "")
    done = completion_message(msgspec.structs.replace(base, state="completed", result="14:02"))
    assert "is done" in done and "14:02" in done and "Last thing" not in done


async def test_a_run_cut_while_it_waits_is_taken_back_and_a_rejection_then_fails_it_once(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    """Locked under it (as a restart leaves it: the turn's memory gone, the history
    kept): at the unlock the request is still in her Inbox, the run still waits (not
    interrupted); her rejection then fails that same run with the reason, nothing is
    written and no second run appears."""
    scheduler, member, job, run, item = await _job_waits(runtime, ada, fake_llm)
    await runtime.lock(ada)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    member = runtime.user_runtimes[ada].facade
    store = ScheduleStore(member.db)
    (still,) = await store.runs(job.id)
    assert (still.id, still.outcome, still.waiting_call) == (run.id, "running", item.id)
    assert await scheduler.tick() == []  # first sight: taken back, nothing new claimed
    again = await _waiting(member)
    assert (again.id, again.origin_title, again.expires_at) == (
        item.id, "Bins day", item.expires_at
    )  # fmt: skip
    await runtime.conversations.decide(ada, item.id, False)
    await asyncio.wait_for(scheduler.wait_run(run.id), 10)
    (done,) = await store.runs(job.id)
    assert (done.id, done.outcome) == (run.id, "failed")
    assert done.error == "you rejected the request to use write_file"
    assert await _note(runtime) is None
