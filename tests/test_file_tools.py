"""The model's file tools: real files through the router, notes through the note tools."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from links_support import escaping, plant_links
from tool_support import CTX, RunsTools

from skald.agent import Tool, ToolResult
from skald.core.users import UserManager
from skald.files import lookalike
from skald.files.router import PathRouter
from skald.files.tools import file_tools, glob_regex, workspace_tools
from skald.paths import DataLayout
from skald.store.owner import OwnerStore
from skald.store.registry import Registry
from skald.store.shared_memory import SharedMemoryStore
from skald.tools.args import plural

PW = "correct horse battery"
SECRET = "B-SECRET-4711"


@dataclass
class Member(RunsTools):
    id: str
    home: Path
    store: OwnerStore
    shared: SharedMemoryStore
    tools: dict[str, Tool]


@dataclass
class Household:
    ada: Member
    bob: Member
    docs: Path
    outside: Path


@pytest.fixture
async def house(
    users: UserManager, registry: Registry, layout: DataLayout, tmp_path: Path
) -> Household:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "README.md").write_text("# Manual\nHow to use Skald.\n")
    (docs / "guide" / "files.md").write_text("Files live in your home.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    members = []
    for name in ("ada", "bob"):
        created = await users.create(name, PW, "member")
        handle = await users.unlock(name, PW)
        router = PathRouter(layout.home(created.user.id), docs)
        router.ensure_home()
        shared = SharedMemoryStore(registry.db)
        tools = workspace_tools(handle.store, shared, created.user.id, router)
        members.append(
            Member(
                created.user.id,
                layout.home(created.user.id),
                handle.store,
                shared,
                {t.name: t for t in tools},
            )
        )
    ada, bob = members
    (bob.home / "private").mkdir()
    (bob.home / "private" / "diary.txt").write_text(f"{SECRET} in bob's diary\n")
    (ada.home / "notes").mkdir()
    (ada.home / "notes" / "plan.md").write_text("# Plan\nbuy milk\ncall Bob\n")
    return Household(ada, bob, docs, outside)


def plant(house: Household) -> None:
    """Links planted in Ada's home from inside her sandbox."""
    plant_links(house.ada.home, "bob", house.bob.home, house.outside, "new.txt")


# -- the set ------------------------------------------------------------------------------


async def test_tool_set_names_kinds_and_flags(house: Household) -> None:
    tools = house.ada.tools
    assert sorted(tools) == [
        "append_file",
        "edit_file",
        "get_outline",
        "glob",
        "grep",
        "insert_at_line",
        "list_files",
        "memory_search",
        "read_file",
        "replace_lines",
        "search_file",
        "show_file",
        "write_file",
    ]
    for name in (
        "read_file", "list_files", "grep", "glob", "show_file", "memory_search", "search_file",
        "get_outline",
    ):  # fmt: skip
        tool = tools[name]
        assert (tool.kind, tool.concurrency_safe, tool.rerun_on_recovery) == ("read", True, True)
    for name in ("write_file", "edit_file", "append_file", "insert_at_line", "replace_lines"):
        tool = tools[name]
        assert (tool.kind, tool.concurrency_safe, tool.rerun_on_recovery) == (
            "write",
            False,
            False,
        )
    alone = {t.name for t in file_tools(PathRouter(house.ada.home, house.docs))}
    assert alone == set(tools) - {"memory_search"}


# -- real files ---------------------------------------------------------------------------


async def test_read_file_numbers_lines_and_reads_in_parts(house: Household) -> None:
    ada = house.ada
    text = await ada.ok("read_file", path="notes/plan.md")
    assert text == "     1\t# Plan\n     2\tbuy milk\n     3\tcall Bob"
    part = await ada.ok("read_file", path="~/notes/plan.md", offset_line=2, limit_lines=1)
    assert part == "     2\tbuy milk\n(lines 2-2 of 3; read on with offset_line=3)"
    assert "at most 3" in await ada.fails("read_file", path="notes/plan.md", offset_line=9)
    assert "nothing at" in (await ada.fails("read_file", path="nope.txt")).lower()
    (ada.home / "empty.txt").write_text("")
    assert await ada.ok("read_file", path="empty.txt") == "~/empty.txt is empty."
    docs = await ada.ok("read_file", path="docs/README.md")
    assert "How to use Skald." in docs
    crlf = ada.home / "dos.txt"
    crlf.write_bytes(b"one\r\ntwo\r\n")
    assert await ada.ok("read_file", path="dos.txt") == "     1\tone\n     2\ttwo"


