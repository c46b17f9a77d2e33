"""Usage and spending caps: the hourly aggregate follows the request rows, the stats
API answers counts (never content) to whom it should, and caps refuse a turn before
any model call on every channel, with the reset time, warning once at 80 %."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from conftest import PASSWORD, Client, MakeClient, post_chat, signed_in
from fake_llm import FakeLLM, Text
from schedule_support import runtime_fixture  # noqa: F401

from skald.core.runtime import Runtime
from skald.errors import LimitReachedError
from skald.features.schedule.scheduler import Scheduler
from skald.features.usage.caps import CapGate
from skald.features.usage.store import Caps, UsageStore

MARKER = "zebra-marker-7731"


async def _hourly(runtime: Runtime, user_id: str) -> tuple[int, int, int]:
    sql = (
        "SELECT coalesce(sum(turns),0), coalesce(sum(requests),0), "
        "coalesce(sum(input_tokens+output_tokens),0) FROM usage_hourly WHERE user_id=?"
    )
    db = runtime.core.registry.db
    row = await db.call(lambda c: c.execute(sql, (user_id,)).fetchone())
    return int(row[0]), int(row[1]), int(row[2])


async def test_each_turn_and_request_lands_in_the_hourly_aggregate_as_it_is_written(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    llm.script("model-a", [Text("one", input_tokens=100, output_tokens=20)])
    client = await signed_in(make_client, "ada")
    assert (await post_chat(client, "hello"))["status"] == "done"
    assert await _hourly(runtime, ada) == (1, 1, 120)
    llm.script("model-a", [Text("two", input_tokens=50, output_tokens=5)])
    await post_chat(client, "again")
    assert await _hourly(runtime, ada) == (2, 2, 175)


async def test_the_stats_answer_counts_of_ones_own_and_admins_see_everyone_never_text(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    llm.script("model-a", [Text(f"answer {MARKER}", input_tokens=30, output_tokens=7)])
    client = await signed_in(make_client, "ada")
    assert (await post_chat(client, f"question {MARKER}"))["status"] == "done"
    answers = []
    for rng in ("day", "week", "month"):
        r = await client.call("GET", f"/api/usage/stats?period={rng}")
        assert r.status_code == 200, r.text
        answers.append(r.text)
        stats = r.json()
        assert stats["turns"] == 1 and stats["tokens"] == 37 and stats["requests"] == 1
        assert [s["key"] for s in stats["members"]] == [ada]
        assert [s["name"] for s in stats["models"]] == ["model-a"]
        assert len(stats["starts"]) == {"day": 24, "week": 7, "month": 30}[rng]
    # Someone else's turn does not show in ada's figures; the admin sees both.
    await runtime.attach(await runtime.core.users.unlock("mum", PASSWORD))
    llm.script("model-a", [Text(f"x {MARKER}", input_tokens=1, output_tokens=1)])
    mum = await signed_in(make_client, "mum")
    await post_chat(mum, f"mum {MARKER}")
    r = await client.call("GET", "/api/usage/stats?period=day")
    assert r.json()["tokens"] == 37
    r = await client.call("GET", "/api/usage/stats?period=day&everyone=true")
    assert r.status_code == 403
    r = await mum.call("GET", "/api/usage/stats?period=day&everyone=true")
    assert r.status_code == 200 and r.json()["tokens"] == 39
    assert {s["name"] for s in r.json()["members"]} == {"ada", "mum"}
    answers.append(r.text)
    answers.append((await client.call("GET", "/api/usage/limits")).text)
    for text in answers:
        assert MARKER not in text


async def _set_caps(admin, scope: str, target: str, **caps: float) -> None:  # type: ignore[no-untyped-def]
    r = await admin.call("PUT", f"/api/usage/caps/{scope}/{target}", json=caps)
    assert r.status_code == 200, r.text


async def _ada_capped(make_client: MakeClient, ada: str, **caps: float) -> tuple[Client, Client]:
    """The admin mum gives ada these caps; mum's client and ada's, both signed in."""
    admin = await signed_in(make_client, "mum")
    await _set_caps(admin, "user", ada, **caps)
    return admin, await signed_in(make_client, "ada")


async def test_a_member_over_the_daily_cap_is_refused_before_any_model_call_with_the_reset_time(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    admin, client = await _ada_capped(make_client, ada, turns_day=2)
    llm.script("model-a", ["one", "two", "three"])
    first = await post_chat(client, "one")
    assert first["status"] == "done"
    await post_chat(client, "two", first["conversation_id"])
    asked = len(llm.bodies())
    # /api/chat: refused, in plain words, with when it resets; no model was asked.
    refused = await post_chat(client, "three", first["conversation_id"])
    assert refused["status"] == "failed" and refused["error_code"] == "limit_reached"
    assert "daily limit of 2 messages" in refused["error"]
    assert "resets at midnight (in " in refused["error"]
    assert len(llm.bodies()) == asked
    # The web: the message route takes it, the turn fails with the same sentence.
    cid = first["conversation_id"]
    async with runtime.conversations.subscribe(ada) as events:
        r = await client.call("POST", f"/api/conversations/{cid}/messages", json={"text": "4"})
        assert r.status_code in (200, 202), r.text
        async for ev in events:
            done = getattr(ev, "event", None)
            if type(done).__name__ == "TurnDone":
                assert done.error_code == "limit_reached"  # type: ignore[union-attr]
                assert "resets at midnight" in done.error  # type: ignore[union-attr]
                break
    assert len(llm.bodies()) == asked
    # Raising the cap unblocks at once.
    await _set_caps(admin, "user", ada, turns_day=10)
    assert (await post_chat(client, "five", cid))["status"] == "done"


async def test_the_80_percent_warning_arrives_once(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    _, client = await _ada_capped(make_client, ada, turns_day=10)
    llm.script("model-a", [str(i) for i in range(10)])
    cid = None
    for i in range(10):
        cid = (await post_chat(client, f"turn {i}", cid))["conversation_id"]
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=50)
    warnings = [n for n in notes if n.source == "usage"]
    assert len(warnings) == 1, [n.body for n in notes]
    assert "8 of today's 10 messages" in warnings[0].body


async def test_a_childs_role_cap_applies_to_every_child_and_a_members_own_caps_replace_it(
    runtime: Runtime, household: dict[str, str], llm: FakeLLM, make_client: MakeClient
) -> None:
    await runtime.core.users.create("kim", PASSWORD, "children")
    admin = await signed_in(make_client, "mum")
    await _set_caps(admin, "role", "children", turns_day=1)
    llm.script("model-a", ["a", "b", "c", "d"])
    for name in ("tim", "kim"):
        child = await signed_in(make_client, name)
        assert (await post_chat(child, "hi"))["status"] == "done"
        again = await post_chat(child, "hi again")
        assert again["error_code"] == "limit_reached", (name, again)
    # Tim's own caps replace the role's.
    await _set_caps(admin, "user", household["tim"], turns_day=5)
    tim = await signed_in(make_client, "tim")
    assert (await post_chat(tim, "more"))["status"] == "done"
    kim = await signed_in(make_client, "kim")
    assert (await post_chat(kim, "more"))["error_code"] == "limit_reached"


async def test_a_scheduled_job_over_the_cap_fails_with_the_reason_and_notifies(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    _, client = await _ada_capped(make_client, ada, tokens_day=10)
    llm.script("model-a", [Text("big", input_tokens=40, output_tokens=4)])
    assert (await post_chat(client, "use it up"))["status"] == "done"
    body = {"prompt": "Check the trains", "title": "Trains", "kind": "prompt", "in_minutes": 60}
    r = await client.call("POST", "/api/schedule/jobs", json=body)
    assert r.status_code == 201, r.text
    job = r.json()
    asked = len(llm.bodies())
    r = await client.call("POST", f"/api/schedule/jobs/{job['id']}/run")
    assert r.status_code == 202, r.text
    await runtime.server.state(Scheduler).wait_run(r.json()["id"])
    runs = (await client.call("GET", f"/api/schedule/jobs/{job['id']}/runs")).json()
    assert runs[0]["outcome"] == "failed"
    assert "daily limit of 10 tokens" in runs[0]["error"], runs[0]
    assert len(llm.bodies()) == asked
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=50)
    told = [n for n in notes if n.title == "Trains"]
    assert told and "daily limit of 10 tokens" in told[0].body and "resets" in told[0].body


async def test_caps_are_for_admins_and_bad_values_are_400(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    r = await admin.call("PUT", "/api/usage/caps/role/children", json={"turns_day": -1})
    assert r.status_code == 400
    r = await admin.call("PUT", "/api/usage/caps/role/nosuch", json={"turns_day": 1})
    assert r.status_code == 404
    r = await admin.call("PUT", "/api/usage/caps/user/nosuch", json={"turns_day": 1})
    assert r.status_code == 404
    await _set_caps(admin, "role", "children", cost_month=5.5)
    listed = (await admin.call("GET", "/api/usage/caps")).json()
    assert listed == [
        {
            "scope": "role",
            "target": "children",
            "caps": json.loads(
                json.dumps(
                    {
                        "turns_day": 0,
                        "tokens_day": 0,
                        "cost_day": 0.0,
                        "turns_month": 0,
                        "tokens_month": 0,
                        "cost_month": 5.5,
                    }
                )
            ),
        }
    ]
    assert (await admin.call("DELETE", "/api/usage/caps/role/children")).status_code == 204
    assert (await admin.call("GET", "/api/usage/caps")).json() == []


async def test_turns_started_at_once_cannot_both_take_the_last_turn_a_cap_allows(
    runtime: Runtime, ada: str
) -> None:
    """The check, its warning and the turn's count are one transaction: fourteen turns at
    the same moment against a cap of ten let exactly ten through, and warn once (a read
    and a count in two trips let all fourteen read "ten left" before any was counted)."""
    store = UsageStore(runtime.core.registry.db)
    await store.set_caps("user", ada, Caps(turns_day=10))
    gate = CapGate(store, runtime.notifications.notify)
    outcomes = await asyncio.gather(
        *(gate.check(ada, "member", ZoneInfo("UTC")) for _ in range(14)), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, LimitReachedError)]
    assert len(refused) == 4 and outcomes.count(None) == 10, outcomes
    assert (await _hourly(runtime, ada))[0] == 10  # the refused ones were not counted
    # The 80 % warning was due for the ninth and the tenth turn, recorded once.
    warned = await runtime.core.registry.db.call(
        lambda c: c.execute(
            "SELECT period, measure FROM usage_warnings WHERE user_id=?", (ada,)
        ).fetchall()
    )
    assert [tuple(w) for w in warned] == [(f"day:{datetime.now(UTC):%Y-%m-%d}", "turns")]
    with pytest.raises(LimitReachedError, match="daily limit of 10 messages"):
        await gate.check(ada, "member", ZoneInfo("UTC"))


async def test_no_cap_is_kept_until_a_cap_is_written_and_the_very_next_turn_is_judged(
    runtime: Runtime, ada: str, llm: FakeLLM, make_client: MakeClient
) -> None:
    """With no cap for the member or their role, the answer is kept and the turn counted
    without the turn waiting for the write (no trip before the model request); a cap
    written by the API or by any other writer on the registry's connection (raw SQL
    here) is seen by the very next turn, and the turns counted meanwhile count."""
    store = UsageStore(runtime.core.registry.db)
    gate = CapGate(store, runtime.notifications.notify)
    utc = ZoneInfo("UTC")
    await gate.check(ada, "member", utc)  # read: none applies, kept
    for _ in range(3):
        await gate.check(ada, "member", utc)
    assert (await _hourly(runtime, ada))[0] == 4  # every turn counted
    admin = await signed_in(make_client, "mum")
    await _set_caps(admin, "role", "member", turns_day=4)
    with pytest.raises(LimitReachedError, match="daily limit of 4 messages"):
        await gate.check(ada, "member", utc)
    await runtime.core.registry.db.call(lambda c: c.execute("DELETE FROM usage_caps"))
    await gate.check(ada, "member", utc)  # judged again: none applies
    await gate.check(ada, "member", utc)  # kept
    await runtime.core.registry.db.call(
        lambda c: c.execute(
            "INSERT INTO usage_caps(scope, target, turns_day, updated_at) "
            "VALUES ('user', ?, 6, '2026-01-01')",
            (ada,),
        )
    )
    with pytest.raises(LimitReachedError, match="daily limit of 6 messages"):
        await gate.check(ada, "member", utc)
    assert (await _hourly(runtime, ada))[0] == 6
