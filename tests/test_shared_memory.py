"""Memory note stores: the household's shared notes, the private ones, and their paths."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import pytest
from migration_helpers import build_at

from skald.errors import InvalidInputError, NotFoundError
from skald.store.database import open_plain
from skald.store.migrations import migrate_features
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY
from skald.store.note_paths import (
    INDEX_NOTE,
    MAX_DEPTH,
    MAX_NOTE_PATH_CHARS,
    MAX_SEGMENT_CHARS,
    SHARED_MEMORY,
    USER_MEMORY,
    NoteFolder,
    NotePath,
    index_of,
    note_in,
    parse_note_folder,
    parse_note_path,
    store_of,
)
from skald.store.notes import NoteHit, NoteInfo
from skald.store.owner import OwnerStore
from skald.store.registry import Registry
from skald.store.rows import User
from skald.store.shared_memory import SharedMemoryStore


class NoteStore(Protocol):
    async def note_get(self, path: str) -> str: ...
    async def note_delete(self, path: str) -> None: ...
    async def note_list(self, prefix: str = "") -> list[NoteInfo]: ...
    async def note_search(self, query: str, limit: int = 20) -> list[NoteHit]: ...


class Either:
    """One interface over both stores, so every contract test runs on both tables."""

    def __init__(self, store: OwnerStore | SharedMemoryStore, user_id: str | None) -> None:
        self.store: NoteStore = store
        self._raw = store
        self.user_id = user_id

    async def put(self, path: str, content: str) -> None:
        if isinstance(self._raw, SharedMemoryStore):
            await self._raw.note_put(path, content, self.user_id)
        else:
            await self._raw.note_put(path, content)


def _user(uid: str, name: str) -> User:
    return User(
        id=uid,
        username=name,
        display_name=name.title(),
        role="member",
        encrypted=False,
        active=True,
        locale="en",
        created_at="t",
        updated_at="t",
    )


@pytest.fixture
async def shared(registry: Registry) -> SharedMemoryStore:
    await registry.insert_user(_user("u1", "ada"), "hash", {})
    return SharedMemoryStore(registry.db)


@pytest.fixture(params=["shared", "private"])
async def notes(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Either]:
    if request.param == "shared":
        reg = await Registry.open(tmp_path / "system.db")
        await reg.insert_user(_user("u1", "ada"), "hash", {})
        yield Either(SharedMemoryStore(reg.db), "u1")
        await reg.close()
    else:
        db = await open_plain(tmp_path / "owner.db", "owner")
        await db.call(lambda c: migrate_features(c, OWNER))
        yield Either(OwnerStore(db), None)
        await db.aclose()


# -- the same contract on both stores --------------------------------------------------


async def test_crud(notes: Either) -> None:
    s = notes.store
    await notes.put("people/ada.md", "Ada likes rye bread")
    assert await s.note_get("people/ada.md") == "Ada likes rye bread"
    await notes.put("people/ada.md", "Ada likes spelt bread")
    assert await s.note_get("people/ada.md") == "Ada likes spelt bread"
    await s.note_delete("people/ada.md")
    with pytest.raises(NotFoundError):
        await s.note_get("people/ada.md")
    with pytest.raises(NotFoundError):
        await s.note_delete("people/ada.md")
    assert await s.note_list() == []
    # The index follows deletes: nothing is found once the note is gone.
    assert await s.note_search("spelt") == []


async def test_the_index_forgets_text_edited_out_of_a_note(notes: Either) -> None:
    s = notes.store
    await notes.put("people/ada.md", "Ada likes rye bread and walnuts")
    assert [h.path for h in await s.note_search("walnuts")] == ["people/ada.md"]
    await notes.put("people/ada.md", "Ada likes spelt bread")
    assert await s.note_search("walnuts") == []
    assert await s.note_search("rye") == []
    assert [h.path for h in await s.note_search("spelt")] == ["people/ada.md"]
    # Old words do not linger as a second row either: one hit for a word in both texts.
    assert [h.path for h in await s.note_search("bread")] == ["people/ada.md"]


async def test_list_by_prefix(notes: Either) -> None:
    for path in ("index.md", "people/ada.md", "people/bob.md", "people0.md", "peoplex/z.md"):
        await notes.put(path, f"text of {path}")
    await notes.put("people/ada.md", "changed, and longer than before")
    every = await notes.store.note_list()
    assert [n.path for n in every] == [
        "index.md",
        "people/ada.md",
        "people/bob.md",
        "people0.md",
        "peoplex/z.md",
    ]
    folder = await notes.store.note_list("people/")
    assert [n.path for n in folder] == ["people/ada.md", "people/bob.md"]
    ada = folder[0]
    assert ada.size == len(b"changed, and longer than before")
    assert ada.created_at <= ada.updated_at
    assert ada.updated_by == notes.user_id
    # The prefix is text, never a pattern.
    assert await notes.store.note_list("people%") == []
    assert await notes.store.note_list("_eople/") == []
    assert [n.path for n in await notes.store.note_list("people")] == [
        "people/ada.md",
        "people/bob.md",
        "people0.md",
        "peoplex/z.md",
    ]


async def test_list_counts_bytes_not_characters(notes: Either) -> None:
    await notes.put("café.md", "crème brûlée")
    [info] = await notes.store.note_list("caf")
    assert info.path == "café.md"
    assert info.size == len("crème brûlée".encode())


async def test_search_ranks_and_highlights(notes: Either) -> None:
    await notes.put("house/heating.md", "The boiler is serviced every October by Rossi.")
    await notes.put("house/boiler.md", "Boiler manual: boiler reset button under the boiler cover.")
    await notes.put("food/bread.md", "Sourdough starter lives in the fridge.")
    hits = await notes.store.note_search("boiler")
    assert [h.path for h in hits] == ["house/boiler.md", "house/heating.md"]
    assert hits[0].rank <= hits[1].rank
    assert "[boiler]" in hits[1].snippet.lower()
    assert "[Boiler]" in hits[0].snippet
    # All words must match; path words count too.
    assert [h.path for h in await notes.store.note_search("boiler october")] == ["house/heating.md"]
    assert [h.path for h in await notes.store.note_search("bread")] == ["food/bread.md"]
    # Diacritics folded, limit honoured.
    await notes.put("food/cafe.md", "Il caffè è pronto")
    assert [h.path for h in await notes.store.note_search("caffe")] == ["food/cafe.md"]
    assert len(await notes.store.note_search("boiler", limit=1)) == 1


async def test_search_never_parses_fts_syntax(notes: Either) -> None:
    await notes.put("a.md", 'he said "hello" OR NOT near(x)')
    for query in ['"', "OR", "NOT near(", "path:a", "*", "a AND", "(", "''", "\\"]:
        await notes.store.note_search(query)  # no exception
    assert await notes.store.note_search("   ") == []
    assert [h.path for h in await notes.store.note_search('"hello"')] == ["a.md"]


async def test_long_snippet_is_cut(notes: Either) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    await notes.put("long.md", f"{words} needle {words}")
    [hit] = await notes.store.note_search("needle")
    assert "[needle]" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet.split()) <= 14


# -- what only the shared store does ----------------------------------------------------


async def test_shared_records_who_changed_it(shared: SharedMemoryStore, registry: Registry) -> None:
    await registry.insert_user(_user("u2", "bob"), "hash", {})
    await shared.note_put("house/bins.md", "Blue bin on Tuesdays", "u1")
    [info] = await shared.note_list()
    assert info.updated_by == "u1"
    await shared.note_put("house/bins.md", "Blue bin on Wednesdays", "u2")
    [info] = await shared.note_list()
    assert info.updated_by == "u2"
    # Deleting the member keeps the household's note and forgets who wrote it.
    await registry.delete_user("u2")
    [info] = await shared.note_list()
    assert info.updated_by is None
    assert await shared.note_get("house/bins.md") == "Blue bin on Wednesdays"
    assert [h.path for h in await shared.note_search("wednesdays")] == ["house/bins.md"]


async def test_shared_and_private_are_separate(shared: SharedMemoryStore, tmp_path: Path) -> None:
    db = await open_plain(tmp_path / "owner.db", "owner")
    try:
        await db.call(lambda c: migrate_features(c, OWNER))
        private = OwnerStore(db)
        await private.note_put("index.md", "private index")
        await shared.note_put("index.md", "shared index", "u1")
        assert await private.note_get("index.md") == "private index"
        assert await shared.note_get("index.md") == "shared index"
        assert await shared.note_search("private") == []
        assert await private.note_search("shared") == []
    finally:
        await db.aclose()


async def test_migrated_shared_notes_are_searchable(tmp_path: Path) -> None:
    db = await open_plain(tmp_path / "r.db", "r")
    try:
        await db.call(lambda c: build_at(c, REGISTRY, len(REGISTRY.history)))
        store = SharedMemoryStore(db)
        assert [h.path for h in await store.note_search("sourdough")] == ["wifi.md"]
        infos = {n.path: n.updated_by for n in await store.note_list()}
        assert infos == {"index.md": "abc123", "wifi.md": None}
    finally:
        await db.aclose()


# -- path rules ---------------------------------------------------------------------------

GOOD: list[tuple[str, NotePath]] = [
    ("user-memory/people/ada.md", NotePath(USER_MEMORY, "people/ada.md")),
    ("shared-memory/index.md", NotePath(SHARED_MEMORY, INDEX_NOTE)),
    ("user-memory/index.md", NotePath(USER_MEMORY, INDEX_NOTE)),
    ("user-memory/./x.md", NotePath(USER_MEMORY, "x.md")),
    ("./user-memory/x.md", NotePath(USER_MEMORY, "x.md")),
    ("user-memory/a/./b/c.md", NotePath(USER_MEMORY, "a/b/c.md")),
    ("user-memory/Ada Lovelace.md", NotePath(USER_MEMORY, "Ada Lovelace.md")),
    ("user-memory/caf\u0065\u0301.md", NotePath(USER_MEMORY, "caf\u00e9.md")),  # NFC
    # A folder that happens to be called like the other store stays private.
    ("user-memory/shared-memory/x.md", NotePath(USER_MEMORY, "shared-memory/x.md")),
    ("user-memory/%2e%2e/x.md", NotePath(USER_MEMORY, "%2e%2e/x.md")),  # never decoded
    ("user-memory/people/people.md", NotePath(USER_MEMORY, "people/people.md")),
]

BAD: list[tuple[str, str]] = [
    ("user-memory/../shared-memory/x.md", "'..'"),
    ("user-memory/people/../../shared-memory/x.md", "'..'"),
    ("user-memory/a/..", "'..'"),
    ("../user-memory/x.md", "'..'"),
    ("user-memory//x.md", "empty"),
    ("user-memory/a//b.md", "empty"),
    ("user-memory/x.md/", "folder"),
    ("/user-memory/x.md", "relative"),
    ("//user-memory/x.md", "relative"),
    ("~/user-memory/x.md", "home"),
    ("user-memory\\x.md", "backslash"),
    ("user-memory/..\\shared-memory\\x.md", "backslash"),
    ("user-memory/x\x00.md", "control"),
    ("user-memory/x\n.md", "control"),
    ("user-memory/x\u202e.md", "control"),  # right-to-left override
    ("user-memory/x\u200b.md", "control"),  # zero-width space
    ("user-memory/x.txt", ".md"),
    ("user-memory/x", ".md"),
    ("user-memory/.md", "dot"),
    ("user-memory/.hidden.md", "dot"),
    ("user-memory/.git/x.md", "dot"),
    ("user-memory/...md", "dot"),
    ("user-memory/ x.md", "space"),
    ("user-memory/x.md ", "space"),
    ("user-memory/a.md/b.md", "folder name"),
    ("user-memory/\uff0e\uff0e/x.md", "read as"),  # fullwidth '..'
    ("user-memory/a\uff0fb.md", "read as"),  # fullwidth '/'
    ("user-memory", "whole store"),
    ("user-memory/", "whole store"),
    ("user-memory/.", "whole store"),
    ("User-Memory/x.md", "notes live under"),
    ("home/x.md", "notes live under"),
    ("", "empty"),
    ("   ", "empty"),
    (".", "notes live under"),
    ("user-memory/" + "a" * (MAX_SEGMENT_CHARS + 1) + ".md", "longer than"),
    ("user-memory/" + "/".join(["d"] * MAX_DEPTH) + "/x.md", "levels deep"),
    ("user-memory/" + "/".join(["d" * 60] * 4) + ".md", "characters after"),
    ("user-memory/" + "x" * 10_000 + ".md", "too long"),
]


@pytest.mark.parametrize(("raw", "expected"), GOOD, ids=[g[0] for g in GOOD])
def test_good_note_paths(raw: str, expected: NotePath) -> None:
    found = parse_note_path(raw)
    assert found == expected
    assert store_of(raw) == expected.store
    # Normalised paths are stable: parsing the agent path again gives the same note.
    assert parse_note_path(found.agent_path) == found


@pytest.mark.parametrize(("raw", "why"), BAD, ids=[repr(b[0])[:60] for b in BAD])
def test_bad_note_paths(raw: str, why: str) -> None:
    with pytest.raises(InvalidInputError, match=why):
        parse_note_path(raw)


def test_limits_are_inclusive() -> None:
    name = "a" * (MAX_SEGMENT_CHARS - 3) + ".md"
    assert parse_note_path(f"user-memory/{name}").path == name
    deep = "/".join(["d"] * (MAX_DEPTH - 1)) + "/x.md"
    assert parse_note_path(f"user-memory/{deep}").path == deep
    assert MAX_NOTE_PATH_CHARS < (MAX_SEGMENT_CHARS + 1) * MAX_DEPTH


def test_shared_memory_is_never_reached_from_a_user_memory_path() -> None:
    tricks = [
        "user-memory/../shared-memory/x.md",
        "user-memory/./../shared-memory/x.md",
        "user-memory/a/../../shared-memory/index.md",
        "user-memory/..\\shared-memory/x.md",
        "user-memory/%2e%2e/shared-memory/x.md",
        "user-memory/\uff0e\uff0e/shared-memory/x.md",
        "user-memory/shared-memory/index.md",
        "user-memory//shared-memory/x.md",
    ]
    for raw in tricks:
        try:
            found = parse_note_path(raw)
        except InvalidInputError:
            continue
        assert found.store == USER_MEMORY, raw
    for rel in ["../shared-memory/x.md", "/../shared-memory/x.md", "./../shared-memory/x.md"]:
        with pytest.raises(InvalidInputError):
            note_in(USER_MEMORY, rel)


def test_store_of_routes_every_store_path_to_the_parser() -> None:
    assert store_of("user-memory/x.md") == USER_MEMORY
    assert store_of("./shared-memory") == SHARED_MEMORY
    assert store_of("user-memory\\x.md") == USER_MEMORY  # then refused by the parser
    assert store_of("//user-memory/x") == USER_MEMORY
    assert store_of("shared/recipes/bread.md") is None
    assert store_of("user-memoryx/a.md") is None
    assert store_of("") is None


def test_index_and_store_relative_paths() -> None:
    assert index_of(SHARED_MEMORY) == NotePath(SHARED_MEMORY, INDEX_NOTE)
    assert index_of(SHARED_MEMORY).is_index and index_of(SHARED_MEMORY).is_shared
    assert not parse_note_path("user-memory/people/index.md").is_index
    assert note_in(SHARED_MEMORY, "house/bins.md").agent_path == "shared-memory/house/bins.md"
    with pytest.raises(InvalidInputError):
        note_in(SHARED_MEMORY, "")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("user-memory", NoteFolder(USER_MEMORY, "")),
        ("user-memory/", NoteFolder(USER_MEMORY, "")),
        ("shared-memory/./", NoteFolder(SHARED_MEMORY, "")),
        ("user-memory/people", NoteFolder(USER_MEMORY, "people/")),
        ("user-memory/people/", NoteFolder(USER_MEMORY, "people/")),
        ("user-memory/a/b", NoteFolder(USER_MEMORY, "a/b/")),
    ],
)
def test_note_folders(raw: str, expected: NoteFolder) -> None:
    assert parse_note_folder(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "user-memory/../shared-memory",
        "user-memory//people",
        "user-memory/people//",
        "user-memory/people.md",
        "user-memory/.git",
        "/user-memory",
        "shared",
    ],
)
def test_bad_note_folders(raw: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_note_folder(raw)
