"""Connector events and event triage (issue 29, items 2 and 3), on real SQLCipher files, a
real MCP server process (tests/mcp_servers/events_server.py) and a scripted model: the
server's own notifications become events in the member's database (its log lines and
list changes do not); with "only school emails" in notifications.md the triage model
notifies the school's mail with its refs and leaves the shop's out (no call, no
notification); `read_notification` then hands the refs to the member's assistant; no
pending events means no run and no run row; one member's events, notes and
notifications never reach another's triage or tool."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import PASSWORD, add_models
from connector_support import installed_for_ada, python_connector, running
from fake_llm import Call, FakeLLM

from skald.agent import CancelScope, ToolContext
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors import events
from skald.features.connectors.events import EventStore, RateGate, event_from
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.read_notification import ReadNotification
from skald.features.connectors.store import OWNER_FEATURE
from skald.features.connectors.triage import AGENT_ID, NOT_CREATED
from skald.features.system_agents.runner import SystemAgents
from skald.features.system_agents.store import RunLog
from skald.mcp.session import is_news
from skald.store.migrations import Feature, SchemaPlan, ledger, migrate_features
from skald.store.migrations.owner import OWNER
from skald.store.owner import OwnerStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PREFERENCES = (
    "# Notification preferences\n_Updated: 2026-12-01_\n\n## General\n\n"
    "## Email\n- Only school emails — 2026-12-01\n"
)
SCHOOL = {
    "method": "notifications/email/received",
    "params": {
        "summary": "Sara (St Mary's school): Friday's trip needs a signed form",
        "from": "sara@stmarys.example",
        "at": "2026-12-02T09:00:00Z",
        "refs": {"message_id": "m-school-1", "thread_id": "t-school"},
    },
}
SHOP = {
    "method": "notifications/email/received",
    "params": {
        "subject": "50% off garden furniture, this weekend only",
        "from": "deals@shop.example",
        "message_id": "m-shop-2",
    },
}


def _feed(root: Path) -> Path:
    python_connector(root, "mail", "events_server.py")
    write_index(root, 1)
    return root


def _runner(rt: Runtime) -> SystemAgents:
    return rt.server.state(SystemAgents)


def _db(rt: Runtime, user_id: str) -> Any:
    return rt.user_runtimes[user_id].handle.db


async def _ignore(event: object) -> None:
    return None


def _ctx() -> ToolContext:
    return ToolContext(
        conversation_id="c", call_id="k", depth=0, cancel=CancelScope(), sink=_ignore
    )


async def _stored(store: EventStore, n: int) -> None:
    for _ in range(200):
        if (await store.count())[0] >= n:
            await asyncio.sleep(0.3)  # and nothing more arrives
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {n} events: {await store.count()}")


async def _bob(rt: Runtime) -> str:
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user.id
    await rt.attach(await rt.core.users.unlock("bob", PASSWORD))
    return bob


async def test_only_school_emails_one_event_notified_with_refs_the_other_silent_and_read_back(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    await add_models(runtime, fake_llm, "m")
    ada = await installed_for_ada(runtime, household, _feed(tmp_path / "feed"), "mail")
    bob = await _bob(runtime)
    await OwnerStore(_db(runtime, ada)).note_put("notifications.md", PREFERENCES)
    await OwnerStore(_db(runtime, bob)).note_put("notifications.md", "- BOB-ONLY-RULE\n")
    inst = await running(runtime, "", "mail", failed_ends=True)
    assert inst.session is not None

    # The server emits two events (and a log line and a list change, which are not).
    result = await inst.session.call_tool("emit", {"events": [SCHOOL, SHOP]})
    assert not result.is_error
    store = EventStore(_db(runtime, ada))
    await _stored(store, 2)
    assert await store.count() == (2, 2)
    school, shop = await store.pending(10)
    assert (school.server, school.kind, school.at) == (
        "mail",
        "email/received",
        "2026-12-02T09:00:00Z",
    )
    assert school.refs == {"message_id": "m-school-1", "thread_id": "t-school"}
    assert shop.summary == "50% off garden furniture, this weekend only"
    assert shop.refs == {"message_id": "m-shop-2"}
    assert not [e for e in inst.events if e.kind not in ("state", "log")]  # not in memory
    assert await EventStore(_db(runtime, bob)).count() == (0, 0)  # bob never switched it on

    # The triage model notifies the school's mail and leaves the shop's out.
    fake_llm.script(
        "m",
        [
            [
                Call(
                    "notify",
                    {
                        "event_id": school.id,
                        "source": "mail",
                        "kind": "email/received",
                        "summary": "Sara from St Mary's: Friday's trip needs a signed form.",
                        "event_time": school.at,
                        "refs": school.refs,
                    },
                )
            ],
            "",
        ],
    )
    before = len(fake_llm.bodies())
    assert await _runner(runtime).pass_once(only=AGENT_ID) == 1  # ada's pass; bob has none
    first, second = fake_llm.bodies()[before:]
    assert [t["function"]["name"] for t in first["tools"]] == ["notify"]  # one tool only
    system, batch = first["messages"][0]["content"], first["messages"][1]["content"]
    assert "- Only school emails — 2026-12-01" in system
    assert f"### user-memory/index.md\n\n{NOT_CREATED}" in system  # no index yet
    assert "BOB-ONLY-RULE" not in json.dumps(fake_llm.bodies())
    assert school.summary in batch and shop.summary in batch and "m-shop-2" in batch
    assert second["messages"][-1]["role"] == "tool"
    (only_call,) = second["messages"][-2]["tool_calls"]  # one call: none for the shop's mail
    assert json.loads(only_call["function"]["arguments"])["event_id"] == school.id

    # One notification (none about the filtered mail), its refs kept for the assistant.
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert [(n.title, n.source) for n in notes] == [
        ("mail: Sara from St Mary's: Friday's trip needs a signed form.", "events")
    ]
    (sent,) = await store.notifications(10)
    assert (sent.source, sent.kind, sent.event_at) == ("mail", "email/received", school.at)
    assert sent.refs == {"message_id": "m-school-1", "thread_id": "t-school"}
    assert await store.count() == (2, 0)  # both triaged
    (run,) = await RunLog(_db(runtime, ada)).runs()
    assert (run.agent_id, run.status) == (AGENT_ID, "completed")
    assert (run.stats["events"], run.stats["notified"]) == (2, 1)
    assert await RunLog(_db(runtime, bob)).runs() == []  # bob: no events, no run row
    assert await RunLog(_db(runtime, bob)).last_attempt(AGENT_ID) is not None  # looked

    # Nothing pending any more: no run, no row, no model call, even forced.
    requests = len(fake_llm.bodies())
    assert await _runner(runtime).pass_once(only=AGENT_ID, force=True) == 0
    assert len(fake_llm.bodies()) == requests
    assert len(await RunLog(_db(runtime, ada)).runs()) == 1

    # ada's assistant reads it back, refs and all, in a real turn.
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake_llm.script("m", [[Call("read_notification", {})], "It was Sara about the trip."])
    sent_turn = await svc.send(ada, conversation.id, "what was that email from the school?")
    assert isinstance(sent_turn, Sent)
    reply = await svc.wait(ada, sent_turn)
    assert reply.reply == "It was Sara about the trip.", reply
    tool_text = fake_llm.bodies()[-1]["messages"][-1]["content"]
    assert "m-school-1" in tool_text and "t-school" in tool_text and "m-shop-2" not in tool_text
    # With connectors, her assistant is told how to keep notifications.md (the skeleton).
    turn = fake_llm.bodies()[-2]
    assert "read_notification" in [t["function"]["name"] for t in turn["tools"]]
    assert "## Notification preferences" in turn["messages"][0]["content"]
    assert "`_Updated: YYYY-MM-DD_`" in turn["messages"][0]["content"]

    # bob's tool reads bob's database only.
    bobs = await ReadNotification(_db(runtime, bob)).run({}, _ctx())
    assert bobs.content == "No notifications from connector events yet."


async def test_with_no_pending_events_triage_opens_no_run_and_calls_no_model(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, ada: str
) -> None:
    await add_models(runtime, fake_llm, "m")
    assert await _runner(runtime).pass_once(only=AGENT_ID) == 0
    assert await RunLog(_db(runtime, ada)).runs() == []
    assert fake_llm.bodies() == []


async def test_a_household_connector_s_events_go_to_each_member_who_switched_it_on(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Each member who uses the household connector gets their own copy, triaged by their
    own pass with their own notes; the model's answer for one never reaches the other."""
    await add_models(runtime, fake_llm, "m")
    ada = await installed_for_ada(runtime, household, _feed(tmp_path / "feed"), "mail")
    bob = await _bob(runtime)
    from skald.features.connectors import service

    connectors = service.require(runtime.server)
    await connectors.store.set_active("mail", bob, True)
    assert connectors.supervisor is not None
    await connectors.supervisor.member_changed(bob)
    inst = await running(runtime, "", "mail", failed_ends=True)
    assert inst.session is not None
    await inst.session.call_tool("emit", {"events": [SCHOOL]})
    for user_id in (ada, bob):
        await _stored(EventStore(_db(runtime, user_id)), 1)
    (ada_event,) = await EventStore(_db(runtime, ada)).pending(5)
    (bob_event,) = await EventStore(_db(runtime, bob)).pending(5)
    assert ada_event.id != bob_event.id

    # ada's pass notifies; bob's stays silent. Each notification lands with its owner.
    fake_llm.script(
        "m",
        [
            [Call("notify", {"source": "mail", "kind": "k", "summary": "for ada only"})],
            "",
            "",  # bob's pass: no call
        ],
    )
    assert await _runner(runtime).pass_once(only=AGENT_ID) == 2
    ada_notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    bob_notes, _ = await (await runtime.notifications.store(bob)).page(limit=10)
    assert [n.title for n in ada_notes] == ["mail: for ada only"] and bob_notes == []
    assert await EventStore(_db(runtime, bob)).notifications(10) == []
    assert (await EventStore(_db(runtime, bob)).count())[1] == 0


