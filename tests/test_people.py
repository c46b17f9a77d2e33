"""The household directory and supervision (skald/features/people, skald/store/people.py):
administrators set a member's date of birth, sex and notes (validated: 400 with a message
that says what is wrong); the prompt shows the age computed today and `unknown` for what
is unset; supervision links are directed, idempotent, never to oneself, and go with
either account; the supervised member sees who supervises them; the old free-form
profile moves into the directory from every old registry version."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import apsw
import pytest
from conftest import MakeClient, signed_in
from migration_helpers import build_at

from skald.core.prompt_blocks import profile_block
from skald.core.runtime import Runtime
from skald.features.people.schema import PEOPLE
from skald.store import people
from skald.store.migrations import ledger, migrate_features
from skald.store.migrations.registry import REGISTRY


def _today() -> date:
    return datetime.now(UTC).date()


async def _put_profile(client: object, user_id: str, **body: object) -> object:
    return await client.call("PUT", f"/api/people/{user_id}/profile", json=body)  # type: ignore[attr-defined]


async def test_a_future_date_of_birth_is_refused_with_a_clear_message(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    tomorrow = (_today() + timedelta(days=2)).isoformat()
    r = await _put_profile(mum, household["tim"], date_of_birth=tomorrow)
    assert r.status_code == 400  # type: ignore[attr-defined]
    assert r.json()["error"]["message"] == f"date of birth {tomorrow} is in the future"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2015-02-30", "date of birth 2015-02-30 is not a real date"),
        ("2015-13-01", "date of birth 2015-13-01 is not a real date"),
        ("03/04/2015", "date of birth must be a date as YYYY-MM-DD, not '03/04/2015'"),
        ("1850-01-01", "date of birth 1850-01-01 is more than 130 years ago"),
    ],
)
async def test_an_impossible_date_of_birth_is_refused_with_a_clear_message(
    household: dict[str, str], make_client: MakeClient, value: str, message: str
) -> None:
    mum = await signed_in(make_client, "mum")
    r = await _put_profile(mum, household["tim"], date_of_birth=value)
    assert r.status_code == 400  # type: ignore[attr-defined]
    assert r.json()["error"]["message"] == message  # type: ignore[attr-defined]


async def test_over_long_sex_and_notes_are_refused_and_nothing_is_stored(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    tim = household["tim"]
    r = await _put_profile(mum, tim, sex="x" * (people.SEX_MAX + 1))
    assert r.status_code == 400  # type: ignore[attr-defined]
    assert r.json()["error"]["message"] == "sex is at most 40 characters"  # type: ignore[attr-defined]
    r = await _put_profile(mum, tim, notes="n" * (people.NOTES_MAX + 1))
    assert r.status_code == 400  # type: ignore[attr-defined]
    assert r.json()["error"]["message"] == "notes are at most 2000 characters"  # type: ignore[attr-defined]
    # At the limits it is fine; what was refused never landed.
    r = await _put_profile(mum, tim, sex="x" * people.SEX_MAX, notes="n" * people.NOTES_MAX)
    assert r.status_code == 200  # type: ignore[attr-defined]
    r = await mum.call("GET", f"/api/people/{tim}/profile")
    assert r.json()["sex"] == "x" * people.SEX_MAX and r.json()["date_of_birth"] is None


async def test_an_unknown_member_has_no_profile_to_set(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    r = await _put_profile(mum, "nobody", sex="f")
    assert r.status_code == 404  # type: ignore[attr-defined]


def test_the_age_counts_whole_years_and_a_leap_day_birthday_comes_on_the_first_of_march() -> None:
    born = date(2016, 2, 29)
    assert people.age_on(born, date(2026, 2, 28)) == 9
    assert people.age_on(born, date(2026, 3, 1)) == 10
    assert people.age_on(date(2016, 6, 15), date(2026, 6, 14)) == 9
    assert people.age_on(date(2016, 6, 15), date(2026, 6, 15)) == 10


async def _user_profile_block(runtime: Runtime, username: str) -> str:
    mine = await runtime.user_runtime(await runtime.core.users.get(username))
    return str((await mine.plugins.prompt_blocks(mine))["USER_PROFILE"])


async def test_the_prompt_shows_the_age_computed_today_and_unknown_when_unset(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    await signed_in(make_client, "tim")  # unlocks tim
    block = await _user_profile_block(runtime, "tim")
    assert "- Date of birth: unknown" in block.splitlines()
    assert "- Sex: not specified" in block.splitlines()
    assert "Notes" not in block

    today = _today()
    born = date(today.year - 9, 1, 1)
    r = await _put_profile(
        mum, household["tim"], date_of_birth=born.isoformat(), sex="boy", notes="Loves\ntrains"
    )
    assert r.status_code == 200  # type: ignore[attr-defined]
    assert r.json()["age"] == people.age_on(born, today)  # type: ignore[attr-defined]
    lines = (await _user_profile_block(runtime, "tim")).splitlines()
    assert f"- Date of birth: {born.isoformat()} (age {people.age_on(born, today)})" in lines
    assert "- Sex: boy" in lines
    assert "- Notes from the household's administrator: Loves trains" in lines
    assert "- Preferred language: en" in lines


def test_the_profile_block_keeps_its_order_and_one_field_per_line() -> None:
    block = profile_block(
        "Tim",
        {"pronouns": "he/him"},
        "it",
        household="Home",
        directory=people.Directory(date(2016, 5, 1), "boy\n## fake", ""),
        today=date(2026, 5, 1),
        supervisors=["Mum", "Dad"],
    )
    assert block.splitlines() == [
        "## Who you are talking with",
        "- Name: Tim",
        "- Household: Home",
        "- Date of birth: 2016-05-01 (age 10)",
        "- Sex: boy ## fake",
        "- Preferred language: it",
        "- pronouns: he/him",
        "- Supervised by: Mum, Dad. These grown-ups can get short reports about what this "
        "member talks about here, not every message.",
    ]


async def test_a_member_cannot_supervise_themselves(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    tim = household["tim"]
    r = await mum.call("PUT", f"/api/people/links/{tim}/{tim}")
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "a member cannot supervise themselves"
    assert (await mum.call("GET", "/api/people/links")).json() == []


async def test_linking_twice_keeps_one_directed_link(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    parent, child = household["mum"], household["tim"]
    first = (await mum.call("PUT", f"/api/people/links/{parent}/{child}")).json()
    again = await mum.call("PUT", f"/api/people/links/{parent}/{child}")
    assert again.status_code == 200 and again.json() == first
    assert (await mum.call("GET", "/api/people/links")).json() == [first]
    db = runtime.core.registry.db
    assert await people.supervisors_of(db, child) == [parent]
    assert await people.supervised_by(db, parent) == [child]
    assert await people.supervisors_of(db, parent) == []  # directed
    assert await people.supervises(db, parent, child)
    assert not await people.supervises(db, child, parent)
    # The one read with the names (prompt, privacy check, review, People page): both
    # directions in one trip, the display name or else the username.
    await db.call(lambda c: c.execute("UPDATE users SET display_name='' WHERE id=?", (parent,)))
    links = await people.supervision_of(db, child)
    assert [(n.user_id, n.name) for n in links.supervisors] == [(parent, "mum")]
    assert links.supervising == []
    assert [n.user_id for n in (await people.supervision_of(db, parent)).supervising] == [child]
    r = await mum.call("PUT", f"/api/people/links/{parent}/nobody")
    assert r.status_code == 404
    assert (await mum.call("DELETE", f"/api/people/links/{parent}/{child}")).status_code == 204
    assert (await mum.call("DELETE", f"/api/people/links/{parent}/{child}")).status_code == 204
    assert await people.links(db) == []


@pytest.mark.parametrize("deleted", ["supervisor", "supervised"])
async def test_deleting_either_account_removes_the_link(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, deleted: str
) -> None:
    mum = await signed_in(make_client, "mum")
    ada, tim = household["ada"], household["tim"]
    await mum.call("PUT", f"/api/people/links/{ada}/{tim}")
    await mum.call("PUT", f"/api/people/links/{household['mum']}/{tim}")
    await mum.call("PUT", f"/api/people/links/{tim}/{ada}")  # the other direction too
    gone = ada if deleted == "supervisor" else tim
    assert (await mum.call("DELETE", f"/api/users/{gone}")).status_code == 204
    left = await people.links(runtime.core.registry.db)
    assert all(gone not in (x.supervisor_id, x.supervised_id) for x in left)
    assert len(left) == (1 if deleted == "supervisor" else 0)


async def test_the_supervised_member_sees_who_supervises_them_on_their_profile(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    await mum.call("PUT", f"/api/people/links/{household['mum']}/{household['tim']}")
    await mum.call("PUT", f"/api/people/links/{household['ada']}/{household['tim']}")
    tim = await signed_in(make_client, "tim")
    mine = (await tim.call("GET", "/api/people/me")).json()
    assert [p["username"] for p in mine["supervised_by"]] == ["mum", "ada"]
    assert mine["supervising"] == [] and mine["profile"]["user_id"] == household["tim"]
    subject = await people.profile_of(runtime.core.registry.db, household["tim"], _today())
    assert (subject.age, subject.directory) == (None, people.Directory())
    mums = (await mum.call("GET", "/api/people/me")).json()
    assert [p["username"] for p in mums["supervising"]] == ["tim"]
    # ...and their assistant is told, in plain words.
    line = next(
        x for x in (await _user_profile_block(runtime, "tim")).splitlines() if "Supervised" in x
    )
    assert line.startswith("- Supervised by: mum, ada. ") and "not every message" in line
    assert "Supervised" not in await _user_profile_block(runtime, "mum")


async def test_a_member_reads_only_their_own_directory_profile(
    household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    await _put_profile(mum, household["ada"], sex="female", notes="Night owl")
    tim = await signed_in(make_client, "tim")
    assert (await tim.call("GET", f"/api/people/{household['ada']}/profile")).status_code == 403
    assert (await tim.call("GET", "/api/people/me")).json()["profile"]["sex"] == ""
    ada = await signed_in(make_client, "ada")
    mine = (await ada.call("GET", "/api/people/me")).json()["profile"]
    assert (mine["sex"], mine["notes"], mine["age"]) == ("female", "Night owl", None)


# -- the migration from the free-form profile --------------------------------------------

OLD = {
    "Birthday": "2015-06-01",
    "gender": "girl",
    "notes": "Allergic to nuts",
    "pronouns": "she/her",
    "timezone": "Europe/Rome",
}


@pytest.mark.parametrize("version", range(len(REGISTRY.history) + 1))
def test_the_old_free_form_profile_moves_into_the_directory_from_every_old_version(
    tmp_path: Path, version: int
) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    conn.execute("PRAGMA foreign_keys=ON")
    build_at(conn, REGISTRY, version)
    has_profile = version >= 3  # accounts 3 added the free-form profile column
    if has_profile:
        conn.execute("UPDATE users SET profile = ? WHERE id = 'abc123'", (json.dumps(OLD),))
    plan = REGISTRY.with_features([PEOPLE])
    migrate_features(conn, plan)
    assert ledger(conn)["people"] == 1
    if has_profile:
        assert people.read_directory(conn, "abc123") == people.Directory(
            date(2015, 6, 1), "girl", "Allergic to nuts"
        )
        left = json.loads(str(conn.execute("SELECT profile FROM users").fetchall()[0][0]))
        assert left == {"pronouns": "she/her", "timezone": "Europe/Rome"}
    assert migrate_features(conn, plan) == []
    conn.close()


def test_an_old_value_the_directory_would_refuse_stays_in_the_free_form_profile(
    tmp_path: Path,
) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    build_at(conn, REGISTRY, len(REGISTRY.history))
    odd = {"birthday": "in spring", "sex": "x" * 41, "dob": "2015-02-30", "note": " "}
    conn.execute("UPDATE users SET profile = ? WHERE id = 'abc123'", (json.dumps(odd),))
    migrate_features(conn, REGISTRY.with_features([PEOPLE]))
    assert people.read_directory(conn, "abc123") == people.Directory()
    assert json.loads(str(conn.execute("SELECT profile FROM users").fetchall()[0][0])) == odd
    conn.close()