async def test_binary_files_are_refused_with_a_note(house: Household) -> None:
    ada = house.ada
    (ada.home / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(2000))
    message = await ada.fails("read_file", path="photo.png")
    assert "binary" in message and "image/png" in message and "show_file" in message
    assert "binary" in await ada.fails(
        "edit_file", path="photo.png", old_text="PNG", new_text="JPG"
    )


async def test_write_and_edit(house: Household) -> None:
    ada = house.ada
    created = await ada.ok("write_file", path="plans/trip/list.md", content="a\nb\nb\n")
    assert created.startswith("Created ~/plans/trip/list.md (3 lines")
    assert (ada.home / "plans" / "trip" / "list.md").read_text() == "a\nb\nb\n"
    assert (await ada.ok("write_file", path="plans/trip/list.md", content="a\nb\nb\n")).startswith(
        "Replaced"
    )
    assert "2 times" in await ada.fails(
        "edit_file", path="plans/trip/list.md", old_text="b", new_text="c"
    )
    assert "not found" in await ada.fails(
        "edit_file", path="plans/trip/list.md", old_text="zzz", new_text="c"
    )
    edited = await ada.ok(
        "edit_file", path="plans/trip/list.md", old_text="b\n", new_text="c\n", replace_all=True
    )
    assert edited == "Edited ~/plans/trip/list.md: replaced 2 occurrences."
    assert (ada.home / "plans" / "trip" / "list.md").read_text() == "a\nc\nc\n"
    await ada.ok("edit_file", path="plans/trip/list.md", old_text="a\n", new_text="")
    assert (ada.home / "plans" / "trip" / "list.md").read_text() == "c\nc\n"
    assert "folder" in await ada.fails("write_file", path="notes", content="x")


async def test_the_tools_refuse_names_with_format_characters_and_write_nfc(
    house: Household,
) -> None:
    ada = house.ada
    before = _snapshot(ada.home)
    for path in ("notes/report\u202etxt.exe", "notes/zero\u200bwidth.md"):
        assert "format characters" in await ada.fails("write_file", path=path, content="x")
    assert _snapshot(ada.home) == before
    await ada.ok("write_file", path="notes/cafe\u0301.md", content="menu\n")
    assert (ada.home / "notes" / "caf\u00e9.md").read_text() == "menu\n"
    assert "format characters" in await ada.fails(
        "edit_file", path="notes/plan\u202e.md", old_text="a", new_text="b"
    )