async def test_a_failed_model_call_leaves_the_batch_pending_and_the_run_failed(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, ada: str
) -> None:
    await add_models(runtime, fake_llm, "m")
    store = EventStore(_db(runtime, ada))
    await store.add(event_from("mail", "notifications/email/received", SHOP["params"], "x"))
    fake_llm.script("m", [400])
    assert await _runner(runtime).pass_once(only=AGENT_ID) == 1
    (run,) = await RunLog(_db(runtime, ada)).runs()
    assert run.status == "failed"
    assert await store.count() == (1, 1)


async def test_events_are_bounded_by_count_and_by_age(
    runtime: Runtime, household: dict[str, str], ada: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "KEEP_EVENTS", 5)
    store = EventStore(_db(runtime, ada))
    old = event_from("mail", "notifications/x", {"summary": "old"}, "2026-01-01T00:00:00Z")
    await store.add(old, received="2000-01-01T00:00:00Z")
    for i in range(7):
        await store.add(event_from("mail", "notifications/x", {"summary": f"e{i}"}, "t"))
    kept = await store.pending(50)
    assert [e.summary for e in kept] == ["e2", "e3", "e4", "e5", "e6"]


def test_bookkeeping_notifications_are_no_events_and_an_event_is_cut_to_its_limits() -> None:
    for method in (
        "notifications/progress",
        "notifications/tools/list_changed",
        "notifications/roots/list_changed",
        "notifications/initialized",
        "notifications/tasks/status",
        "sampling/whatever",
    ):
        assert not is_news(method), method
    assert is_news("notifications/email/received")
    huge = {"subject": "s" * 5000, "body": "b" * 20_000, "uri": "x://1", "flag": True}
    event = event_from("mail", "notifications/email/received", huge, "2026-12-02T10:00:00Z")
    assert len(event.summary) == events.MAX_SUMMARY and len(event.detail) < 4100
    assert event.refs == {"uri": "x://1"} and event.at == "2026-12-02T10:00:00Z"
    assert event_from("m", "notifications/ping", {}, "t").summary == "ping"


