"""Jobs made without a model: the Tasks page's preview and create/edit API, and the
chat's `/remind`. The preview says when in words in the member's language and zone and
refuses what create refuses (a past time, a bad cron, an interval under the minimum,
the active-jobs limit) with a clear 400; a reminder's run notifies its own text and
never calls a model; a job runs with the model it was made with, editable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from conftest import MakeClient, add_models, signed_in
from fake_llm import FakeLLM
from schedule_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    with_clock,
)

from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.schedule.remind import parse_remind
from skald.features.schedule.store import ScheduleStore
from skald.features.schedule.words import describe, when_text

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome (CEST)


def store_of(runtime: Runtime, user_id: str) -> ScheduleStore:
    return ScheduleStore(runtime.user_runtimes[user_id].handle.db)


async def _notes(runtime: Runtime, user_id: str) -> list[tuple[str, str]]:
    notes, _ = await (await runtime.notifications.store(user_id)).page(limit=10)
    return [(n.title, n.body) for n in notes]


async def test_the_preview_says_when_in_words_and_refuses_what_create_refuses(
    runtime: Runtime,
    ada: str,
    make_client: MakeClient,
) -> None:
    scheduler, _ = with_clock(runtime, MONDAY_9)
    client = await signed_in(make_client, "ada")
    r = await client.call("POST", "/api/schedule/preview", json={"cron": "30 7 * * 1-5"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "description": "every weekday at 7:30, next tomorrow at 7:30",
        "next_runs": ["2026-06-02T05:30:00Z", "2026-06-03T05:30:00Z", "2026-06-04T05:30:00Z"],
        "next_runs_text": [
            "tomorrow at 7:30", "Wednesday 3 June at 7:30", "Thursday 4 June at 7:30"
        ],
        "zone": "Europe/Rome",
    }  # fmt: skip
    r = await client.call("POST", "/api/schedule/preview", json={"in_minutes": 2})
    assert r.json()["description"] == "once, today at 9:02", r.text
    assert r.json()["next_runs"] == ["2026-06-01T07:02:00Z"]
    r = await client.call("POST", "/api/schedule/preview", json={"at": "2026-06-08T18:30"})
    assert r.json()["description"] == "once, Monday 8 June at 18:30", r.text

    refused = {
        "in the past": {"at": "2026-06-01T08:59"},
        "is not valid": {"cron": "61 * * * *"},
        "exactly one": {"cron": "0 8 * * *", "at": "2026-06-02T08:00"},
        "shortest interval allowed is 60 s": {"cron": "*/30 * * * * *"},
        "no chat model": {"cron": "0 8 * * *", "model_id": "nope"},
    }
    for words, body in refused.items():
        for path in ("/api/schedule/preview", "/api/schedule/jobs"):
            sent = {**body, "prompt": "water the plants"} if path.endswith("jobs") else body
            r = await client.call("POST", path, json=sent)
            assert r.status_code == 400 and words in r.text, (path, body, r.text)
    assert await ScheduleStore(runtime.user_runtimes[ada].handle.db).jobs() == []

    # At the active-jobs limit, the preview says so before the member types anything more.
    scheduler.config = msgspec.structs.replace(scheduler.config, max_active_jobs=1)
    r = await client.call("POST", "/api/schedule/jobs", json={"prompt": "a", "in_minutes": 5})
    assert r.status_code == 201, r.text
    first = r.json()["id"]
    for path in ("/api/schedule/preview", "/api/schedule/jobs"):
        r = await client.call("POST", path, json={"prompt": "b", "in_minutes": 5}
                              if path.endswith("jobs") else {"in_minutes": 5})  # fmt: skip
        assert r.status_code == 400 and "the most allowed is 1" in r.text, (path, r.text)
    # ...but editing the job that holds the place is previewed (it is not counted twice).
    r = await client.call("POST", "/api/schedule/preview", json={"in_minutes": 9, "job_id": first})
    assert r.status_code == 200, r.text


def test_the_words_read_common_schedules_in_english_italian_and_french() -> None:
    assert describe("0 8 * * *", "it") == "ogni giorno alle 8:00"
    assert describe("15 18 * * 6,0", "fr") == "chaque samedi et dimanche à 18:15"
    assert describe("30 7 * * 1-5", "en-GB") == "every weekday at 7:30"
    assert describe("*/15 9-17 * * *", "de") == "on the schedule `*/15 9-17 * * *`"
    now = datetime(2026, 11, 28, 12, 0)
    assert when_text(datetime(2026, 12, 1, 7, 30), now, "en") == "Tuesday 1 December at 7:30"
    assert when_text(datetime(2027, 1, 4, 7, 30), now, "it") == "lunedì 4 gennaio 2027 alle 7:30"
    assert when_text(datetime(2026, 11, 29, 9, 0), now, "fr") == "demain à 9:00"


@pytest.mark.parametrize(
    ("typed", "due", "text"),
    [
        ("in 2 minutes check the oven", "2026-06-01 09:02", "check the oven"),
        ("in 1 hour call back", "2026-06-01 10:00", "call back"),
        ("at 18:30 call grandma", "2026-06-01 18:30", "call grandma"),
        ("at 8:30 too late today", "2026-06-02 08:30", "too late today"),
        ("tomorrow 9:00 take the bins out", "2026-06-02 09:00", "take the bins out"),
        ("domani alle 7 sveglia", "2026-06-02 07:00", "sveglia"),
        ("tra 10 minuti il forno", "2026-06-01 09:10", "il forno"),
        ("demain à 9h15 sortir les poubelles", "2026-06-02 09:15", "sortir les poubelles"),
        ("dans 3 jours arroser", "2026-06-04 09:00", "arroser"),
    ],
)
def test_remind_reads_times_in_english_italian_and_french(typed: str, due: str, text: str) -> None:
    from zoneinfo import ZoneInfo

    now = MONDAY_9.astimezone(ZoneInfo("Europe/Rome"))
    at, got = parse_remind(typed, now, "en")
    assert (at.strftime("%Y-%m-%d %H:%M"), got) == (due, text)


@pytest.mark.parametrize(
    "typed", ["", "check the oven", "in 2 parsecs x", "at 25:00 x", "in 0 minutes x",
              "in 999999 days x", "tomorrow the bins", "in 2 minutes", "9 things"]
)  # fmt: skip
def test_a_remind_it_cannot_read_is_refused_with_an_example(typed: str) -> None:
    now = MONDAY_9.astimezone(UTC)
    with pytest.raises(InvalidInputError, match="/remind in 10 minutes check the oven"):
        parse_remind(typed, now, "en")
    with pytest.raises(InvalidInputError, match="/remind tra 10 minuti"):
        parse_remind(typed, now, "it")


async def test_remind_in_the_chat_sets_a_reminder_whose_run_notifies_its_text_with_no_model(
    runtime: Runtime,
    ada: str,
    llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    # A model is set up and scripted: had anything called it, the requests would show.
    llm.script("model-a", ["I should never be asked"])
    client = await signed_in(make_client, "ada")
    conversation = (await client.call("POST", "/api/conversations", json={})).json()["id"]
    commands = (await client.call("GET", "/api/chat/commands")).json()
    assert "remind" in [c["name"] for c in commands]

    send = f"/api/conversations/{conversation}/messages"
    r = await client.call("POST", send, json={"text": "/remind in 2 minutes check the oven"})
    assert r.status_code == 200, r.text
    assert r.json()["command"] == "remind"
    assert r.json()["result"] == "Reminder set for today at 9:02: check the oven"
    # A bad one: a clear 400 with an example, no job, no turn.
    r = await client.call("POST", send, json={"text": "/remind the oven please"})
    assert r.status_code == 400 and "/remind in 10 minutes check the oven" in r.text, r.text
    r = await client.call("POST", send, json={"text": "/remind at 25:99 x"})
    assert r.status_code == 400, r.text
    # In the language the member chose since signing in, the answer too.
    r = await client.call("PATCH", "/api/auth/me", json={"locale": "it"})
    assert r.status_code == 200, r.text
    r = await client.call("POST", send, json={"text": "/remind domani alle 7 sveglia"})
    assert r.json()["result"] == "Promemoria per domani alle 7:00: sveglia", r.text
    r = await client.call("POST", send, json={"text": "/remind il forno"})
    assert r.status_code == 400 and "/remind tra 10 minuti" in r.text, r.text
    r = await client.call("POST", "/api/schedule/preview", json={"cron": "0 8 * * 6"})
    assert (
        r.json()["description"]
        == "ogni sabato alle 8:00, la prossima volta sabato 6 giugno alle 8:00"
    )
    sveglia = next(j for j in await store_of(runtime, ada).jobs() if j.prompt == "sveglia")
    await (await scheduler.jobs(runtime.user_runtimes[ada].facade)).delete(sveglia.id)

    store = store_of(runtime, ada)
    (job,) = await store.jobs()
    assert (job.kind, job.prompt, job.run_at, job.state) == (
        "reminder", "check the oven", "2026-06-01T07:02:00Z", "active"
    )  # fmt: skip
    clock.set(MONDAY_9 + timedelta(minutes=2, seconds=1))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    (done,) = await store.runs(job.id)
    assert done.outcome == "succeeded"
    assert (await store.get(job.id)).state == "done"  # type: ignore[union-attr]
    assert await _notes(runtime, ada) == [("⏰ check the oven", "check the oven")]
    assert llm.bodies() == []  # no model was asked, at any step
    assert await runtime.conversations.history(ada, conversation) == []


async def test_remind_is_neither_offered_to_nor_run_for_a_member_who_may_not_schedule(
    runtime: Runtime,
    household: dict[str, str],
    fake_llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a")
    tim = await signed_in(make_client, "tim")  # the children's role: no schedule.use
    commands = (await tim.call("GET", "/api/chat/commands")).json()
    assert "remind" not in [c["name"] for c in commands]
    conversation = (await tim.call("POST", "/api/conversations", json={})).json()["id"]
    r = await tim.call(
        "POST", f"/api/conversations/{conversation}/messages",
        json={"text": "/remind in 2 minutes check the oven"},
    )  # fmt: skip
    assert r.status_code == 400 and "/remind is not available to you" in r.text, r.text
    member = runtime.user_runtimes[household["tim"]].facade
    assert await ScheduleStore(member.db).jobs() == []
    assert fake_llm.bodies() == []


async def test_a_job_runs_with_its_own_model_and_notifies_its_answer_and_the_page_edits_it(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
    make_client: MakeClient,
) -> None:
    scheduler, clock = with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a", "model-b")  # model-a first: AUTO's pick
    client = await signed_in(make_client, "ada")
    listed = (await client.call("GET", "/api/models")).json()
    model_b = next(m["id"] for m in listed if m["name"] == "model-b")
    body = {"prompt": "Tell me the weather", "kind": "prompt", "in_minutes": 5,
            "model_id": model_b}  # fmt: skip
    r = await client.call("POST", "/api/schedule/jobs", json=body)
    assert r.status_code == 201, r.text
    job = r.json()
    r = await client.call(
        "POST", "/api/schedule/jobs", json={"prompt": "Bins", "cron": "0 19 * * 1"}
    )
    assert r.status_code == 201, r.text
    listed = {
        j["title"]: j["when_text"] for j in (await client.call("GET", "/api/schedule/jobs")).json()
    }
    assert listed == {"Tell me the weather": "once, today at 9:05", "Bins": "every Monday at 19:00"}
    assert (job["title"], job["model_id"], job["kind"]) == (
        "Tell me the weather",
        model_b,
        "prompt",
    )

    fake_llm.script("model-b", ["Sunny, 24 degrees."])
    clock.set(MONDAY_9 + timedelta(minutes=5, seconds=1))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    assert [b["model"] for b in fake_llm.bodies()] == ["model-b"]
    assert await _notes(runtime, ada) == [("Tell me the weather", "Sunny, 24 degrees.")]

    # Edited on the Tasks page: back to AUTO, a new time; the next run uses model-a.
    r = await client.call(
        "PATCH", f"/api/schedule/jobs/{job['id']}", json={"model_id": "", "in_minutes": 10}
    )
    assert r.status_code == 200 and r.json()["model_id"] is None, r.text
    assert r.json()["state"] == "active"
    r = await client.call("PATCH", f"/api/schedule/jobs/{job['id']}", json={"model_id": "x"})
    assert r.status_code == 400 and "no chat model" in r.text, r.text
    fake_llm.script("model-a", ["Cloudy."])
    clock.set(MONDAY_9 + timedelta(minutes=15, seconds=2))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    assert [b["model"] for b in fake_llm.bodies()] == ["model-b", "model-a"]


async def test_a_job_asked_for_in_a_conversation_keeps_that_conversations_model(
    runtime: Runtime,
    ada: str,
    fake_llm: FakeLLM,
) -> None:
    from fake_llm import Call

    scheduler, clock = with_clock(runtime, MONDAY_9)
    await add_models(runtime, fake_llm, "model-a", "model-b")
    chosen = (await runtime.conversations.create(ada)).id
    await runtime.conversations.command(ada, chosen, "/model model-b")
    create = {"mode": "create", "title": "Plants", "prompt": "Water the plants", "in_minutes": 3}
    fake_llm.script("model-b", [[Call("schedule", create)], "Set.", "Watered."])
    done = await runtime.conversations.chat(ada, "water the plants in 3 minutes", chosen)
    assert done.status == "done", done
    (job,) = await ScheduleStore(runtime.user_runtimes[ada].handle.db).jobs()
    assert job.model_id is not None
    clock.set(MONDAY_9 + timedelta(minutes=3, seconds=1))
    (run,) = await scheduler.tick()
    await scheduler.wait_run(run.id)
    assert [b["model"] for b in fake_llm.bodies()] == ["model-b", "model-b", "model-b"]
