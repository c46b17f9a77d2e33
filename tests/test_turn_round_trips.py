"""How many trips to the database threads one chat turn makes (issue 22, goal 4).

Every `db.call` / `db.transaction` is a hand-off to a database thread and back; under
load each costs a GIL and an event-loop wait, and a turn's setup pays them one after
the other. These tests pin the number, per database, so a change that adds a trip (a
re-read of the member, a second status write...) fails here instead of going unseen
until the next benchmark. They count, they never time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import pytest
from conftest import Client, MakeClient, post_chat, signed_in
from fake_llm import FakeLLM, Text

import skald.llm.wire as wire
from skald.core.runtime import Runtime
from skald.store.database import Database


def _kind(name: str) -> str:
    return "owner" if name.startswith("owner-") else name


class TripCounter:
    """Counts `Database._submit` (the one way work reaches a database thread) by
    database, and notes the count when the model request leaves; `Database.send`'s
    (work the turn does not wait for) are counted again in `unwaited`.

    Only work done in the context where `counting` was set is counted: the request runs
    in the test's task (httpx's ASGI transport), and the tasks it starts (the
    conversation's runner, the memory indexes' reads) copy that context; the server's
    background services (scheduler ticks, purges) run in their own and are not counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.trips: Counter[str] = Counter()
        self.callers: list[str] = []
        self.at_request: list[Counter[str]] = []
        self.unwaited: Counter[str] = Counter()
        self.unwaited_at_request: list[Counter[str]] = []
        self.counting: ContextVar[bool] = ContextVar("counting", default=False)
        submit = Database._submit
        send = Database.send
        post_stream = wire.post_stream

        def counted(db: Database, fn: Any) -> Any:
            if self.counting.get():
                self.trips[_kind(db.name)] += 1
                self.callers.append(f"{_kind(db.name)}: {getattr(fn, '__qualname__', fn)}")
            return submit(db, fn)

        def sent(db: Database, fn: Any) -> Any:
            if self.counting.get():
                self.unwaited[_kind(db.name)] += 1
            return send(db, fn)

        @asynccontextmanager
        async def noted(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            if self.counting.get():
                self.at_request.append(Counter(self.trips))
                self.unwaited_at_request.append(Counter(self.unwaited))
            async with post_stream(*args, **kwargs) as response:
                yield response

        monkeypatch.setattr(Database, "_submit", counted)
        monkeypatch.setattr(Database, "send", sent)
        monkeypatch.setattr(wire, "post_stream", noted)


async def _ada_with_a_model(make_client: MakeClient, fake: FakeLLM) -> Client:
    admin = await signed_in(make_client, "mum")
    r = await admin.call(
        "POST",
        "/api/llm/providers",
        json={
            "name": "Fake",
            "kind": "openai_compatible",
            "base_url": fake.base_url_openai,
            "api_key": "sk-test-123",
        },
    )
    assert r.status_code == 201, r.text
    r = await admin.call(
        "POST",
        "/api/llm/models",
        json={"provider_id": r.json()["id"], "model": "m", "name": "m", "priority": 1},
    )
    assert r.status_code == 201, r.text
    ada = await signed_in(make_client, "ada")
    return ada


async def test_a_chat_turn_makes_a_pinned_number_of_database_round_trips(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ada = await _ada_with_a_model(make_client, fake_llm)
    fake_llm.script("m", [Text("hello")] * 3)
    # Two turns first: the catalogue, the prompt text and the storage figure are kept
    # between turns, so the third is a member's ordinary turn.
    conversation_id = (await post_chat(ada, "one"))["conversation_id"]
    await post_chat(ada, "two", conversation_id)
    counter = TripCounter(monkeypatch)
    counting = counter.counting.set(True)
    reply = await post_chat(ada, "three", conversation_id)
    counter.counting.reset(counting)
    assert reply["status"] == "done" and reply["reply"] == "hello"
    trace = "\n".join(counter.callers)
    assert len(counter.at_request) == 1, trace
    # Before the model request: the session (0: kept from turn two's request, as no
    # session, member or role row was written since), the member and role as they are now
    # with the plugins' switches (0: kept likewise, skald/store/member_now.py), the
    # profile with its directory and supervisors (0, people: kept), the two memory
    # indexes (0: kept while no note was written), the spending caps (0, usage: that
    # none applies is kept while no cap is written) with the turn's count (1, sent and
    # not waited for: skald/features/usage/caps.py); the message's claim, which proves the conversation is
    # theirs, marks it running and names it in one transaction, and whose mark and copy
    # the runner takes as its own (1, skald/core/hub.py), whether the conversation is a
    # project's (0, projects: kept) and the user message stored with the history read
    # back (1).
    # `POST /api/chat` (this test's door, issue 28) tells which files the turn wrote from
    # the turn's own finished calls: no read of the history before or after (0).
    assert counter.at_request[0] == Counter(registry=1, owner=2), trace
    assert counter.unwaited_at_request[0] == Counter(registry=1), trace
    # The whole turn adds the usage row in each database and the answer and the idle
    # status in the member's, and the request log's keep (requestlog: one transaction in
    # the member's database that writes the payload only when they opted in).
    assert counter.trips == Counter(registry=2, owner=6), trace