def test_an_instance_sending_more_than_its_rate_has_the_rest_dropped() -> None:
    gate = RateGate(per_minute=3)
    assert [gate.admit(10.0) for _ in range(5)] == [True, True, True, False, False]
    assert gate.dropped == 2 and gate.admit(71.0)


@pytest.mark.parametrize("version", range(len(OWNER.history) + 1))
def test_the_events_migration_runs_on_every_old_owner_database_keeping_secrets(
    tmp_path: Path, version: int
) -> None:
    from migration_helpers import build_at

    conn = apsw.Connection(str(tmp_path / "o.db"))
    build_at(conn, OWNER, version)
    v1 = Feature("connectors", OWNER_FEATURE.migrations[:1])
    migrate_features(conn, OWNER.with_features([v1]))
    conn.execute("INSERT INTO connector_secrets VALUES ('mail', 'KEY', 'v', 't')")
    applied = migrate_features(conn, OWNER.with_features([OWNER_FEATURE]))
    assert applied == [("connectors", 2)]
    assert ledger(conn)["connectors"] == 2
    assert conn.execute("SELECT * FROM connector_secrets").fetchall() == [("mail", "KEY", "v", "t")]
    assert migrate_features(conn, OWNER.with_features([OWNER_FEATURE])) == []
    fresh = apsw.Connection(str(tmp_path / "fresh.db"))
    migrate_features(fresh, OWNER.with_features([OWNER_FEATURE]))

    def schema(c: apsw.Connection) -> list[Any]:
        return sorted(c.execute("SELECT type, name, sql FROM sqlite_master").fetchall())

    assert schema(conn) == schema(fresh)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert isinstance(OWNER, SchemaPlan)


