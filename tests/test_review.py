"""The nightly conversation review, end to end on real SQLCipher files with a scripted
model: a worrying day writes exactly one report that both parents (and nobody else) can
read; a quiet day writes none; a second pass the same night does nothing; third
parties' phone numbers and e-mail addresses never reach the stored report, and an
answer that keeps one is not stored at all; a locked parent is skipped and served when
they unlock; the child sees a plain line for every read of their messages."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import apsw
import pytest
from conftest import signed_in
from fake_llm import FakeLLM, Text
from review_support import (
    REPORT,
    WORRY,
    child_says,
    family,
    ids_fixture,  # noqa: F401  (the `ids` fixture)
    reports,
    runner,
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    sign_in,
)

from skald.core.runtime import Runtime
from skald.features.review.store import ReviewStore
from skald.features.system_agents.household import reader
from skald.features.system_agents.reports import Report
from skald.features.system_agents.store import RunLog
from skald.plugins.specs import NewReport
from skald.store import people

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def the_one_report(runtime: Runtime, member_id: str) -> Report:
    """The only report MEMBER_ID can read, opened (as the Reports page opens it)."""
    (only,) = await reports(runtime).readable(await reader(runtime.server.db, member_id))
    return await reports(runtime).open(await reader(runtime.server.db, member_id), only.id)


async def one_pass_over(
    runtime: Runtime, ids: dict[str, str], fake_llm: FakeLLM, parent: str, said: str, answer: str
) -> None:
    """The day most tests here review: `parent` signed in, tim says `said`, the model
    answers `answer`, and one pass reviews tim."""
    await sign_in(runtime, parent)
    await child_says(runtime, fake_llm, ids["tim"], said)
    fake_llm.script("model-a", [answer])
    assert await runner(runtime).pass_once() == 1


def system_db_on_disk(runtime: Runtime) -> bytes:
    """The system database's bytes as they stand on the disk, its write-ahead log
    included (a freshly stored report may not have reached the main file yet)."""
    db = runtime.core.layout.system_db
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


async def test_a_worrying_day_writes_one_report_both_parents_read_and_nobody_else(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    await sign_in(runtime, "mum")
    await sign_in(runtime, "dad")
    await child_says(runtime, fake_llm, ids["tim"], "help me with fractions", WORRY)
    fake_llm.script("model-a", [REPORT])

    assert await runner(runtime).pass_once() == 1
    review = fake_llm.bodies()[-1]
    assert "tools" not in review or review["tools"] == []  # no tools at all
    transcript = review["messages"][-1]["content"]
    assert WORRY in transcript and "help me with fractions" in transcript
    assert "- Date of birth: unknown" in review["messages"][0]["content"]

    store = reports(runtime)
    for name in ("mum", "dad"):
        (only,) = await store.readable(await reader(runtime.server.db, ids[name]))
        assert only.title == "Tim felt nobody would notice him"
        assert (only.severity, only.audience, only.subject_name) == ("alert", "supervisors", "tim")
    for name in ("tim", "ada"):
        assert await store.readable(await reader(runtime.server.db, ids[name])) == []

    # Through the API: dad's badge counts it, opening it clears the badge; ada and tim
    # are told it does not exist.
    dad = await signed_in(make_client, "dad")
    assert (await dad.call("GET", "/api/reports/unread")).json() == {"count": 1}
    (listed,) = (await dad.call("GET", "/api/reports")).json()
    r = await dad.call("GET", f"/api/reports/{listed['id']}")
    assert r.status_code == 200 and "## Worth your attention" in r.json()["body"], r.text
    assert (await dad.call("GET", "/api/reports/unread")).json() == {"count": 0}
    mum = await signed_in(make_client, "mum")
    assert (await mum.call("GET", "/api/reports/unread")).json() == {"count": 1}  # per reader
    for name in ("tim", "ada"):
        other = await signed_in(make_client, name)
        assert (await other.call("GET", f"/api/reports/{listed['id']}")).status_code == 404
        assert (await other.call("GET", "/api/reports")).json() == []

    # The alert reached both parents' notifications, nobody else's.
    for name in ("mum", "dad"):
        notes, _ = await (await runtime.notifications.store(ids[name])).page(limit=10)
        assert [n.link for n in notes] == [f"/reports?r={listed['id']}"]
    for name in ("tim", "ada"):
        notes, _ = await (await runtime.notifications.store(ids[name])).page(limit=10)
        assert notes == []

    # The child sees a plain line for the read, with no content.
    tim = await signed_in(make_client, "tim")
    lines = (await tim.call("GET", "/api/review/lines")).json()
    assert [p["name"] for p in lines["reviewed_for"]] == ["mum", "dad"]
    (audit,) = lines["audit"]
    assert (audit["reader_name"], audit["messages"]) == ("mum", 4)
    assert WORRY not in json.dumps(lines)

    # mum's run log has one completed run with counters; a second pass tonight does nothing.
    (run,) = await RunLog(runtime.user_runtimes[ids["mum"]].handle.db).runs()
    assert (run.status, run.stats["reports"], run.stats["messages"]) == ("completed", 1, 4)
    requests = len(fake_llm.bodies())
    assert await runner(runtime).pass_once(force=True) == 0
    assert len(fake_llm.bodies()) == requests
    assert len(await RunLog(runtime.user_runtimes[ids["mum"]].handle.db).runs()) == 1


async def test_a_quiet_day_writes_no_report_and_moves_the_coverage(
    runtime: Runtime, ids: dict[str, str], fake_llm: FakeLLM
) -> None:
    await one_pass_over(runtime, ids, fake_llm, "dad", "what is 7 times 8?", "NOTHING_TO_REPORT")
    assert await reports(runtime).readable(await reader(runtime.server.db, ids["dad"])) == []
    (run,) = await RunLog(runtime.user_runtimes[ids["dad"]].handle.db).runs()
    assert (run.status, run.stats["quiet"], run.stats["reports"]) == ("completed", 1, 0)
    assert await ReviewStore(runtime.server.db).covered_through(ids["tim"]) is not None


@pytest.mark.parametrize(
    ("planted", "keeps", "placeholders", "in_body", "on_disk"),
    [
        (
            "he said text me on +39 347 555 0199 or luca.rossi@example.com",
            "He gave +39 347 555 0199 and luca.rossi@example.com.",
            {"[phone number]": 1, "[e-mail address]": 1},
            ["555 0199", "luca.rossi"],
            ["555 0199", "5550199", "luca.rossi"],
        ),
        (
            "he wants to meet me at 42 Baker Street, or at Via Garibaldi 17 in town",
            "They would meet at 42 Baker Street or at Via Garibaldi 17.",
            {"[address]": 2},
            ["Baker", "Garibaldi"],
            ["Baker Street", "Garibaldi 17"],
        ),
    ],
    ids=["third-party-phone-and-email", "a-street-address"],
)
async def test_what_identifies_a_third_party_never_reaches_the_stored_report(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    planted: str,
    keeps: str,
    placeholders: dict[str, int],
    in_body: list[str],
    on_disk: list[str],
) -> None:
    await one_pass_over(runtime, ids, fake_llm, "mum", planted, f"{REPORT}\n{keeps}")
    body = (await the_one_report(runtime, ids["mum"])).body
    assert {p: body.count(p) for p in placeholders} == placeholders, body
    assert [i for i in in_body if i in body] == []
    # The report is in the bytes on the disk, and the identifiers are not.
    raw = system_db_on_disk(runtime)
    assert [p for p in placeholders if p.encode() not in raw] == []
    assert [i for i in on_disk if i.encode() in raw] == []


@pytest.mark.parametrize(
    ("said", "answer", "named", "kept"),
    [
        (
            "write to luca.rossi@example.com, 3475550199",
            "Write to luca.rossi at example dot com, or 347 555, then 0199.",
            ["e-mail address from the conversations", "phone number from the conversations"],
            ["luca", "5550199"],
        ),
        # Lower case: no longer the shape `redact` replaces, still the transcript's address.
        (
            "come to Via Garibaldi 17 after school",
            "He was asked to come to via   garibaldi 17.",
            ["an address from the conversations"],
            ["garibaldi"],
        ),
    ],
    ids=["an-identifier-in-disguise", "an-address-in-another-spelling"],
)
async def test_a_report_keeping_an_identifier_in_another_form_fails_closed(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    said: str,
    answer: str,
    named: list[str],
    kept: list[str],
) -> None:
    await one_pass_over(runtime, ids, fake_llm, "mum", said, f"{REPORT}\n{answer}")
    # No report for mum, her run failed, and tim's window stays uncovered: the next pass
    # reviews the same window again.
    assert await reports(runtime).readable(await reader(runtime.server.db, ids["mum"])) == []
    (run,) = await RunLog(runtime.user_runtimes[ids["mum"]].handle.db).runs()
    assert run.status == "failed" and run.error is not None
    assert await ReviewStore(runtime.server.db).covered_through(ids["tim"]) is None
    assert [n for n in named if n not in run.error] == []
    assert [k for k in kept if k in run.error.lower()] == []


async def test_a_locked_parent_is_skipped_quietly_and_served_at_unlock(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    logged,  # type: ignore[no-untyped-def]
) -> None:
    await child_says(runtime, fake_llm, ids["tim"], WORRY)
    assert runtime.user_runtimes.get(ids["mum"]) is None  # encrypted, locked

    assert await runner(runtime).pass_once() == 0
    assert "system agent skipped: member locked" in logged.getvalue()
    assert len(fake_llm.bodies()) == 1  # only the child's turn

    await sign_in(runtime, "mum")
    fake_llm.script("model-a", [REPORT])
    assert await runner(runtime).pass_once() == 1
    assert len(await reports(runtime).readable(await reader(runtime.server.db, ids["mum"]))) == 1


async def test_an_encrypted_adult_is_reviewed_only_with_their_own_opt_in(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    await people.link(runtime.server.db, ids["mum"], ids["ada"])  # ada: an encrypted adult
    await sign_in(runtime, "mum")
    await child_says(runtime, fake_llm, ids["ada"], WORRY)  # she is signed in, not opted in
    fake_llm.script("model-a", [REPORT])
    tim_fake = len(fake_llm.bodies())
    assert await runner(runtime).pass_once() == 0  # tim said nothing; ada is not readable
    assert len(fake_llm.bodies()) == tim_fake
    ada = await signed_in(make_client, "ada")
    mine = (await ada.call("GET", "/api/review/lines")).json()
    assert (mine["reviewed"], [p["name"] for p in mine["reviewed_for"]]) == (False, ["mum"])
    mum = await signed_in(make_client, "mum")
    theirs = {
        p["name"]: p["reviewed"]
        for p in (await mum.call("GET", "/api/review/lines")).json()["receives"]
    }
    assert theirs == {"tim": True, "ada": False}

    user, _ = await runtime.member(ids["ada"])
    await runtime.keep_key(user)  # "let my assistant work while I'm signed out"
    assert (await ada.call("GET", "/api/review/lines")).json()["reviewed"] is True
    assert await runner(runtime).pass_once(force=True) == 1
    assert len(await reports(runtime).readable(await reader(runtime.server.db, ids["mum"]))) == 1
    assert await reports(runtime).readable(await reader(runtime.server.db, ids["ada"])) == []


async def test_a_parent_linked_later_reads_past_reports_and_admins_can_review_again(
    runtime: Runtime, ids: dict[str, str], fake_llm: FakeLLM
) -> None:
    await people.unlink(runtime.server.db, ids["dad"], ids["tim"])
    await sign_in(runtime, "mum")
    await child_says(runtime, fake_llm, ids["tim"], WORRY)
    fake_llm.script("model-a", [REPORT])
    assert await runner(runtime).pass_once() == 1
    assert await reports(runtime).readable(await reader(runtime.server.db, ids["dad"])) == []
    await people.link(runtime.server.db, ids["dad"], ids["tim"])
    assert len(await reports(runtime).readable(await reader(runtime.server.db, ids["dad"]))) == 1

    # "Review again from the beginning": the same messages are read once more.
    store = ReviewStore(runtime.server.db)
    assert await store.clear(ids["tim"]) is True
    fake_llm.script("model-a", ["NOTHING_TO_REPORT"])
    assert await runner(runtime).pass_once(force=True) == 1
    assert WORRY in fake_llm.bodies()[-1]["messages"][-1]["content"]


async def test_nobody_reads_a_report_about_themselves_unless_it_is_their_own(
    runtime: Runtime,
) -> None:
    ids = await family(runtime)
    store = reports(runtime)

    async def about_mum(audience: str) -> str:
        report = NewReport(title=audience, summary="s", body="b", audience=audience)
        report = dataclasses.replace(report, subject_id=ids["mum"])
        return await store.add(
            report, owner_id=ids["mum"], subject_name="mum", producer="t", run_id="r"
        )

    for audience in ("admins", "supervisors", "owner"):
        await about_mum(audience)
    await people.link(runtime.server.db, ids["dad"], ids["mum"])
    mum = await reader(runtime.server.db, ids["mum"])  # an admin, yet the subject
    assert [r.title for r in await store.readable(mum)] == ["owner"]
    dad = await reader(runtime.server.db, ids["dad"])  # supervises mum, not an admin
    assert [r.title for r in await store.readable(dad)] == ["supervisors"]


async def test_a_report_is_never_changed_once_written(runtime: Runtime) -> None:
    ids = await family(runtime)
    report_id = await reports(runtime).add(
        NewReport(title="t", summary="s", body="b"), owner_id=ids["mum"], subject_name=None,
        producer="t", run_id="r",
    )  # fmt: skip
    with pytest.raises(apsw.ConstraintError, match="never changed"):
        await runtime.server.db.call(
            lambda c: c.execute("UPDATE reports SET body='x' WHERE id=?", (report_id,))
        )


async def test_a_parent_locking_during_the_pass_stops_it_quietly_and_it_is_swept_at_unlock(
    runtime: Runtime,
    ids: dict[str, str],
    fake_llm: FakeLLM,
    logged,  # type: ignore[no-untyped-def]
) -> None:
    await sign_in(runtime, "mum")
    await child_says(runtime, fake_llm, ids["tim"], WORRY)
    fake_llm.script("model-a", [Text(REPORT, delay=1.0)])
    asked = len(fake_llm.bodies())
    pass_ = asyncio.create_task(runner(runtime).pass_once())
    async with asyncio.timeout(20):
        while True:  # until the model is answering
            if len(fake_llm.bodies()) > asked:
                break
            await asyncio.sleep(0.05)
    await runtime.lock(ids["mum"])
    assert await pass_ == 0  # no crash of the runner
    assert "system agent stopped: member locked" in logged.getvalue()

    await sign_in(runtime, "mum")
    assert await runner(runtime).pass_once() == 0  # the report was stored: nothing left
    (run,) = await RunLog(runtime.user_runtimes[ids["mum"]].handle.db).runs()
    assert run.status == "failed"  # swept: it never closed
    assert len(await reports(runtime).readable(await reader(runtime.server.db, ids["mum"]))) == 1
