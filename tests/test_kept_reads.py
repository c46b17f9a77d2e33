"""Reads kept between turns (issue 22, goal 4): the member with their role and the
plugins' switches, the profile `USER_PROFILE` shows, the two memory indexes.

Each is kept while no row of the tables it came from was written through this process
(`skald/store/kept.py`), and for at most `KEPT_S` seconds. These tests check that every
table a kept read touches is one it watches (SQLite's authorizer lists what the read
reads), then write to each watched table behind the store's back (raw SQL on the same
connection) and expect the next read to see it; a write that lands while the read is on
its way, another process's write and the bound on kept answers are tried on the class
itself, as `test_session_kept.py` tries the session lookup.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import PASSWORD

from skald.core.users import UserManager
from skald.features.projects.store import ChatProjects
from skald.paths import DataLayout
from skald.plugins.manager import Plugins
from skald.store.database import Database, open_plain
from skald.store.kept import KEPT_S, KeptReads
from skald.store.member_now import READS as MEMBER_READS
from skald.store.member_now import MemberNow
from skald.store.migrations import migrate_features
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY
from skald.store.note_paths import INDEX_NOTE
from skald.store.notes import SHARED_NOTES, KeptNotes
from skald.store.people import PROFILE_READS, ProfileNow
from skald.store.registry import Registry


@pytest.fixture
async def registry(layout: DataLayout) -> AsyncIterator[Registry]:
    """With every built-in feature's tables (the plugins', the people's), as a server's."""
    plan = REGISTRY.with_features(Plugins.builtin().migrations("registry"))
    reg = await Registry.open(layout.system_db, plan=plan)
    yield reg
    await reg.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def ids(users: UserManager) -> tuple[str, str]:
    ada = (await users.create("ada", PASSWORD, "member")).user.id
    mum = (await users.create("mum", PASSWORD, "admin")).user.id
    return ada, mum


async def _tables_read(db: Database, read: Callable[[], Awaitable[Any]]) -> set[str]:
    """The tables `read` reads on `db`'s connection, by SQLite's authorizer (setting it
    expires the prepared statements, so cached ones are checked again too)."""
    seen: set[str] = set()

    def note(op: int, p1: str | None, p2: str | None, dbname: str | None, _: Any) -> int:
        if op == apsw.SQLITE_READ and p1 is not None:
            seen.add(p1)
        return apsw.SQLITE_OK

    def watch(c: apsw.Connection) -> None:
        c.authorizer = note

    def unwatch(c: apsw.Connection) -> None:
        c.authorizer = None

    await db.call(watch)
    try:
        await read()
    finally:
        await db.call(unwatch)
    return seen


async def test_every_table_the_member_read_touches_is_one_it_watches(
    registry: Registry, ids: tuple[str, str]
) -> None:
    now = MemberNow(registry.db)
    assert await _tables_read(registry.db, lambda: now.read(ids[0])) == MEMBER_READS


async def test_every_table_the_profile_read_touches_is_one_it_watches(
    registry: Registry, ids: tuple[str, str]
) -> None:
    profile = ProfileNow(registry.db)
    assert await _tables_read(registry.db, lambda: profile.read(ids[0])) == PROFILE_READS


async def test_the_kept_index_reads_only_its_own_notes_table(registry: Registry) -> None:
    notes = KeptNotes(registry.db, SHARED_NOTES)
    read = await _tables_read(registry.db, lambda: notes.text(INDEX_NOTE))
    assert read == notes.kept.tables == {SHARED_NOTES.table}


# A write to each table a kept read watches, in raw SQL on the store's own connection:
# no store method is told, the pre-update hook alone must notice. `{ada}` / `{mum}`.
MEMBER_WRITES = {
    "users": "UPDATE users SET display_name='Changed' WHERE id='{ada}'",
    "roles": "UPDATE roles SET display_name='Changed' WHERE name='member'",
    "role_capabilities": "DELETE FROM role_capabilities WHERE role='member' AND capability='chat'",
    "role_attributes": "UPDATE role_attributes SET value='\"simple\"' WHERE role='member' "
    "AND key='ui_mode'",
    "plugins": "INSERT INTO plugins(id, enabled, settings, added_at) VALUES ('p', 0, '{{}}', '1')",
    "plugin_grants": "INSERT INTO plugin_grants(plugin, user_id, created_at) "
    "VALUES ('q', '{ada}', '1')",
}
PROFILE_WRITES = {
    "users": "UPDATE users SET display_name='Changed' WHERE id='{ada}'",
    "people_profiles": "INSERT INTO people_profiles(user_id, date_of_birth, sex, notes, "
    "updated_at) VALUES ('{ada}', '2015-04-01', 'female', 'likes trains', '1')",
    "people_supervision": "INSERT INTO people_supervision(supervisor_id, supervised_id, "
    "created_at) VALUES ('{mum}', '{ada}', '1')",
}


def test_every_watched_table_is_written_below() -> None:
    assert set(MEMBER_WRITES) == MEMBER_READS
    assert set(PROFILE_WRITES) == PROFILE_READS


async def _write(db: Database, sql: str, ids: tuple[str, str]) -> None:
    statement = sql.format(ada=ids[0], mum=ids[1])
    await db.call(lambda c: c.execute(statement))


@pytest.fixture
async def plugin_q(registry: Registry) -> None:
    """The plugin the grant below is for, there before the first read."""
    await registry.db.call(
        lambda c: c.execute(
            "INSERT INTO plugins(id, enabled, settings, added_at) VALUES ('q', 1, '{}', '1')"
        )
    )


@pytest.mark.parametrize("table", sorted(MEMBER_WRITES))
async def test_a_write_to_any_table_of_the_member_read_is_seen_by_the_next_turn(
    registry: Registry, ids: tuple[str, str], plugin_q: None, table: str
) -> None:
    now = MemberNow(registry.db)
    before = await now.read(ids[0])
    assert await now.read(ids[0]) is before  # kept
    await _write(registry.db, MEMBER_WRITES[table], ids)
    after = await now.read(ids[0])
    assert after is not before
    assert after != before, f"the write to {table} is not in the answer"


@pytest.mark.parametrize("table", sorted(PROFILE_WRITES))
async def test_a_write_to_any_table_of_the_profile_is_seen_by_the_next_turn(
    registry: Registry, ids: tuple[str, str], table: str
) -> None:
    profile = ProfileNow(registry.db)
    before = await profile.read(ids[0])
    assert await profile.read(ids[0]) is before
    await _write(registry.db, PROFILE_WRITES[table], ids)
    after = await profile.read(ids[0])
    assert after is not before
    assert after != before, f"the write to {table} is not in the answer"


async def test_a_write_to_another_table_keeps_the_answer(
    registry: Registry, ids: tuple[str, str]
) -> None:
    """What every turn writes (its usage, the request log) does not make the next turn
    read the member again: that would undo the point of keeping."""
    now = MemberNow(registry.db)
    before = await now.read(ids[0])
    await registry.db.call(lambda c: c.execute("UPDATE sessions SET client='x'"))
    await registry.db.call(
        lambda c: c.execute("INSERT INTO config(key, value) VALUES ('kept-test', '1')")
    )
    assert await now.read(ids[0]) is before


async def test_a_member_gone_or_a_role_gone_is_never_kept(
    registry: Registry, ids: tuple[str, str]
) -> None:
    now = MemberNow(registry.db)
    assert (await now.read("no-such-member"))[0] is None
    assert now.kept.keys() == []


async def test_the_project_of_a_conversation_is_kept_until_project_chats_is_written(
    tmp_path: Path,
) -> None:
    plan = OWNER.with_features(Plugins.builtin().migrations("owner"))
    db = await open_plain(tmp_path / "owner.db", "owner-test")
    try:
        await db.call(lambda c: migrate_features(c, plan))
        chats = ChatProjects(db)
        assert await _tables_read(db, lambda: chats.of("c1")) == {"project_chats"}
        assert await chats.of("c1") is None  # kept, as most conversations are no project's
        await db.call(
            lambda c: c.execute(
                "INSERT INTO project_chats(conversation_id, owner, slug) VALUES ('c1', 'u', 'p')"
            )
        )
        assert await chats.of("c1") == ("u", "p")
        await db.call(lambda c: c.execute("DELETE FROM project_chats"))
        assert await chats.of("c1") is None
    finally:
        await db.aclose()


# -- the class itself ----------------------------------------------------------------------


def _notes_read(path: str) -> Callable[[apsw.Connection], str]:
    return lambda c: next(
        (
            str(r[0])
            for r in c.execute("SELECT content FROM shared_memory_notes WHERE path=?", (path,))
        ),
        "",
    )


async def _put(db: Database, path: str, text: str) -> None:
    await db.call(
        lambda c: c.execute(
            "INSERT INTO shared_memory_notes(path, content, created_at, updated_at) "
            "VALUES (?, ?, '1', '1') ON CONFLICT(path) DO UPDATE SET content=excluded.content",
            (path, text),
        )
    )


async def test_a_write_that_lands_while_the_read_is_on_its_way_is_not_kept_away(
    registry: Registry,
) -> None:
    """The read runs first and answers with the old text; the write right behind it lands
    before the answer is back on the loop. The next read must see the write."""
    db = registry.db
    kept: KeptReads[str, str] = KeptReads(db, frozenset({"shared_memory_notes"}))
    await _put(db, "a.md", "old")
    hold = threading.Event()
    held = asyncio.ensure_future(db.call(lambda c: hold.wait(10)))
    reading = asyncio.ensure_future(kept.get("a.md", _notes_read("a.md")))
    await asyncio.sleep(0)  # the held work and the read are queued, in order
    write = db._submit(
        lambda c: c.execute("UPDATE shared_memory_notes SET content='new' WHERE path='a.md'")
    )
    hold.set()
    write.result(timeout=10)  # blocking the loop on purpose: both run before the answer
    await held
    assert await reading == "old"
    assert await kept.get("a.md", _notes_read("a.md")) == "new"


async def test_another_processs_write_is_seen_once_the_kept_answer_is_too_old(
    registry: Registry,
) -> None:
    clock = Clock()
    kept: KeptReads[str, str] = KeptReads(
        db := registry.db, frozenset({"shared_memory_notes"}), clock=clock
    )
    await _put(db, "a.md", "old")
    assert await kept.get("a.md", _notes_read("a.md")) == "old"
    other = await Registry.open(db.path)
    try:
        await _put(other.db, "a.md", "new")
    finally:
        await other.close()
    clock.now += KEPT_S - 0.1
    assert await kept.get("a.md", _notes_read("a.md")) == "old"  # the documented bound
    clock.now += 0.2
    assert await kept.get("a.md", _notes_read("a.md")) == "new"


async def test_kept_answers_are_bounded_the_oldest_going_first(registry: Registry) -> None:
    kept: KeptReads[str, str] = KeptReads(
        registry.db, frozenset({"shared_memory_notes"}), max_entries=3
    )
    for n in range(5):
        await kept.get(f"{n}.md", _notes_read(f"{n}.md"))
    assert kept.keys() == ["2.md", "3.md", "4.md"]
