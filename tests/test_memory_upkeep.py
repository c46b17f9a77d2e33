"""Memory upkeep (issue 29 item 4), end to end on real SQLCipher files with a scripted
model that reads the notes through the tools: the planted contradiction and duplicate
are reported, no byte of any note changes (a write the model attempts is denied by the
gate and counted), accepting a suggestion puts an approval request in the Inbox (the
note changes only once it is approved), and the household pass runs as the first
active unlocked admin with a report a plain member can neither see nor accept."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import apsw
import pytest
from conftest import signed_in
from fake_llm import Call, FakeLLM
from review_support import (
    family,
    reports,
    runner,
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    sign_in,
    with_model,
)

from skald.approvals.rules import DEFAULT_GROUP, Rule
from skald.core.runtime import Runtime
from skald.features.system_agents.household import reader
from skald.features.system_agents.reports import REPORTS_FEATURE
from skald.features.system_agents.store import RunLog
from skald.features.system_agents.upkeep import REPORT_ONLY
from skald.store.migrations import Feature, migrate_features
from skald.store.migrations.registry import REGISTRY
from skald.store.owner import OwnerStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SARA = "people/sara.md"
DATES = "family/dates.md"
SHOPPING = "shopping.md"
NOTES = {
    "index.md": "- people/sara.md: Sara\n- family/dates.md: dates\n- shopping.md: list\n",
    SARA: "# Sara\nSara is my sister.\nHer birthday is on 12 March.\n",
    DATES: "# Dates\n- Sara's birthday: 14 March\n- Dentist: 3 May\n",
    SHOPPING: "# Shopping\n- oat milk\n- bread\n- oat milk\n",
}


async def _put_private(rt: Runtime, user_id: str) -> OwnerStore:
    store = OwnerStore(rt.user_runtimes[user_id].handle.db)
    for path, text in NOTES.items():
        await store.note_put(path, text)
    return store


async def _fingerprint(rt: Runtime) -> dict[str, str]:
    """Every note of every store (each unlocked member's and the household's), hashed
    with its stamps: a write of the same bytes would show too."""
    out = {}
    for user_id, live in rt.user_runtimes.items():
        store = OwnerStore(live.handle.db)
        for info in await store.note_list():
            text = await store.note_get(info.path)
            raw = f"{info.updated_at}\0{text}".encode()
            out[f"{user_id}:{info.path}"] = hashlib.sha256(raw).hexdigest()
    shared = rt.server.shared_memory
    for info in await shared.note_list():
        raw = f"{info.updated_at}\0{await shared.note_get(info.path)}".encode()
        out[f"shared:{info.path}"] = hashlib.sha256(raw).hexdigest()
    return out


def _private_script() -> list[object]:
    return [
        [
            Call("read_file", {"path": f"user-memory/{SARA}"}),
            Call("read_file", {"path": f"user-memory/{DATES}"}),
            Call("read_file", {"path": f"user-memory/{SHOPPING}"}),
        ],
        [
            # Report only: the "fix" the model tries is refused by the gate.
            Call(
                "edit_file",
                {
                    "path": f"user-memory/{SHOPPING}",
                    "old_text": "- oat milk\n- bread\n- oat milk\n",
                    "new_text": "- oat milk\n- bread\n",
                },
            ),
            Call(
                "report_finding",
                {
                    "kind": "contradiction",
                    "notes": [f"user-memory/{SARA}", f"user-memory/{DATES}"],
                    "problem": "Sara's birthday is 12 March in one note and 14 March in the other.",
                    "suggestion": "Ask which date is right and keep one.",
                    "note": f"user-memory/{DATES}",
                    "old_text": "- Sara's birthday: 14 March",
                    "new_text": "- Sara's birthday: 12 March",
                },
            ),
            Call(
                "report_finding",
                {
                    "kind": "duplicate",
                    "notes": [f"user-memory/{SHOPPING}"],
                    "problem": "Oat milk is on the list twice.",
                    "suggestion": "Remove the second line.",
                    "note": f"user-memory/{SHOPPING}",
                    "old_text": "- bread\n- oat milk\n",
                    "new_text": "- bread\n",
                },
            ),
        ],
        "Reported 2 problems.",
    ]


async def test_private_upkeep_reports_the_contradiction_and_duplicate_and_changes_no_byte(
    runtime: Runtime,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    ids = await family(runtime)
    await with_model(runtime, fake_llm)
    await sign_in(runtime, "ada")
    await sign_in(runtime, "dad")
    store = await _put_private(runtime, ids["ada"])
    before = await _fingerprint(runtime)
    fake_llm.script("model-a", _private_script())

    assert await runner(runtime).pass_once(only="memory-upkeep") == 1

    assert await _fingerprint(runtime) == before  # no byte of any note changed
    first = fake_llm.bodies()[0]
    system = first["messages"][0]["content"]
    assert "You only look and report" in system and f"user-memory/{SARA}" in system
    assert "report_finding" in {t["function"]["name"] for t in first["tools"]}
    # The notes reached the model through the tools, and the write came back refused.
    seen = json.dumps(fake_llm.bodies()[1]["messages"])
    assert "Her birthday is on 12 March" in seen
    assert REPORT_ONLY in json.dumps(fake_llm.bodies()[2]["messages"])
    (run,) = await RunLog(runtime.user_runtimes[ids["ada"]].handle.db).runs()
    assert run.status == "completed", run
    assert (run.stats["findings"], run.stats["writes_denied"], run.stats["reports"]) == (2, 1, 1)
    # dad has no notes: no run row, no report for him.
    assert await RunLog(runtime.user_runtimes[ids["dad"]].handle.db).runs() == []

    (only,) = await reports(runtime).readable(await reader(runtime.server.db, ids["ada"]))
    assert (only.title, only.audience, only.severity) == (
        "Memory upkeep: 2 findings in your notes",
        "owner",
        "notice",
    )
    ada = await signed_in(make_client, "ada")
    opened = (await ada.call("GET", f"/api/reports/{only.id}")).json()
    assert "Contradiction" in opened["body"] and "Duplicate" in opened["body"]
    assert [(s["n"], s["kind"], s["note"]) for s in opened["suggestions"]] == [
        (1, "contradiction", f"user-memory/{DATES}"),
        (2, "duplicate", f"user-memory/{SHOPPING}"),
    ]
    assert "old_text" not in opened["suggestions"][0]

    # Another member can neither read nor accept it.
    dad = await signed_in(make_client, "dad")
    assert (await dad.call("GET", f"/api/reports/{only.id}")).status_code == 404
    r = await dad.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert r.status_code == 404, r.text

    # A number the report has not is "not found" with a message, never a 500.
    for n in ("7", "0", "-1", "99999999999999999999", "x"):
        r = await ada.call("POST", f"/api/reports/{only.id}/suggestions/{n}/accept")
        assert r.status_code in (400, 404) and "error" in r.json(), (n, r.text)

    # Accepting asks for approval: an Inbox request with the diff, the note untouched.
    r = await ada.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert r.status_code == 201, r.text
    accepted = r.json()
    item = None
    for _ in range(100):
        items = (await ada.call("GET", "/api/inbox")).json()
        if items:
            (item,) = items
            break
        await asyncio.sleep(0.05)
    assert item is not None and item["id"] == accepted["call_id"]
    assert item["tool"] == "edit_file" and "12 March" in (item["preview"] or "")
    assert await _fingerprint(runtime) == before
    again = await ada.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert again.status_code == 409, again.text

    # Locked and unlocked again (the waiter is gone, the call open in the history):
    # recovery asks again, never writes on its own (the member's rules alone would
    # allow a write to their own notes).
    await runtime.lock(ids["ada"])
    await sign_in(runtime, "ada")
    ada = await signed_in(make_client, "ada")
    store = OwnerStore(runtime.user_runtimes[ids["ada"]].handle.db)
    for _ in range(100):
        if runtime.user_runtimes[ids["ada"]].gate.pending():
            break
        await asyncio.sleep(0.05)
    (item,) = (await ada.call("GET", "/api/inbox")).json()
    assert item["id"] == accepted["call_id"]
    assert await _fingerprint(runtime) == before

    # Approving it runs the edit (and the assistant says so).
    fake_llm.script("model-a", ["Done: the date now reads 12 March."])
    r = await ada.call("POST", f"/api/inbox/{item['id']}/approve")
    assert r.status_code == 204, r.text
    for _ in range(100):
        if "14 March" not in await store.note_get(DATES):
            break
        await asyncio.sleep(0.05)
    assert "- Sara's birthday: 12 March" in await store.note_get(DATES)
    reopened = (await ada.call("GET", f"/api/reports/{only.id}")).json()
    assert reopened["suggestions"][0]["accepted"] is True
    assert reopened["suggestions"][0]["conversation_id"] == accepted["conversation_id"]


async def test_a_member_without_notes_gets_no_run_and_no_report(
    runtime: Runtime, fake_llm: FakeLLM
) -> None:
    ids = await family(runtime)
    await with_model(runtime, fake_llm)
    await sign_in(runtime, "ada")
    assert await runner(runtime).pass_once(only="memory-upkeep") == 0
    assert fake_llm.bodies() == []
    assert await RunLog(runtime.user_runtimes[ids["ada"]].handle.db).runs() == []


SECRET_LINE = "The spare key is under the third flowerpot by the door"


async def test_household_upkeep_runs_as_the_first_admin_and_a_member_cannot_see_or_accept(
    runtime: Runtime,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    ids = await family(runtime)
    await with_model(runtime, fake_llm)
    await sign_in(runtime, "ada")
    await sign_in(runtime, "mum")
    await OwnerStore(runtime.user_runtimes[ids["mum"]].handle.db).note_put(
        "private.md", "mum's own"
    )
    shared = runtime.server.shared_memory
    await shared.note_put(
        "house.md", f"# House\n{SECRET_LINE}.\nBins go out on Monday.\n", ids["mum"]
    )
    await shared.note_put("bins.md", "# Bins\nBins go out on Thursday.\n", ids["mum"])
    before = await _fingerprint(runtime)
    fake_llm.script(
        "model-a",
        [
            [
                Call("read_file", {"path": "shared-memory/house.md"}),
                # The admin's own notes are not the household pass's to read.
                Call("read_file", {"path": "user-memory/private.md"}),
                Call("write_file", {"path": "shared-memory/bins.md", "content": "x"}),
            ],
            [
                Call(
                    "report_finding",
                    {
                        "kind": "contradiction",
                        "notes": ["shared-memory/house.md", "shared-memory/bins.md"],
                        "problem": f"Bins day differs; also '{SECRET_LINE}' should not be here.",
                        "suggestion": "Keep one bins day.",
                        "note": "shared-memory/bins.md",
                        "old_text": "Thursday",
                        "new_text": "Monday",
                    },
                )
            ],
            "Reported 1 problem.",
        ],
    )

    assert await runner(runtime).pass_once(only="household-memory-upkeep") == 1

    assert await _fingerprint(runtime) == before
    (run,) = await RunLog(runtime.user_runtimes[ids["mum"]].handle.db).runs()  # the admin's
    assert run.agent_id == "household-memory-upkeep" and run.status == "completed"
    assert (run.stats["writes_denied"], run.stats["reads_denied"]) == (1, 1)
    assert await RunLog(runtime.user_runtimes[ids["ada"]].handle.db).runs() == []
    assert "mum's own" not in json.dumps(fake_llm.bodies())

    (only,) = await reports(runtime).readable(await reader(runtime.server.db, ids["mum"]))
    assert only.audience == "admins"
    mum = await signed_in(make_client, "mum")
    body = (await mum.call("GET", f"/api/reports/{only.id}")).json()["body"]
    assert "shared-memory/house.md" in body and SECRET_LINE not in body  # not repeated

    ada = await signed_in(make_client, "ada")
    assert (await ada.call("GET", "/api/reports")).json() == []
    assert (await ada.call("GET", f"/api/reports/{only.id}")).status_code == 404
    r = await ada.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert r.status_code == 404, r.text
    assert (await ada.call("GET", "/api/inbox")).json() == []

    # The admin's accept asks them (a shared note's write waits for approval).
    r = await mum.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert r.status_code == 201, r.text
    for _ in range(100):
        if (await mum.call("GET", "/api/inbox")).json():
            break
        await asyncio.sleep(0.05)
    (item,) = (await mum.call("GET", "/api/inbox")).json()
    assert item["tool"] == "edit_file"
    assert await _fingerprint(runtime) == before


def test_reports_from_before_suggestions_migrate_and_read_without_any(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    v1 = Feature("reports", REPORTS_FEATURE.migrations[:1])
    migrate_features(conn, REGISTRY.with_features([v1]))
    conn.execute(
        "INSERT INTO reports(id, title, summary, body, severity, audience, owner_id, "
        "producer, run_id, created_at) VALUES ('r1','t','s','b','info','owner','u','p','x','z')"
    )
    applied = migrate_features(conn, REGISTRY.with_features([REPORTS_FEATURE]))
    assert applied == [("reports", 2)]
    assert conn.execute("SELECT id, title FROM reports").fetchall() == [("r1", "t")]
    assert conn.execute("SELECT count(*) FROM report_suggestions").fetchall() == [(0,)]
    conn.execute(
        "INSERT INTO report_suggestions VALUES ('r1', 1, 'duplicate', 'user-memory/a.md', "
        "'t', 'a', '')"
    )
    with pytest.raises(apsw.ConstraintError):
        conn.execute("UPDATE report_suggestions SET new_text='b'")  # never changed
    conn.close()


async def test_an_accepted_change_still_meets_a_rule_that_denies_it(
    runtime: Runtime,
    fake_llm: FakeLLM,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    ids = await family(runtime)
    await with_model(runtime, fake_llm)
    await sign_in(runtime, "ada")
    await _put_private(runtime, ids["ada"])
    fake_llm.script("model-a", _private_script())
    assert await runner(runtime).pass_once(only="memory-upkeep") == 1
    (only,) = await reports(runtime).readable(await reader(runtime.server.db, ids["ada"]))
    await runtime.core.registry.save_rule(
        Rule(0, DEFAULT_GROUP, "@fs_write", f"user-memory/{DATES}", "deny", 1, "dates are fixed"),
        create=True,
    )
    before = await _fingerprint(runtime)
    asked = len(fake_llm.bodies())
    fake_llm.script("model-a", ["The rules refused that change."])

    ada = await signed_in(make_client, "ada")
    r = await ada.call("POST", f"/api/reports/{only.id}/suggestions/1/accept")
    assert r.status_code == 201, r.text
    for _ in range(200):  # the assistant is told of the refusal: the call is settled
        if len(fake_llm.bodies()) > asked:
            break
        await asyncio.sleep(0.05)
    assert "dates are fixed" in json.dumps(fake_llm.bodies()[-1]["messages"])
    assert (await ada.call("GET", "/api/inbox")).json() == []
    assert await _fingerprint(runtime) == before
