"""The memory note tools against real stores: an encrypted owner database and the registry."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from tool_support import RunsTools

from skald.agent import Tool
from skald.core.users import UserManager
from skald.files.tools import memory_tools
from skald.store.note_paths import INDEX_NOTE
from skald.store.notes import PRIVATE_NOTES, SHARED_NOTES, KeptNotes
from skald.store.owner import OwnerStore
from skald.store.registry import Registry
from skald.store.shared_memory import SharedMemoryStore
from skald.tools.memory import MAX_NOTE_BYTES, READ_MAX_CHARS, note_summary

PW = "correct horse battery"


@dataclass
class Member(RunsTools):
    id: str
    store: OwnerStore
    shared: SharedMemoryStore
    tools: dict[str, Tool]


async def make_member(
    users: UserManager, registry: Registry, name: str, *, shared_writable: bool = True
) -> Member:
    created = await users.create(name, PW, "member")
    handle = await users.unlock(name, PW)
    shared = SharedMemoryStore(registry.db)
    tools = memory_tools(handle.store, shared, created.user.id, shared_writable=shared_writable)
    return Member(created.user.id, handle.store, shared, {t.name: t for t in tools})


@pytest.fixture
async def ada(users: UserManager, registry: Registry) -> Member:
    return await make_member(users, registry, "ada")


async def all_notes(m: Member) -> dict[str, str]:
    out = {}
    for info in await m.store.note_list():
        out[f"user-memory/{info.path}"] = await m.store.note_get(info.path)
    for info in await m.shared.note_list():
        out[f"shared-memory/{info.path}"] = await m.shared.note_get(info.path)
    return out


# -- the tools as the loop sees them ------------------------------------------------------


async def test_tool_set_names_kinds_and_flags(ada: Member) -> None:
    assert sorted(ada.tools) == [
        "edit_file",
        "list_files",
        "memory_search",
        "read_file",
        "write_file",
    ]
    for name in ("read_file", "list_files", "memory_search"):
        t = ada.tools[name]
        assert (t.kind, t.concurrency_safe, t.rerun_on_recovery) == ("read", True, True)
    for name in ("write_file", "edit_file"):
        t = ada.tools[name]
        assert (t.kind, t.concurrency_safe, t.rerun_on_recovery) == ("write", False, False)


# -- write, read, edit -------------------------------------------------------------------


async def test_write_then_read_round_trip_in_both_stores(ada: Member) -> None:
    said = await ada.ok(
        "write_file", path="user-memory/people/grandma.md", content="# Grandma\nLoves tulips.\n"
    )
    assert said.startswith("Created user-memory/people/grandma.md (2 lines).")
    assert await ada.store.note_get("people/grandma.md") == "# Grandma\nLoves tulips.\n"

    shown = await ada.ok("read_file", path="user-memory/people/grandma.md")
    assert shown == "     1\t# Grandma\n     2\tLoves tulips."

    said = await ada.ok("write_file", path="user-memory/people/grandma.md", content="Tulips.")
    assert said == "Replaced user-memory/people/grandma.md (1 line)."
    assert await ada.ok("read_file", path="user-memory/people/grandma.md") == "     1\tTulips."

    await ada.ok("write_file", path="shared-memory/house/bins.md", content="# Bins\nMonday\n")
    assert await ada.shared.note_get("house/bins.md") == "# Bins\nMonday\n"
    (info,) = [i for i in await ada.shared.note_list("house/")]
    assert info.updated_by == ada.id
    # Nothing leaked across stores.
    assert [i.path for i in await ada.store.note_list("house/")] == []


async def test_read_in_parts_and_the_caps(ada: Member) -> None:
    body = "".join(f"line {n}\n" for n in range(1, 31))
    await ada.store.note_put("long.md", body)

    part = await ada.ok("read_file", path="user-memory/long.md", offset_line=10, limit_lines=5)
    rows = part.split("\n")
    assert rows[:5] == [f"{n:6d}\tline {n}" for n in range(10, 15)]
    assert rows[5] == "(lines 10-14 of 30; read on with offset_line=15)"

    tail = await ada.ok("read_file", path="user-memory/long.md", offset_line=29)
    assert tail.split("\n") == ["    29\tline 29", "    30\tline 30", "(lines 29-30 of 30)"]

    assert "has 30 lines" in await ada.fails(
        "read_file", path="user-memory/long.md", offset_line=31
    )
    assert "at least 1" in await ada.fails("read_file", path="user-memory/long.md", offset_line=0)

    wide = "x" * 5000
    await ada.store.note_put("wide.md", wide)
    assert "(line cut)" in await ada.ok("read_file", path="user-memory/wide.md")

    big = "".join(f"{n:05d} " + "y" * 100 + "\n" for n in range(2000))
    await ada.store.note_put("big.md", big)
    out = await ada.ok("read_file", path="user-memory/big.md")
    assert len(out) <= READ_MAX_CHARS + 200
    last = out.rsplit("\n", 1)[1]
    assert last.startswith("(lines 1-") and "read on with offset_line=" in last

    await ada.store.note_put("empty.md", "")
    assert (
        await ada.ok("read_file", path="user-memory/empty.md") == "user-memory/empty.md is empty."
    )
    missing = await ada.fails("read_file", path="user-memory/nothing.md")
    assert "There is no note at user-memory/nothing.md" in missing


async def test_edit_replaces_exactly_one_match_or_explains(ada: Member) -> None:
    path = "user-memory/food.md"
    await ada.ok("write_file", path=path, content="# Food\nlikes pears\nlikes pears\nhates figs\n")

    said = await ada.ok("edit_file", path=path, old_text="hates figs", new_text="loves figs")
    assert said == "Edited user-memory/food.md: replaced 1 occurrence."
    assert await ada.store.note_get("food.md") == "# Food\nlikes pears\nlikes pears\nloves figs\n"

    twice = await ada.fails("edit_file", path=path, old_text="likes pears", new_text="x")
    assert "occurs 2 times" in twice and "replace_all" in twice
    never = await ada.fails("edit_file", path=path, old_text="likes plums", new_text="x")
    assert "was not found" in never
    assert await ada.store.note_get("food.md") == "# Food\nlikes pears\nlikes pears\nloves figs\n"

    said = await ada.ok(
        "edit_file", path=path, old_text="likes pears", new_text="likes apples", replace_all=True
    )
    assert said.endswith("replaced 2 occurrences.")
    assert await ada.store.note_get("food.md") == "# Food\nlikes apples\nlikes apples\nloves figs\n"

    await ada.ok("edit_file", path=path, old_text="likes apples\n", new_text="", replace_all=True)
    assert await ada.store.note_get("food.md") == "# Food\nloves figs\n"

    assert "write_file" in await ada.fails("edit_file", path=path, old_text="", new_text="x")
    same = await ada.fails("edit_file", path=path, old_text="figs", new_text="figs")
    assert "nothing to change" in same
    gone = await ada.fails("edit_file", path="user-memory/none.md", old_text="a", new_text="b")
    assert "no note at user-memory/none.md" in gone
    assert {i.path for i in await ada.store.note_list()} == {"food.md", "index.md"}


async def test_notes_are_size_capped(ada: Member) -> None:
    huge = "z" * (MAX_NOTE_BYTES + 1)
    assert "at most" in await ada.fails("write_file", path="user-memory/huge.md", content=huge)
    nearly = "z" * (MAX_NOTE_BYTES - 10) + "END"
    await ada.ok("write_file", path="user-memory/a.md", content=nearly)
    grown = await ada.fails("edit_file", path="user-memory/a.md", old_text="END", new_text="E" * 20)
    assert "at most" in grown
    assert await ada.store.note_get("a.md") == nearly
    assert "huge.md" not in {i.path for i in await ada.store.note_list()}


# -- the index ---------------------------------------------------------------------------


async def _indexes(mine: KeptNotes, household: KeptNotes) -> tuple[str, str]:
    return await mine.text(INDEX_NOTE), await household.text(INDEX_NOTE)


async def test_new_notes_get_an_index_line_once_and_the_next_turn_sees_the_index(
    ada: Member,
) -> None:
    # As each turn's prompt reads the indexes: kept, and read again after the tools wrote.
    mine, household = KeptNotes(ada.store.db, PRIVATE_NOTES), KeptNotes(ada.shared.db, SHARED_NOTES)
    assert await _indexes(mine, household) == ("", "")

    said = await ada.ok(
        "write_file",
        path="user-memory/people/ada.md",
        content="Some intro\n## Ada Rossi\nbirthday\n",
    )
    assert "Added a line for it to user-memory/index.md" in said
    await ada.ok("write_file", path="user-memory/people/ada.md", content="# Ada\nchanged\n")
    await ada.ok("write_file", path="user-memory/wifi.md", content="\n\n  guest   network\n")
    await ada.ok("write_file", path="user-memory/blank.md", content="")
    assert await ada.store.note_get("index.md") == (
        "- people/ada.md — Ada Rossi\n- wifi.md — guest network\n- blank.md — (empty note)\n"
    )

    said = await ada.ok("write_file", path="shared-memory/house/bins.md", content="# Bins\n")
    assert "shared-memory/index.md" in said
    assert await _indexes(mine, household) == (
        await ada.store.note_get("index.md"),
        "- house/bins.md — Bins\n",
    )


async def test_the_models_index_lines_are_kept_and_recognised(ada: Member) -> None:
    mine = "# My notes\n- `people/ada.md`: my sister\n- user-memory/food.md - what we eat"
    assert "Added" not in await ada.ok("write_file", path="user-memory/index.md", content=mine)
    assert await ada.store.note_get("index.md") == mine  # no line about the index itself

    for path in ("user-memory/people/ada.md", "user-memory/food.md"):
        said = await ada.ok("write_file", path=path, content="# x\n")
        assert "Added" not in said
    # Neither `people/ada.md` nor `food.md` stands for these two.
    await ada.ok("write_file", path="user-memory/ada.md", content="# Top-level Ada\n")
    await ada.ok("write_file", path="user-memory/people/ada/kids.md", content="# Kids\n")
    assert await ada.store.note_get("index.md") == (
        mine + "\n- ada.md — Top-level Ada\n- people/ada/kids.md — Kids\n"
    )

    # A note written by someone else (the API) gets its line at the next edit.
    await ada.store.note_put("gifts.md", "# Gift ideas\nbooks\n")
    await ada.ok("edit_file", path="user-memory/gifts.md", old_text="books", new_text="maps")
    assert (await ada.store.note_get("index.md")).endswith("- gifts.md — Gift ideas\n")


def test_summary_is_first_heading_else_first_line() -> None:
    assert note_summary("intro line\n# Title  here #\n") == "Title here"
    assert note_summary("#hashtag is not a heading\n") == "#hashtag is not a heading"
    assert note_summary("#\n\n   first   words  \n") == "first words"
    assert note_summary(" \n\t\n") == "(empty note)"
    long = note_summary("# " + "w" * 300)
    assert len(long) == 100 and long.endswith("…")


# -- listing and search -------------------------------------------------------------------


async def test_list_files(ada: Member) -> None:
    empty = await ada.ok("list_files")
    assert empty == "user-memory/ has no notes yet.\n\nshared-memory/ has no notes yet."

    await ada.ok("write_file", path="user-memory/people/ada.md", content="# Ada\n")
    await ada.ok("write_file", path="user-memory/people/bob.md", content="# Bob\n")
    await ada.ok("write_file", path="user-memory/todo.md", content="# Todo\n")
    await ada.ok("write_file", path="shared-memory/house/bins.md", content="# Bins\n")

    both = await ada.ok("list_files")
    user_part, shared_part = both.split("\n\n")
    assert user_part.startswith("user-memory/ (4 notes):")
    assert "- user-memory/people/ada.md  6 bytes, updated 20" in user_part
    assert "- user-memory/index.md" in user_part
    assert shared_part.startswith("shared-memory/ (2 notes):")
    assert "- shared-memory/house/bins.md  7 bytes, updated " in shared_part
    assert shared_part.endswith(", by you")

    folder = await ada.ok("list_files", path="user-memory/people")
    assert folder.split("\n")[0] == "user-memory/people/ (2 notes):"
    assert "todo.md" not in folder and "bob.md" in folder
    assert await ada.ok("list_files", path="shared-memory/") == shared_part
    assert await ada.ok("list_files", path="user-memory/nope/") == "user-memory/nope/ has no notes."

    assert "not a folder" in await ada.fails("list_files", path="user-memory/todo.md")
    assert "user-memory/" in await ada.fails("list_files", path="/home/ada")
    assert "'..'" in await ada.fails("list_files", path="user-memory/..")


async def test_memory_search(ada: Member) -> None:
    # Straight into the stores, so that no index line matches too.
    await ada.store.note_put("food.md", "Ada bakes sourdough bread.")
    await ada.store.note_put("other.md", "nothing to see")
    await ada.shared.note_put("recipes/bread.md", "# Bread\nflour", ada.id)

    found = await ada.ok("memory_search", query="bread")
    lines = found.split("\n")
    assert lines[0] == "2 notes found for 'bread':"
    assert {line.split(":")[0] for line in lines[1:]} == {
        "- user-memory/food.md",
        "- shared-memory/recipes/bread.md",
    }
    assert "[bread]" in found

    only = await ada.ok("memory_search", query="bread", store="user-memory")
    assert "shared-memory" not in only and "user-memory/food.md" in only
    assert (await ada.ok("memory_search", query="bread", limit=1)).startswith("1 note found")
    assert await ada.ok("memory_search", query="tulips") == "No notes match 'tulips'."
    # FTS5 syntax is searched as words, never parsed.
    assert "No notes match" in await ada.ok("memory_search", query='bread" OR * NEAR(')

    assert "empty" in await ada.fails("memory_search", query="   ")
    assert "between 1 and 50" in await ada.fails("memory_search", query="x", limit=500)
    bad_store = await ada.fails("memory_search", check_schema=False, query="x", store="home")
    assert "'store' must be" in bad_store


# -- paths that must not work --------------------------------------------------------------

TRICKS = [
    "user-memory/../shared-memory/x.md",
    "/etc/passwd",
    "shared-memory/../../x.md",
    "user-memory/a/../../b.md",
    "../user-memory/x.md",
    "~/user-memory/x.md",
    "user-memory\\..\\shared-memory\\x.md",
    "user-memory//x.md",
    "user-memory/.hidden.md",
    "user-memory/x.txt",
    "user-memory/x\x00.md",
    "user-memory",
    "notes.md",
    "home/ada/notes.md",
    "",
]


@pytest.mark.parametrize("path", TRICKS)
async def test_path_tricks_are_refused_without_writing(ada: Member, path: str) -> None:
    await ada.ok("write_file", path="user-memory/x.md", content="original")
    await ada.ok("write_file", path="shared-memory/x.md", content="original")
    before = await all_notes(ada)

    for name, args in (
        ("write_file", {"content": "pwned"}),
        ("edit_file", {"old_text": "original", "new_text": "pwned"}),
        ("read_file", {}),
    ):
        message = await ada.fails(name, path=path, **args)
        assert "Nothing was read or written" in message or "Notes live in two places" in message

    assert await all_notes(ada) == before


async def test_a_path_outside_the_stores_names_the_places_that_exist(ada: Member) -> None:
    message = await ada.fails("read_file", path="/etc/passwd")
    assert "'/etc/passwd' is not a note" in message
    assert "user-memory/" in message and "shared-memory/" in message
    odd = await ada.fails("write_file", check_schema=False, path=5, content="x")
    assert "'path' must be text" in odd
    assert "'content' must be text" in await ada.fails(
        "write_file", check_schema=False, path="user-memory/x.md", content=None
    )


async def test_read_only_shared_memory(users: UserManager, registry: Registry) -> None:
    kid = await make_member(users, registry, "tim", shared_writable=False)
    await kid.shared.note_put("house/bins.md", "# Bins\nMonday", None)

    refused = await kid.fails("write_file", path="shared-memory/house/bins.md", content="x")
    assert "read-only for you" in refused
    edit = await kid.fails(
        "edit_file", path="shared-memory/house/bins.md", old_text="Monday", new_text="x"
    )
    assert "read-only" in edit
    assert await kid.shared.note_get("house/bins.md") == "# Bins\nMonday"
    assert "Monday" in await kid.ok("read_file", path="shared-memory/house/bins.md")
    assert "read-only for you" in await kid.ok("list_files", path="shared-memory")
    await kid.ok("write_file", path="user-memory/me.md", content="# Me")


# -- one member's tools never reach another member's notes -----------------------------------


async def test_members_tools_are_bound_to_their_own_store(
    users: UserManager, registry: Registry
) -> None:
    a = await make_member(users, registry, "ada")
    b = await make_member(users, registry, "bob")
    await b.ok("write_file", path="user-memory/secret.md", content="# Secret\nbob's sesame")
    b_before = {i.path: await b.store.note_get(i.path) for i in await b.store.note_list()}

    assert "no note" in await a.fails("read_file", path="user-memory/secret.md")
    assert await a.ok("memory_search", query="sesame") == "No notes match 'sesame'."
    assert "has no notes yet" in (await a.ok("list_files")).split("\n\n")[0]

    attempts = [
        f"user-memory/{b.id}/secret.md",
        "user-memory/bob/secret.md",
        "user-memory/../bob/secret.md",
        f"user-memory/../../users/{b.id}/secret.md",
        f"/data/users/{b.id}.db",
        "bob/user-memory/secret.md",
    ]
    for path in attempts:
        await a.run("read_file", path=path)
        await a.run("write_file", path=path, content="from ada")
        await a.run("edit_file", path=path, old_text="sesame", new_text="x")
        await a.run("list_files", path=path)

    assert "sesame" not in str(await all_notes(a))
    # Ada's own copy of "secret.md" lands in her store, never in Bob's.
    await a.ok("write_file", path="user-memory/secret.md", content="ada's own")
    await a.ok("edit_file", path="user-memory/secret.md", old_text="own", new_text="note")
    assert await a.store.note_get("secret.md") == "ada's note"
    b_after = {i.path: await b.store.note_get(i.path) for i in await b.store.note_list()}
    assert b_after == b_before
    assert "bob's sesame" in await b.ok("read_file", path="user-memory/secret.md")