async def test_a_model_repeating_notify_for_one_event_interrupts_the_member_once(
    runtime: Runtime, household: dict[str, str], fake_llm: FakeLLM, ada: str
) -> None:
    await add_models(runtime, fake_llm, "m")
    store = EventStore(_db(runtime, ada))
    event_id = await store.add(event_from("mail", SCHOOL["method"], SCHOOL["params"], "t"))
    again = {"event_id": event_id, "source": "mail", "kind": "k", "summary": "Sara wrote"}
    other = {"source": "mail", "kind": "k", "summary": "made up, about no event"}
    fake_llm.script(
        "m", [[Call("notify", again), Call("notify", again)], [Call("notify", other)], ""]
    )
    assert await _runner(runtime).pass_once(only=AGENT_ID) == 1
    notes, _ = await (await runtime.notifications.store(ada)).page(limit=10)
    assert [n.title for n in notes] == ["mail: Sara wrote"]  # one event, one notification
    (run,) = await RunLog(_db(runtime, ada)).runs()
    assert (run.stats["notified"], run.stats["refused"]) == (1, 2)
    results = [m for m in fake_llm.bodies()[1]["messages"] if m["role"] == "tool"]
    assert "already notified" in results[1]["content"]


def test_the_system_agents_page_names_event_triage_and_its_counters_in_every_language() -> None:
    folder = Path(__file__).resolve().parent.parent / "skald/features/system_agents/i18n"
    keys = ["sysagents.agent.event_triage", "sysagents.about.event_triage"] + [
        f"sysagents.count_{k}" for k in ("events", "batches", "notified", "refused")
    ]
    for lang in ("en", "it", "fr"):
        texts = json.loads((folder / f"{lang}.json").read_text(encoding="utf-8"))
        assert [k for k in keys if not texts.get(k)] == [], lang


def test_a_personal_instance_s_events_go_to_its_owner_alone() -> None:
    from types import SimpleNamespace
    from typing import cast

    from skald.features.connectors.supervisor import ConnectorInstance, Supervisor

    sup = Supervisor(cast(Any, None))
    ada, bob, tim = (cast(Any, SimpleNamespace(name=n)) for n in ("ada", "bob", "tim"))
    sup.members = {"ada": ada, "bob": bob, "tim": tim}
    sup.wanted = {"ada": {"mail"}, "bob": {"mail"}, "tim": set()}

    def inst(owner: str) -> ConnectorInstance:
        return cast(ConnectorInstance, SimpleNamespace(owner=owner, name="mail"))

    assert sup.event_recipients(inst("bob")) == [bob]  # ada uses a "mail" too: not hers
    assert sup.event_recipients(inst("")) == [ada, bob]  # tim did not switch it on
    del sup.members["bob"]
    assert sup.event_recipients(inst("bob")) == []  # locked: nowhere to write