async def test_the_first_name_that_needs_the_look_alike_tables_loads_them_off_the_loop(
    house: Household, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables take 0.1-0.7 s to load: a tool call's name check must not hold the
    event loop for that (every member's turn would stall on one emoji file name)."""
    loaded_on: list[str] = []
    real = lookalike._Tables.__init__

    def recording(self: Any) -> None:
        loaded_on.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(lookalike._Tables, "__init__", recording)
    lookalike._tables.cache_clear()
    try:
        await house.ada.ok("write_file", path="notes/party \U0001f389.md", content="cake\n")
        assert "mixes scripts" in await house.ada.fails(
            "write_file", path="notes/p\u0430ypal.md", content="x"
        )
        assert "mixes scripts" in await house.ada.fails("read_file", path="p\u0430ypal.md")
    finally:
        lookalike._tables.cache_clear()  # the next test loads them unpatched
    assert loaded_on and threading.current_thread().name not in loaded_on, loaded_on
    assert len(loaded_on) == 1  # once, then kept


async def test_the_manual_is_read_only_for_the_tools(house: Household) -> None:
    ada = house.ada
    for args in (
        {"path": "docs/README.md", "content": "defaced"},
        {"path": "docs/new.md", "content": "new"},
        {"path": "~/docs/README.md", "content": "defaced"},
    ):
        assert "read-only" in await ada.fails("write_file", **args)
    assert "read-only" in await ada.fails(
        "edit_file", path="docs/README.md", old_text="Manual", new_text="Hacked"
    )
    assert (house.docs / "README.md").read_text().startswith("# Manual")
    assert not (house.docs / "new.md").exists()


async def test_list_files(house: Household) -> None:
    ada = house.ada
    (ada.home / "hello.txt").write_text("hi")
    listing = await ada.ok("list_files")
    assert listing.splitlines()[0] == "~/ (1 folder, 1 file):"
    assert "- ~/notes/" in listing and "- ~/hello.txt  2 bytes, changed" in listing
    assert "docs/ (Skald's manual, read-only)" in listing and "user-memory/" in listing
    docs = await ada.ok("list_files", path="docs")
    assert "read-only" in docs and "- docs/guide/" in docs and "- docs/README.md" in docs
    assert (await ada.ok("list_files", path="hello.txt")).startswith("- ~/hello.txt  2 bytes")


async def test_grep(house: Household) -> None:
    ada = house.ada
    (ada.home / "notes" / "shop.txt").write_text("Milk\nbread\nmilk chocolate\n")
    (ada.home / "blob.bin").write_bytes(b"milk\x00\x01\x02")
    (ada.home / "huge.txt").write_bytes(b"milk\n" * (1024 * 1024))  # 5 MiB
    (ada.home / ".hidden").mkdir()
    (ada.home / ".hidden" / "h.txt").write_text("milk\n")
    out = await ada.ok("grep", pattern="milk")
    assert out.startswith("2 matches for 'milk' in ~")
    assert out.splitlines()[1:] == [
        "~/notes/plan.md:2: buy milk",
        "~/notes/shop.txt:3: milk chocolate",
    ]
    assert "1 binary file skipped" in out and "over 4.0 MB skipped" in out
    ci = await ada.ok("grep", pattern="milk", ignore_case=True, glob="*.txt")
    assert "~/notes/shop.txt:1: Milk" in ci and "plan.md" not in ci
    assert "~/.hidden/h.txt:1: milk" in await ada.ok("grep", pattern="milk", hidden=True)
    files = await ada.ok("grep", pattern="milk", files_only=True, path="notes")
    assert files.splitlines()[1:] == ["~/notes/plan.md", "~/notes/shop.txt"]
    one = await ada.ok("grep", pattern="milk", max_results=1)
    assert "stopped at 1 results" in one and len(one.splitlines()) == 2
    assert "~/notes/shop.txt:3" in await ada.ok("grep", pattern=r"choc\w+", path="notes/shop.txt")
    assert "No matches" in await ada.ok("grep", pattern="zzz")
    assert "not a valid regular expression" in await ada.fails("grep", pattern="(")
    assert "docs/guide/files.md:1:" in await ada.ok("grep", pattern="home", path="docs")
    assert "memory_search" in await ada.fails("grep", pattern="x", path="user-memory/")


async def test_glob(house: Household) -> None:
    ada = house.ada
    for rel in ("a.md", "sub/b.md", "sub/deeper/c.md", "sub/d.txt", "x.MD"):
        target = ada.home / "g" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rel)
    out = await ada.ok("glob", pattern="**/*.md", path="g")
    assert out.splitlines()[1:] == ["~/g/a.md", "~/g/sub/b.md", "~/g/sub/deeper/c.md"]
    top = await ada.ok("glob", pattern="*.md", path="g")
    assert top.splitlines()[1:] == ["~/g/a.md"]
    both = await ada.ok("glob", pattern="sub/*.{md,txt}", path="g")
    assert both.splitlines()[1:] == ["~/g/sub/b.md", "~/g/sub/d.txt"]
    dirs = await ada.ok("glob", pattern="**/deep*", path="~")
    assert dirs.splitlines()[1:] == ["~/g/sub/deeper/"]
    assert "Nothing matches" in await ada.ok("glob", pattern="*.pdf", path="g")
    assert "relative pattern" in await ada.fails("glob", pattern="/etc/*")
    assert "relative pattern" in await ada.fails("glob", pattern="../*")
    assert "list_files" in await ada.fails("glob", pattern="*", path="user-memory")


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.md", "a.md", True),
        ("*.md", "sub/a.md", False),
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/z.md", True),
        ("**", "x/y", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "c.txt", True),
        ("[!ab].txt", "a.txt", False),
        ("*.{jpg,png}", "x.png", True),
        ("*.{jpg,png}", "x.gif", False),
        ("notes/**", "notes/a/b", True),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is matches


async def test_show_file(house: Household) -> None:
    ada = house.ada
    (ada.home / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    (ada.home / "noext").write_bytes(b"%PDF-1.7 ...")
    result = await ada.run("show_file", path="photo.png")
    assert not result.is_error
    assert result.metadata == {
        "show": "~/photo.png",
        "mime": "image/png",
        "size": 108,
        "name": "photo.png",
        "path": "~/photo.png",
    }
    sniffed = await ada.run("show_file", path="noext")
    assert sniffed.metadata is not None and sniffed.metadata["mime"] == "application/pdf"
    assert "folder" in await ada.fails("show_file", path="notes")
    manual = await ada.run("show_file", path="docs/README.md")
    assert manual.metadata is not None and manual.metadata["show"] == "docs/README.md"
    await ada.ok("write_file", path="user-memory/people/bob.md", content="# Bob\n")
    note = await ada.run("show_file", path="user-memory/people/bob.md")
    assert note.metadata is not None
    assert (note.metadata["show"], note.metadata["mime"]) == (
        "user-memory/people/bob.md",
        "text/markdown",
    )
    assert "no note" in await ada.fails("show_file", path="user-memory/none.md")


# -- notes go to the note tools --------------------------------------------------------------


async def test_note_paths_are_dispatched_to_the_note_tools(house: Household) -> None:
    ada = house.ada
    created = await ada.ok("write_file", path="user-memory/people/ada.md", content="# Ada\nhi\n")
    assert "index.md" in created  # the note tools' own index maintenance
    assert await ada.store.note_get("people/ada.md") == "# Ada\nhi\n"
    assert not (ada.home / "user-memory").exists()
    assert "hi" in await ada.ok("read_file", path="user-memory/people/ada.md")
    assert "hi" in await ada.ok("read_file", path="~/user-memory/people/ada.md")
    await ada.ok("edit_file", path="user-memory/people/ada.md", old_text="hi", new_text="hello")
    assert await ada.store.note_get("people/ada.md") == "# Ada\nhello\n"
    listing = await ada.ok("list_files", path="user-memory/")
    assert "user-memory/people/ada.md" in listing
    found = await ada.ok("memory_search", query="hello")
    assert "user-memory/people/ada.md" in found
    await ada.ok("write_file", path="shared-memory/house/bins.md", content="# Bins\nTuesday\n")
    assert await ada.shared.note_get("house/bins.md") == "# Bins\nTuesday\n"
    # Malformed note paths are refused by the note rules, not turned into files.
    assert "note" in (await ada.fails("write_file", path="user-memory/x.txt", content="x")).lower()
    assert not (ada.home / "user-memory").exists()
    # Another member's notes stay theirs.
    assert (
        "no note" in (await house.bob.fails("read_file", path="user-memory/people/ada.md")).lower()
    )


async def _note_calls(tools: dict[str, Tool], note: str, new: str) -> list[tuple[str, ToolResult]]:
    """Each file tool called on the notes: read and show `note`, write `new`, list the
    shared notes; each tool's name and result."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": note}),
        ("write_file", {"path": new, "content": "x"}),
        ("list_files", {"path": "shared-memory/"}),
        ("show_file", {"path": note}),
    ]
    return [(name, await tools[name].run(args, CTX)) for name, args in calls]


async def test_file_tools_alone_refuse_note_paths(house: Household) -> None:
    tools = {t.name: t for t in file_tools(PathRouter(house.ada.home, house.docs))}
    for name, result in await _note_calls(tools, "user-memory/a.md", "user-memory/a.md"):
        assert result.is_error and "memory" in result.content, (name, result.content)


# -- planted links, every tool -------------------------------------------------------------

ESCAPING = escaping("bob")


def _calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "planted"}),
        ("write_file", {"path": f"{path}/new.txt", "content": "planted"}),
        ("edit_file", {"path": path, "old_text": "SECRET", "new_text": "gone"}),
        ("list_files", {"path": path}),
        ("grep", {"pattern": "SECRET", "path": path}),
        ("glob", {"pattern": "**", "path": path}),
        ("show_file", {"path": path}),
    ]


def _snapshot(*roots: Path) -> dict[str, bytes]:
    out = {}
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in files:
                file = Path(dirpath) / name
                out[str(file)] = file.read_bytes()
    return out


@pytest.mark.parametrize("path", ESCAPING)
async def test_every_tool_refuses_planted_links(house: Household, path: str) -> None:
    plant(house)
    before = _snapshot(house.bob.home, house.outside)
    for name, args in _calls(path):
        result = await house.ada.run(name, **args)
        assert result.is_error, f"{name} {args}: {result.content}"
        assert SECRET not in result.content, f"{name} leaked: {result.content}"
        assert "not reachable" in result.content or "symbolic link" in result.content, (
            f"{name} {args}: {result.content}"
        )
    assert _snapshot(house.bob.home, house.outside) == before
    assert not (house.bob.home / "private" / "new.txt").exists()


async def test_searching_the_whole_home_never_leaves_it(house: Household) -> None:
    plant(house)
    out = await house.ada.ok("grep", pattern="B-SECRET|root:|milk", hidden=True)
    assert out.splitlines()[1:] == ["~/notes/plan.md:2: buy milk"]
    found = await house.ada.ok("glob", pattern="**", hidden=True, max_results=2000)
    assert "diary" not in found and "passwd" not in found and "secret" not in found
    assert all(line.startswith("~/") for line in found.splitlines()[1:])


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../bob/private/diary.txt",
        "~bob/private/diary.txt",
        "a\x00b",
        "x" * 5000,
    ],
)
async def test_paths_out_of_reach_are_refused_by_every_tool(house: Household, path: str) -> None:
    for name, args in _calls(path):
        result = await house.ada.run(name, **args)
        assert result.is_error, f"{name} {args}: {result.content}"


async def test_no_spelling_reaches_another_members_home(house: Household) -> None:
    bob_home = str(house.bob.home)
    for path in (
        bob_home + "/private/diary.txt",
        f"../{house.bob.id}/private/diary.txt",
        f"~/../{house.bob.id}/private/diary.txt",
        f"~{house.bob.id}/private/diary.txt",
        f"/home/skald/../{house.bob.id}/private/diary.txt",
    ):
        result = await house.ada.run("read_file", path=path)
        assert result.is_error and SECRET not in result.content, path


async def test_without_household_notes_the_tools_refuse_them(
    house: Household, registry: Registry
) -> None:
    ada = house.ada
    router = PathRouter(ada.home, house.docs)
    tools = {
        t.name: t
        for t in workspace_tools(ada.store, ada.shared, ada.id, router, shared_readable=False)
    }
    await ada.shared.note_put("house/bins.md", "Tuesday\n", house.bob.id)
    for name, result in await _note_calls(
        tools, "shared-memory/house/bins.md", "shared-memory/house/x.md"
    ):
        assert result.is_error and "Tuesday" not in result.content, (name, result.content)
    home = await tools["list_files"].run({}, CTX)
    assert "user-memory/" in home.content and "shared-memory" not in home.content


async def test_write_tools_preview_the_file_or_note_they_would_change(house: Household) -> None:
    """The tool contract's preview: a diff of the very file (or note) the call names."""
    tools = house.ada.tools
    edit = await tools["edit_file"].preview(
        {"path": "~/notes/plan.md", "old_text": "buy milk", "new_text": "buy bread"}
    )
    assert edit is not None and "-buy milk\n+buy bread\n" in edit
    new = await tools["write_file"].preview({"path": "~/new.txt", "content": "hello\n"})
    assert new is not None and "+hello\n" in new
    await house.ada.ok("write_file", path="user-memory/a.md", content="# A\n")
    note = await tools["write_file"].preview({"path": "user-memory/a.md", "content": "# B\n"})
    assert note is not None and "-# A\n+# B\n" in note
    # No preview where the call would fail, or for paths that leave the places.
    plant(house)
    assert await tools["write_file"].preview({"path": "~/secret_link.txt", "content": "x"}) is None
    assert (
        await tools["edit_file"].preview(
            {"path": "~/notes/plan.md", "old_text": "nope", "new_text": "x"}
        )
        is None
    )
    assert await tools["read_file"].preview({"path": "~/notes/plan.md"}) is None


@pytest.mark.parametrize(
    ("count", "word", "said"),
    [
        (1, "match", "1 match"),
        (2, "match", "2 matches"),
        (3, "entry", "3 entries"),
        (0, "file", "0 files"),
        (2, "day", "2 days"),
        (2, "binary file", "2 binary files"),
    ],
)
def test_the_tools_counts_are_said_in_plain_english(count: int, word: str, said: str) -> None:
    assert plural(count, word) == said
