"""Background tasks: the assistant hands work to a helper and keeps talking; the result
(completed, failed with its error, cancelled) comes back into the conversation that
started it as a message and wakes it (a new turn); the live list and cancel work from
the API; at most `max_tasks` at once; a task a crash cut is failed (interrupted) and
relayed, never run again."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from conftest import Client, add_models, signed_in
from fake_llm import Call, Error, FakeLLM, Gate, Hang
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.features.schedule.scheduler import Scheduler
from skald.features.schedule.store import ScheduleStore, Task, TaskStore

NOW = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)


async def _start(
    runtime: Runtime, ada: str, fake: FakeLLM, helper_reply: object
) -> tuple[Scheduler, str, Task]:
    """ada's conversation (on model-b) asks for a background task; the helper (AUTO:
    model-a) answers `helper_reply`. Returns the origin conversation and the task."""
    scheduler, _ = with_clock(runtime, NOW)
    await add_models(runtime, fake, "model-a", "model-b")
    start = {"mode": "start", "title": "tide tables", "task": "Find the tide tables for Genoa"}
    fake.script("model-b", [[Call("background_task", start)], "I've started it.", "Relayed."])
    # The helper answers only once the starting turn is over: a result that arrived
    # during it would join that turn (messages join a running turn) instead of waking
    # an idle conversation, which is what these tests are about.
    started = threading.Event()
    fake.script("model-a", [Gate(started, helper_reply)])  # type: ignore[arg-type]
    svc = runtime.conversations
    conversation = await svc.create(ada, "plans")
    await svc.command(ada, conversation.id, "/model model-b")
    reply = await svc.chat(ada, "look up the tides in the background", conversation.id)
    started.set()
    assert (reply.status, reply.reply) == ("done", "I've started it.")
    (task,) = await TaskStore(runtime.user_runtimes[ada].handle.db).recent()
    return scheduler, conversation.id, task


async def _ended(runtime: Runtime, scheduler: Scheduler, ada: str, task: Task) -> Task:
    await scheduler.wait_run(f"task-{task.id}")
    relay = scheduler.tasks.relay_turns[task.id]
    assert (await relay).status == "done"  # the woken conversation answered
    ended = await TaskStore(runtime.user_runtimes[ada].handle.db).get(task.id)
    assert ended is not None and ended.relayed
    return ended


async def test_a_finished_task_comes_back_to_its_conversation_and_wakes_it(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    scheduler, origin, task = await _start(runtime, ada, fake_llm, "High tide at 14:02.")
    assert task.origin_conversation == origin and task.conversation_id != origin
    ended = await _ended(runtime, scheduler, ada, task)
    assert (ended.state, ended.result) == ("completed", "High tide at 14:02.")
    items = await runtime.conversations.history(ada, origin)
    texts = [(i.role, i.text) for i in items]
    assert texts[-1] == ("assistant", "Relayed.")
    assert texts[-2][0] == "user" and 'The background task "tide tables" is done.' in texts[-2][1]
    assert "High tide at 14:02." in texts[-2][1]
    # The helper's own work is in its conversation, stored as any turn.
    helper = await runtime.conversations.history(ada, task.conversation_id)
    assert [(i.role, i.text) for i in helper] == [
        ("user", "Find the tide tables for Genoa"),
        ("assistant", "High tide at 14:02."),
    ]
    (run,) = [
        r for r in await ScheduleStore(runtime.user_runtimes[ada].handle.db).runs() if r.task_id
    ]
    assert (run.outcome, run.conversation_id) == ("succeeded", task.conversation_id)


async def test_a_failed_task_comes_back_with_its_error_text(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    scheduler, origin, task = await _start(
        runtime, ada, fake_llm, Error(400, "the tide service is closed")
    )
    ended = await _ended(runtime, scheduler, ada, task)
    assert ended.state == "failed" and "the tide service is closed" in (ended.error or "")
    relayed = (await runtime.conversations.history(ada, origin))[-2].text
    assert 'The background task "tide tables" FAILED: it never reached a final' in relayed
    assert "the tide service is closed" in relayed


async def test_a_task_is_cancelled_from_the_tasks_api_and_the_limit_holds_meanwhile(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    scheduler, origin, task = await _start(runtime, ada, fake_llm, Hang())
    client: Client = await signed_in(make_client, "ada")
    r = await client.call("GET", "/api/schedule/tasks")
    assert r.status_code == 200, r.text
    listed = r.json()
    assert [(t["id"], t["state"]) for t in listed] in (
        [(task.id, "running")], [(task.id, "queued")]
    )  # fmt: skip
    # max_tasks = 1 in the test config: a second one is refused while this one runs.
    member = runtime.user_runtimes[ada].facade
    from skald.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="already queued or running"):
        await scheduler.tasks.start(member, origin, "more", "another task")
    # Someone else cannot see or cancel it.
    mum: Client = await signed_in(make_client, "mum")
    r = await mum.call("POST", f"/api/schedule/tasks/{task.id}/cancel")
    assert r.status_code == 404
    r = await client.call("POST", f"/api/schedule/tasks/{task.id}/cancel")
    assert r.status_code == 201 or r.status_code == 200, r.text
    ended = await _ended(runtime, scheduler, ada, task)
    assert ended.state == "cancelled"
    relayed = (await runtime.conversations.history(ada, origin))[-2].text
    assert 'The background task "tide tables" was STOPPED before it finished' in relayed


async def test_a_task_a_crash_cut_is_finished_after_the_restart_and_never_run_twice(
    runtime: Runtime, ada: str, fake_llm: FakeLLM, household: dict[str, str]
) -> None:
    scheduler, origin, task = await _start(runtime, ada, fake_llm, Hang())
    fake_llm.script("model-a", ["High tide at 14:02."])  # after the hung answer
    member = runtime.user_runtimes[ada].facade
    store = TaskStore(member.db)
    assert (await store.get(task.id)).state == "running"  # type: ignore[union-attr]
    # As after a kill -9: the member's runtime goes (its chores and its turns with it),
    # the task row still says running; a new runtime resumes her conversations.
    await runtime.detach(ada)
    user = await runtime.core.registry.get_user(ada)
    assert user is not None
    member = (await runtime.user_runtime(user)).facade
    await scheduler.tick()  # first sight of the new runtime
    ended = await _ended(runtime, scheduler, ada, task)
    assert (ended.state, ended.result) == ("completed", "High tide at 14:02.")
    runs = [r for r in await ScheduleStore(member.db).runs() if r.task_id == task.id]
    assert sorted(r.outcome for r in runs) == ["interrupted", "succeeded"]
    # The helper was given its task once; the origin heard of the end once.
    helper = await runtime.conversations.history(ada, task.conversation_id)
    assert [i.text for i in helper if i.role == "user"] == ["Find the tide tables for Genoa"]
    origin_items = await runtime.conversations.history(ada, origin)
    assert sum("is done." in i.text for i in origin_items if i.role == "user") == 1
    scheduler._seen.clear()
    await scheduler.tick()  # another start-up finds nothing left to do
    assert (await store.get(task.id)).relayed  # type: ignore[union-attr]
    origin_items = await runtime.conversations.history(ada, origin)
    assert sum("is done." in i.text for i in origin_items if i.role == "user") == 1


async def test_a_tasks_state_changes_reach_only_its_owners_open_clients(
    runtime: Runtime, ada: str, household: dict[str, str], fake_llm: FakeLLM
) -> None:
    from skald.core.events import Connection
    from skald.features.schedule.events import TasksChanged

    ada_tab = runtime.events.connect(ada, "ada-token")
    mum_tab = runtime.events.connect(household["mum"], "mum-token")
    scheduler, origin, task = await _start(runtime, ada, fake_llm, Hang())
    await scheduler.tasks.cancel(runtime.user_runtimes[ada].facade, task.id)
    await _ended(runtime, scheduler, ada, task)

    def drained(conn: Connection) -> list[object]:
        out = []
        while not conn.queue.empty():
            out.append(conn.queue.get_nowait())
        return out

    seen = [
        (e.task_id, e.state, e.origin_conversation)
        for e in drained(ada_tab)
        if isinstance(e, TasksChanged)
    ]
    assert seen == [
        (task.id, "queued", origin),
        (task.id, "running", origin),
        (task.id, "cancelled", origin),
    ]
    # Another member's socket sees nothing of ada's task, not even that it exists.
    assert [e for e in drained(mum_tab) if isinstance(e, TasksChanged)] == []
    assert task.id not in repr(drained(mum_tab))
