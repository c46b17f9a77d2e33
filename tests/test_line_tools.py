"""The line tools of the file family (append_file, insert_at_line, replace_lines,
search_file, get_outline) on the home, a note store, the household's notes and a
second writable place; their limits, previews and approval categories."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tool_support import RunsTools

from skald.agent import Tool
from skald.approvals.rules import Rule
from skald.core.approvals import decide
from skald.core.users import UserManager
from skald.files.mounts import MemberMount, docs_mount, home_mount, note_mounts
from skald.files.outline import outline
from skald.files.router import PathRouter
from skald.files.tools import MAX_EDIT_BYTES, workspace_tools
from skald.llm.types import ToolCall
from skald.paths import DataLayout
from skald.store.registry import Registry
from skald.store.shared_memory import SharedMemoryStore

PW = "correct horse battery"


@dataclass
class Ada(RunsTools):
    home: Path
    shelf: Path
    tools: dict[str, Tool]


@pytest.fixture
async def ada(users: UserManager, registry: Registry, layout: DataLayout, tmp_path: Path) -> Ada:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text("# Manual\n\n## Files\nhow\n")
    shelf = tmp_path / "shelf"  # a second writable place, as a plugin or shared folder adds
    shelf.mkdir()
    created = await users.create("ada", PW, "member")
    handle = await users.unlock("ada", PW)
    home = layout.home(created.user.id)
    mounts = [
        home_mount(home),
        docs_mount(docs),
        *note_mounts(),
        MemberMount(
            name="shelf",
            prefix="shelf",
            label="Shelf",
            host_path=shelf,
            container_path="/srv/shelf",
            read_only=False,
        ),
    ]
    router = PathRouter(mounts=mounts)
    router.ensure_home()
    tools = workspace_tools(handle.store, SharedMemoryStore(registry.db), created.user.id, router)
    return Ada(home, shelf, {t.name: t for t in tools})


PLACES = ["log.txt", "user-memory/log.md", "shared-memory/log.md", "shelf/log.txt"]


def _text_at(ada: Ada, path: str) -> Path:
    return ada.shelf / "log.txt" if path.startswith("shelf/") else ada.home / path


async def _read(ada: Ada, path: str) -> str:
    return await ada.ok("read_file", path=path)


@pytest.mark.parametrize("path", PLACES)
async def test_append_file_adds_at_the_end_and_creates_what_is_missing(ada: Ada, path: str) -> None:
    said = await ada.ok("append_file", path=path, content="first")
    assert "created it" in said and "1 line" in said
    said = await ada.ok("append_file", path=path, content="second\nthird\n")
    assert "Appended 2 lines" in said and "now has 3 lines" in said
    assert await _read(ada, path) == "     1\tfirst\n     2\tsecond\n     3\tthird"
    assert "empty" in await ada.fails("append_file", path=path, content="")


@pytest.mark.parametrize("path", PLACES)
async def test_insert_at_line_puts_text_before_the_numbered_line(ada: Ada, path: str) -> None:
    await ada.ok("write_file", path=path, content="a\nb\nc\n")
    said = await ada.ok("insert_at_line", path=path, line=2, content="x\ny")
    assert "as lines 2-3" in said and "now has 5 lines" in said
    await ada.ok("insert_at_line", path=path, line=6, content="end\n")
    assert await _read(ada, path) == (
        "     1\ta\n     2\tx\n     3\ty\n     4\tb\n     5\tc\n     6\tend"
    )
    assert "between 1 and 7" in await ada.fails("insert_at_line", path=path, line=9, content="z")


@pytest.mark.parametrize("path", PLACES)
async def test_replace_lines_replaces_a_range_that_still_holds_old_text(
    ada: Ada, path: str
) -> None:
    await ada.ok("write_file", path=path, content="one\ntwo\nthree\nfour\n")
    said = await ada.ok(
        "replace_lines", path=path, start_line=2, end_line=3, old_text="two\nthree",
        new_text="2\n3\n3.5",
    )  # fmt: skip
    assert said.startswith("Replaced lines 2-3 of ") and "now lines 2-4" in said
    assert await _read(ada, path) == "     1\tone\n     2\t2\n     3\t3\n     4\t3.5\n     5\tfour"
    await ada.ok("replace_lines", path=path, start_line=1, end_line=1, old_text="one", new_text="")
    assert (await _read(ada, path)).startswith("     1\t2\n")


@pytest.mark.parametrize("path", PLACES)
async def test_replace_lines_on_a_stale_range_is_refused_with_the_current_text(
    ada: Ada, path: str
) -> None:
    await ada.ok("write_file", path=path, content="alpha\nbeta\ngamma\n")
    # The model read the file, then someone inserted a line above: its range is stale.
    await ada.ok("insert_at_line", path=path, line=1, content="new top")
    refused = await ada.fails(
        "replace_lines", path=path, start_line=2, end_line=2, old_text="beta", new_text="B"
    )
    assert "Nothing was replaced" in refused
    assert "They now read:\n     2\talpha" in refused
    assert await _read(ada, path) == "     1\tnew top\n     2\talpha\n     3\tbeta\n     4\tgamma"
    assert "within 1-4" in await ada.fails(
        "replace_lines", path=path, start_line=3, end_line=9, old_text="x", new_text="y"
    )


@pytest.mark.parametrize("path", PLACES)
async def test_search_file_shows_matches_with_numbered_context(ada: Ada, path: str) -> None:
    body = "\n".join(f"line {n}" for n in range(1, 21)) + "\n"
    await ada.ok("write_file", path=path, content=body.replace("line 5\n", "line 5 milk\n"))
    await ada.ok("append_file", path=path, content="MILK again")
    found = await ada.ok("search_file", path=path, pattern="milk", ignore_case=True)
    assert found.splitlines() == [
        f"2 matches for 'milk' in {found.split(' in ')[1].split(' (')[0]} (21 lines):",
        "     3\tline 3",
        "     4\tline 4",
        ">    5\tline 5 milk",
        "     6\tline 6",
        "     7\tline 7",
        "--",
        "    19\tline 19",
        "    20\tline 20",
        ">   21\tMILK again",
    ]
    assert "No matches" in await ada.ok("search_file", path=path, pattern="cheese")
    assert (await ada.ok("search_file", path=path, pattern="milk")).startswith("1 match ")
    regex = await ada.ok(
        "search_file", path=path, pattern=r"^line 1\d$", regex=True, context_lines=0
    )
    assert regex.count("\n>") == 10
    assert "regular expression" in await ada.fails(
        "search_file", path=path, pattern="(", regex=True
    )


async def test_search_file_and_get_outline_read_the_read_only_manual(ada: Ada) -> None:
    assert ">    3\t## Files" in await ada.ok("search_file", path="docs/README.md", pattern="Files")
    shown = await ada.ok("get_outline", path="docs/README.md")
    assert shown.splitlines()[1:] == ["1-4 # Manual", "  3-4 ## Files"]
    assert "read-only" in await ada.fails("append_file", path="docs/README.md", content="x")


async def test_get_outline_of_a_python_file_gives_definitions_with_line_ranges(ada: Ada) -> None:
    source = (
        "import os\n\n"
        "class Greeter:\n"
        "    def __init__(self, name):\n"
        "        self.name = name\n\n"
        "    @property\n"
        "    def loud(self):\n"
        "        return self.name.upper()\n\n"
        "async def main(*args, key=1, **more):\n"
        "    pass\n"
    )
    (ada.home / "greet.py").write_text(source)
    shown = await ada.ok("get_outline", path="greet.py")
    assert shown.splitlines() == [
        "Outline of ~/greet.py (Python, 12 lines):",
        "3-9 class Greeter",
        "  4-5 def __init__(self, name)",
        "  7-9 def loud(self)",
        "11-12 async def main(*args, key, **more)",
    ]
    (ada.home / "broken.py").write_text("def (:\n")
    assert "cannot parse" in await ada.fails("get_outline", path="broken.py")
    (ada.home / "x.rs").write_text("fn main() {}\n")
    assert "Python (.py) and Markdown (.md)" in await ada.fails("get_outline", path="x.rs")


@pytest.mark.parametrize("path", ["notes.md", "user-memory/plan.md", "shared-memory/plan.md"])
async def test_get_outline_of_markdown_gives_headings_with_section_ranges(
    ada: Ada, path: str
) -> None:
    text = "# Plan\nintro\n## Week 1\n```\n# not a heading\n```\n## Week 2\nx\n# Later\n"
    await ada.ok("write_file", path=path, content=text)
    shown = await ada.ok("get_outline", path=path)
    assert shown.splitlines()[1:] == [
        "1-8 # Plan",
        "  3-6 ## Week 1",
        "  7-8 ## Week 2",
        "9-9 # Later",
    ]


def test_markdown_outline_keeps_closing_hashes_out_of_the_title() -> None:
    _, entries = outline("a.md", "## Title ##\n")
    assert [(e.name, e.start, e.end) for e in entries] == [("Title", 1, 1)]


async def test_line_tools_keep_crlf_files_crlf(ada: Ada) -> None:
    (ada.home / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    await ada.ok("insert_at_line", path="dos.txt", line=2, content="mid")
    await ada.ok("append_file", path="dos.txt", content="end\n")
    await ada.ok(
        "replace_lines", path="dos.txt", start_line=1, end_line=1, old_text="one", new_text="1"
    )
    assert (ada.home / "dos.txt").read_bytes() == b"1\r\nmid\r\ntwo\r\nend\r\n"


async def test_line_tools_refuse_binary_huge_and_missing_files(ada: Ada) -> None:
    (ada.home / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(2000))
    assert "binary" in await ada.fails("search_file", path="photo.png", pattern="x")
    assert "binary" in await ada.fails("append_file", path="photo.png", content="x")
    os.truncate(_touch(ada.home / "big.txt"), MAX_EDIT_BYTES + 1)
    assert "up to 10.0 MB" in await ada.fails("get_outline", path="big.txt")
    assert (
        "nothing at"
        in (await ada.fails("insert_at_line", path="nope.txt", line=1, content="x")).lower()
    )
    assert (
        "no note at"
        in (await ada.fails("search_file", path="user-memory/nope.md", pattern="x")).lower()
    )
    assert "at most" in (
        await ada.fails("append_file", path="user-memory/big.md", content="x" * 300_000)
    )


async def test_previews_show_the_diff_of_what_the_call_would_do(ada: Ada) -> None:
    (ada.home / "list.txt").write_text("a\nb\n")
    preview = await ada.tools["replace_lines"].preview(
        {"path": "list.txt", "start_line": 2, "end_line": 2, "old_text": "b", "new_text": "B"}
    )
    assert preview is not None and "-b\n+B\n" in preview
    append = await ada.tools["append_file"].preview({"path": "list.txt", "content": "c"})
    assert append is not None and "+c\n" in append
    stale = await ada.tools["replace_lines"].preview(
        {"path": "list.txt", "start_line": 2, "end_line": 2, "old_text": "zzz", "new_text": "B"}
    )
    assert stale is None


def _touch(path: Path) -> Path:
    path.touch()
    return path


def _rule(id: int, tool: str, path: str | None, action: str, priority: int) -> Rule:
    return Rule(id, "default", tool, path, action, priority, "")  # type: ignore[arg-type]


async def test_a_rule_can_allow_appending_where_writing_asks(ada: Ada) -> None:
    rules = [
        _rule(1, "@fs_append", "household/log.md", "allow", 5),
        _rule(2, "@fs_write", "**", "require", 10),
        _rule(3, "*", None, "require", 100),
    ]
    tools = ada.tools

    async def action(name: str, **args: Any) -> str:
        decision = decide(ToolCall(id="c1", name=name, arguments=args), tools[name], rules)
        return type(decision).__name__

    assert await action("append_file", path="household/log.md", content="x") == "Allow"
    assert await action("write_file", path="household/log.md", content="x") == "Require"
    assert await action("replace_lines", path="household/log.md", start_line=1, end_line=1,
                        old_text="", new_text="") == "Require"  # fmt: skip
    assert await action("append_file", path="household/other.md", content="x") == "Require"
    # An append is a write too: a rule denying writes denies appending.
    rules.insert(0, _rule(4, "@fs_write", "household/**", "deny", 1))
    assert await action("append_file", path="household/log.md", content="x") == "Deny"
