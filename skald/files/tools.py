"""The file tools of the model: one family for real files and memory notes alike.

`read_file`, `write_file`, `edit_file` and `list_files` dispatch by path: a path into
a note mount (`user-memory/…`, `shared-memory/…`) goes to the note stores
(`skald.tools.memory.NoteStores`, with the path in its canonical form); anything else
goes through the member's `PathRouter` to their home or the read-only manual. `grep`,
`glob` and `show_file` work on files; `memory_search` is the note store's own search.

Two sets are built from the same classes: `workspace_tools` (files and notes) and
`memory_tools` (notes only, for a member without `files`: no router, and the tools
described for notes with `NOTE_SPECS`, so that member's prompt stays what it was).

Bad input never raises out of a tool: it becomes an error result naming what to fix.
Blocking file work runs in a thread; `grep` and `glob` stop when the turn is stopped.
"""

from __future__ import annotations

import asyncio
import io
import re
import stat
import threading
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from skald import walk as tree
from skald.agent.tools import (
    FS_APPEND,
    Reads,
    Tool,
    ToolContext,
    ToolResult,
    Touches,
    Writes,
    file_touches,
)
from skald.errors import NotFoundError, SkaldError
from skald.files.changes import ChangeListener, FileChange
from skald.files.container import ContainerEntry, ContainerPathMissing, ContainerPaths
from skald.files.lines import (
    is_crlf,
    joined,
    lines_of,
    match_groups,
    new_lines,
    stale_range,
)
from skald.files.lookalike import ready_for
from skald.files.mime import sniff
from skald.files.mounts import MemberMount, note_mounts
from skald.files.outline import MAX_ENTRIES, OutlineRefused, outline
from skald.files.router import (
    HOME_MOUNT,
    FileEntry,
    PathRouter,
    Resolved,
    Virtual,
    entry_for,
    guess_mime,
    is_binary,
    list_dir,
    open_read,
    read_head,
    walk,
    write_bytes,
)
from skald.llm.types import ToolSpec, tool_spec
from skald.permissions import declare
from skald.quota import Budget, BudgetSource
from skald.store.note_paths import SHARED_MEMORY, USER_MEMORY
from skald.store.owner import OwnerStore
from skald.store.shared_memory import SharedMemoryStore
from skald.tools.args import Refusal as _Refusal
from skald.tools.args import flag_arg as _flag
from skald.tools.args import human_size as _size
from skald.tools.args import int_arg as _int
from skald.tools.args import plural as _plural
from skald.tools.args import text_arg as _text
from skald.tools.args import text_lines
from skald.tools.memory import (
    READ_DEFAULT_LINES,
    MemorySearchTool,
    NoteStores,
    NumberedRows,
    replaced_text,
)
from skald.tools.preview import MAX_READ_BYTES, edit_preview, unified_diff, write_preview

__all__ = [
    "AppendFileTool",
    "EditFileTool",
    "FileReach",
    "FileTool",
    "GetOutlineTool",
    "GlobTool",
    "GrepTool",
    "InsertAtLineTool",
    "ListFilesTool",
    "ReadFileTool",
    "ReplaceLinesTool",
    "SearchFileTool",
    "ShowFileTool",
    "WriteFileTool",
    "file_tools",
    "glob_regex",
    "memory_tools",
    "text_tools",
    "workspace_tools",
    "write_within",
]

T = TypeVar("T")

# The member's files: the Files API (`features/files/routes.py`), the folder watches of the
# event stream, and the file tools of the member's assistant (`UserRuntime._tools`).
FILES = declare("files", "Browse and manage own files")

MAX_WRITE_BYTES: Final = 10 * 1024 * 1024  # a tool argument, not a transfer channel
MAX_EDIT_BYTES: Final = 10 * 1024 * 1024
COUNT_LINES_UP_TO: Final = 32 * 1024 * 1024  # past this, "more follow" instead of a total
LIST_MAX_ENTRIES: Final = 500
GREP_MAX_FILE_BYTES: Final = 4 * 1024 * 1024
GREP_DEFAULT_RESULTS: Final = 100
GREP_MAX_RESULTS: Final = 1000
GREP_LINE_CHARS: Final = 400
GLOB_DEFAULT_RESULTS: Final = 200
GLOB_MAX_RESULTS: Final = 2000
WALK_MAX_ENTRIES: Final = 100_000
BINARY_SAMPLE: Final = 8192

# Shared by every file tool's `path`: one short line, sent with each tool on every request.
_PATH_HELP = (
    "~/… (home; relative paths too), uploads/… (chat attachments), docs/… (read-only), "
    f"{USER_MEMORY}/… or {SHARED_MEMORY}/… (notes)."
)


# -- the tool descriptions ------------------------------------------------------------------
# One schema per tool, described for files and notes (`workspace_tools`) or for notes
# alone (`NOTE_SPECS`, `memory_tools`). Every character is part of the prompt a member's
# model gets: tests/test_prompt_snapshot.py holds them.

_NOTE_PATH_HELP = (
    f"A note path such as {USER_MEMORY}/people/ada.md (your private notes) or "
    f"{SHARED_MEMORY}/house/heating.md (the household's notes)."
)


def _path(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _read_spec(description: str, path_help: str) -> ToolSpec:
    lines = {
        "offset_line": {
            "type": "integer",
            "description": "First line to show, counting from 1 (default 1).",
        },
        "limit_lines": {
            "type": "integer",
            "description": f"How many lines to show (default {READ_DEFAULT_LINES}).",
        },
    }
    return tool_spec("read_file", description, {"path": _path(path_help), **lines}, ["path"])


def _write_spec(description: str, path_help: str, content: str) -> ToolSpec:
    properties = {"path": _path(path_help), "content": _path(content)}
    return tool_spec("write_file", description, properties, ["path", "content"])


def _edit_spec(what: str, path_help: str) -> ToolSpec:
    properties = {
        "path": _path(path_help),
        "old_text": _path("The exact text to replace."),
        "new_text": _path("The text to put in its place."),
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence (default false).",
        },
    }
    description = (
        "Replace old_text (exact, once unless replace_all; without read_file's line "
        f"numbers) by new_text in a {what}."
    )
    return tool_spec("edit_file", description, properties, ["path", "old_text", "new_text"])


def _list_spec(description: str, path_help: str) -> ToolSpec:
    return tool_spec("list_files", description, {"path": _path(path_help)})


NOTE_SPECS: Final = {
    spec.name: spec
    for spec in (
        _read_spec(
            "Read a note, lines numbered like `cat -n` (numbers not part of the text), "
            f"at most {READ_DEFAULT_LINES} lines at a time.",
            _NOTE_PATH_HELP,
        ),
        _write_spec(
            "Create or replace a whole note (a new one gets a line in its index.md). To "
            "change part of one, use edit_file.",
            _NOTE_PATH_HELP,
            "The whole note, in Markdown.",
        ),
        _edit_spec("note", _NOTE_PATH_HELP),
        _list_spec(
            "List the memory notes in a store or folder, with their sizes and when they "
            f"last changed. Without a path, lists both {USER_MEMORY}/ and {SHARED_MEMORY}/.",
            f"A store or folder, such as {USER_MEMORY}/ or "
            f"{SHARED_MEMORY}/recipes/. Leave out to list both stores.",
        ),
    )
}


# -- small helpers ------------------------------------------------------------------------


def _encode(content: str) -> bytes:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refusal("The text contains characters that are not valid Unicode.") from None
    if len(data) > MAX_WRITE_BYTES:
        raise _Refusal(
            f"The content is {_size(len(data))}; write_file takes at most "
            f"{_size(MAX_WRITE_BYTES)}. Write it in parts, or produce it with a command."
        )
    return data


def _binary_note(found: Resolved, size: int, head: bytes) -> str:
    mime = guess_mime(found.name) or sniff(head[:512])
    return (
        f"{found.agent_path} is a binary file ({mime}, {_size(size)}); read_file shows "
        "text only. show_file shows it to the person."
    )


async def _in_thread(fn: Callable[[threading.Event], T]) -> T:
    """Run blocking work in a thread; a cancelled caller tells it to stop."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(fn, stop)
    finally:
        stop.set()


# -- the dispatching base -----------------------------------------------------------------


@dataclass(frozen=True)
class FileReach:
    """What one member's file tools work through, the same for every tool of a set."""

    router: PathRouter | None  # None: notes only (`memory_tools`)
    notes: NoteStores | None = None  # None: files only (`file_tools`)
    budget: BudgetSource | None = None  # checked by every write through the router
    # The member's sandbox, for absolute paths outside every mount (None: no sandbox).
    container: ContainerPaths | None = None
    # Told after each write through the router (`skald_files_changed`: git history).
    on_change: ChangeListener | None = None


class FileTool(Tool):
    """A tool on files through the router; note paths go to `notes` when there is one.

    Without a router (`memory_tools`) every path must name a note: anything else is
    refused the note stores' way, naming the two places that exist."""

    path_required: bool = True

    def __init__(self, reach: FileReach, spec: ToolSpec | None = None) -> None:
        self.reach = reach
        if spec is not None:
            self.spec = spec

    def touches(self, args: Mapping[str, Any]) -> Touches:
        # Files and notes alike: the router confines both to the member's own places.
        return file_touches(self.kind, args)

    async def old_text(self, raw: object) -> str | None:
        """The current text at `raw` for a preview: notes through their stores, files
        through the router; "" for a new file, None when unreadable or unusual."""
        router, notes = self.reach.router, self.reach.notes
        if router is None:
            return None if notes is None else await notes.old_text(raw)
        try:
            await ready_for(raw)
            parsed = router.parse(raw)
            if isinstance(parsed, Virtual):
                return None if notes is None else await notes.old_text(parsed.agent_path)
            found = await asyncio.to_thread(router.resolve, raw)
        except SkaldError:
            return None
        if not isinstance(found, Resolved):
            return None
        return await asyncio.to_thread(_text_for_preview, found)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        router = self.reach.router
        if router is None:
            return await self._on_note(args)
        try:
            raw = args.get("path")
            if raw is None and not self.path_required:
                raw = "~"
            if raw is None:
                raise _Refusal(f"'path' is required. {_PATH_HELP}")
            await ready_for(raw)  # the name checks below run here, on the event loop
            inside = None if self.reach.container is None else router.container_only(raw)
            if inside is not None:
                return await self.in_container(inside, args, ctx)
            parsed = router.parse(raw)
            if isinstance(parsed, Virtual):
                return await self.virtual(parsed, args, ctx)
            result = await self.work(raw, args, ctx)
        except (_Refusal, SkaldError) as refusal:
            return ToolResult.error(_sentence(str(refusal)))
        if self.reach.on_change is not None and self.kind == "write" and not result.is_error:
            mount, segments = parsed  # lexical: the place and the path the write named
            await self.reach.on_change(
                FileChange(mount=mount.name, paths=("/".join(segments),), action=self.name)
            )
        return result

    async def virtual(self, note: Virtual, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self.reach.notes is None:
            raise _Refusal(
                f"{note.agent_path} is a memory note, which this tool cannot reach; "
                "use memory_search, or read_file and list_files on notes."
            )
        return await self._on_note({**args, "path": note.agent_path})

    async def _on_note(self, args: dict[str, Any]) -> ToolResult:
        # The note stores' refusals are already sentences for the model: word for word.
        try:
            return await self.note(args)
        except _Refusal as refusal:
            return ToolResult.error(str(refusal))

    async def note(self, args: dict[str, Any]) -> ToolResult:
        """Do the work on a note (`args["path"]` names it; `self.reach.notes` is set)."""
        raise _Refusal(f"{self.name} works on files, not on memory notes.")

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Do the work on a path only the member's container has (`self.box` is set)."""
        raise _Refusal(
            f"{path} is inside your sandbox, which {self.name} does not reach; use execute_cmd."
        )

    @property
    def box(self) -> ContainerPaths:
        """The member's container, for `in_container` (only called when there is one)."""
        assert self.reach.container is not None, "container work without a container"
        return self.reach.container

    async def box_text(self, path: str, missing_ok: bool = False) -> str | None:
        """The text of a container file (None when missing and `missing_ok`)."""
        try:
            data = await self.box.read(path, MAX_EDIT_BYTES)
        except ContainerPathMissing:
            if missing_ok:
                return None
            raise
        if is_binary(data[:BINARY_SAMPLE]):
            mime = guess_mime(path.rsplit("/", 1)[-1]) or sniff(data[:512])
            raise _Refusal(
                f"{path} is a binary file ({mime}, {_size(len(data))}); the file tools show text only."
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refusal(f"{path} is not UTF-8 text.") from None

    @abstractmethod
    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Do the work on a physical path; raise `_Refusal` / `SkaldError` to refuse."""

    @property
    def paths(self) -> PathRouter:
        """The router, for `work` (only ever called when there is one)."""
        assert self.reach.router is not None, "file work without a router"
        return self.reach.router

    @property
    def stores(self) -> NoteStores:
        """The note stores, for `note` (only ever called when there are some)."""
        assert self.reach.notes is not None, "note work without note stores"
        return self.reach.notes


def _text_for_preview(found: Resolved) -> str | None:
    """By descriptor through the router (`open_read`), like every read below a home:
    `found.path` is a path string, and a folder on it may be a link by now."""
    try:
        handle, st = open_read(found)
    except NotFoundError:
        return ""
    except SkaldError:
        return None
    with handle:
        if st.st_size > MAX_READ_BYTES:
            return None
        try:
            return handle.read(MAX_READ_BYTES + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None


def _sentence(message: str) -> str:
    message = message.strip()
    if not message:
        return "The tool failed."
    message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else message + "."


class _Reading(Reads, FileTool):
    pass


class _Writing(Writes, FileTool):
    """A tool that writes into the home: every write is checked against the member's
    quota and the free-disk reserve first (when a budget is given), then reported."""

    async def current_budget(self, found: Resolved | None = None) -> Budget | None:
        """The budget a write to `found` counts against: its place's quota owner's (a
        project's owner, a shared folder's creator), else the member's own."""
        if self.reach.budget is None:
            return None
        owner = None if found is None else found.quota_owner
        return await (self.reach.budget() if owner is None else self.reach.budget(owner=owner))

    async def preview(self, args: Mapping[str, Any]) -> str | None:
        raw = args.get("path")
        return self.previewed(str(raw), await self.old_text(raw), args)

    @abstractmethod
    def previewed(self, path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
        """The diff this call would make to `old`, the text at `path` now (None:
        unreadable, so no preview)."""


def _existing_size(found: Resolved) -> int:
    """Bytes the file at `found` holds now (0 if there is none or it is not a file),
    looked at by descriptor: through a folder swapped for a link, another member's big
    file would pass for the one replaced and credit the quota."""
    if found.is_root:
        return 0
    try:
        with tree.opened(found.root, found.parts[:-1]) as parent:
            st = tree.lstat_at(parent, found.parts[-1])
    except OSError:
        return 0
    return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else 0


def write_within(budget: Budget | None, found: Resolved, data: bytes) -> tuple[FileEntry, bool]:
    """`write_bytes` after the budget's check of what the write adds; reported after."""
    delta = len(data) - _existing_size(found)
    if budget is not None:
        budget.fresh_check(delta)
    written = write_bytes(found, data)
    if budget is not None:
        budget.wrote(delta)
    return written


# -- read_file ----------------------------------------------------------------------------


class ReadFileTool(_Reading):
    spec = _read_spec(
        "Read a text file or note, lines numbered like `cat -n` (numbers not part of "
        f"the text), at most {READ_DEFAULT_LINES} lines at a time. Binary files are "
        "not shown as text.",
        _PATH_HELP,
    )

    async def note(self, args: dict[str, Any]) -> ToolResult:
        return await self.stores.read(args)

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        offset = _int(args, "offset_line", 1, 1)
        limit = _int(args, "limit_lines", READ_DEFAULT_LINES, 1)
        found = await asyncio.to_thread(self.paths.physical, raw)
        text = await asyncio.to_thread(_read_lines, found, offset, limit)
        return ToolResult(content=text, metadata={"path": found.agent_path})

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        offset = _int(args, "offset_line", 1, 1)
        limit = _int(args, "limit_lines", READ_DEFAULT_LINES, 1)
        text = await self.box_text(path)
        assert text is not None
        reader = io.BytesIO(text.encode("utf-8"))
        return ToolResult(content=_rows_of(reader, path, offset, limit), metadata={"path": path})


def _read_lines(found: Resolved, offset: int, limit: int) -> str:
    handle, st = open_read(found)
    with handle:
        head = handle.read(BINARY_SAMPLE) or b""
        if is_binary(head):
            raise _Refusal(_binary_note(found, st.st_size, head))
        handle.seek(0)
        reader = io.BufferedReader(handle, buffer_size=64 * 1024)
        return _rows_of(reader, found.agent_path, offset, limit)


def _rows_of(reader: io.BufferedIOBase, agent_path: str, offset: int, limit: int) -> str:
    rows = NumberedRows(offset)
    total = 0
    counted_all = True
    scanned = 0
    full = False
    for number, raw_line in enumerate(reader, start=1):
        total = number
        scanned += len(raw_line)
        if offset <= number < offset + limit and not full:
            line = raw_line.decode("utf-8", "replace").rstrip("\n").removesuffix("\r")
            full = not rows.add(number, line)
        elif number >= offset + limit or full:
            full = True
            if scanned > COUNT_LINES_UP_TO:
                counted_all = False
                break
    return rows.text(agent_path, total, counted_all)


# -- write_file and edit_file ---------------------------------------------------------------


class WriteFileTool(_Writing):
    spec = _write_spec(
        "Create or replace a whole file or note (folders are created). To change "
        "part of one, use edit_file.",
        _PATH_HELP,
        "The whole content, as text.",
    )

    def previewed(self, path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
        return write_preview(path, old, args)

    async def note(self, args: dict[str, Any]) -> ToolResult:
        return await self.stores.write(args)

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content = _text(args, "content")
        data = _encode(content)
        budget = await self.current_budget(await asyncio.to_thread(self.paths.writable, raw))

        def write(_: threading.Event) -> tuple[FileEntry, bool]:
            return write_within(budget, self.paths.writable(raw), data)

        entry, created = await _in_thread(write)
        return _wrote(entry.path, created, content, entry.size)

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        content = _text(args, "content")
        data = _encode(content)
        return _wrote(path, await self.box.write(path, data), content, len(data))


def _wrote(path: str, created: bool, content: str, size: int) -> ToolResult:
    verb = "Created" if created else "Replaced"
    return ToolResult(
        content=(f"{verb} {path} ({_plural(len(text_lines(content)), 'line')}, {_size(size)})."),
        metadata={"path": path},
    )


class EditFileTool(_Writing):
    spec = _edit_spec("file or note", _PATH_HELP)

    def previewed(self, path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
        return edit_preview(path, old, args)

    async def note(self, args: dict[str, Any]) -> ToolResult:
        return await self.stores.edit(args)

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        old, new, replace_all = _edit_args(args)
        budget = await self.current_budget(await asyncio.to_thread(self.paths.writable, raw))

        def edit(_: threading.Event) -> tuple[str, int]:
            found = self.paths.writable(raw)
            before = _file_text(
                found, f"edit_file works on text files up to {_size(MAX_EDIT_BYTES)}."
            )
            after, count = replaced_text(before, old, new, replace_all, found.agent_path, "file")
            write_within(budget, found, _encode(after))
            return found.agent_path, count

        path, count = await _in_thread(edit)
        return _edited(path, count)

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        old, new, replace_all = _edit_args(args)
        before = await self.box_text(path)
        assert before is not None
        after, count = replaced_text(before, old, new, replace_all, path, "file")
        await self.box.write(path, _encode(after))
        return _edited(path, count)


def _edit_args(args: dict[str, Any]) -> tuple[str, str, bool]:
    old = _text(args, "old_text")
    new = _text(args, "new_text")
    replace_all = _flag(args, "replace_all")
    if not old:
        raise _Refusal("old_text is empty. To write a whole file, use write_file.")
    if old == new:
        raise _Refusal("old_text and new_text are the same, so there is nothing to change.")
    return old, new, replace_all


def _edited(path: str, count: int) -> ToolResult:
    return ToolResult(
        content=f"Edited {path}: replaced {_plural(count, 'occurrence')}.", metadata={"path": path}
    )


# -- list_files ---------------------------------------------------------------------------


class ListFilesTool(_Reading):
    path_required = False

    spec = _list_spec(
        "List a folder or note folder: sizes, dates, sub-folders ending in /.",
        f"~ (default), docs, uploads, {USER_MEMORY}/, {SHARED_MEMORY}/…",
    )

    async def note(self, args: dict[str, Any]) -> ToolResult:
        return await self.stores.listing(args)

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        notes = () if self.reach.notes is None else self.reach.notes.stores

        def listing(_: threading.Event) -> str:
            found = self.paths.physical(raw)
            entry = entry_for(found)
            if entry.type != "dir":
                return _entry_line(entry)
            entries, truncated = list_dir(found, LIST_MAX_ENTRIES)
            return _listing_text(found, entries, truncated, notes=notes)

        return ToolResult(content=await _in_thread(listing))

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        top, rows, cut = await self.box.listing(path, LIST_MAX_ENTRIES)
        if top.kind != "dir":
            return ToolResult(content=_entry_line(_box_entry(path, top)))
        if not rows:
            return ToolResult(content=f"{path} is empty (inside your sandbox).")
        folder = path.rstrip("/")
        lines = [f"{path} (inside your sandbox, {_plural(len(rows), 'entry')}):"]
        lines += [_entry_line(_box_entry(f"{folder}/{r.name}", r)) for r in rows]
        if cut:
            lines.append(f"… and more; only the first {LIST_MAX_ENTRIES} are shown.")
        return ToolResult(content="\n".join(lines))


def _box_entry(path: str, entry: ContainerEntry) -> FileEntry:
    return FileEntry(
        name=entry.name, path=path, type=entry.kind, size=entry.size, mtime=entry.mtime, mime=None
    )


def _entry_line(entry: FileEntry) -> str:
    if entry.type == "dir":
        return f"- {entry.path}/"
    changed = f", changed {entry.mtime}" if entry.mtime else ""
    if entry.type == "symlink":
        return f"- {entry.path}  (symbolic link{changed})"
    if entry.type == "other":
        return f"- {entry.path}  (special file)"
    return f"- {entry.path}  {_size(entry.size)}{changed}"


def _listing_text(
    found: Resolved, entries: list[FileEntry], truncated: bool, *, notes: tuple[str, ...]
) -> str:
    read_only = "" if found.writable else ", read-only"
    if not entries:
        head = [f"{found.agent_path}/ is empty{read_only}."]
    else:
        folders = sum(1 for e in entries if e.type == "dir")
        counts = ", ".join(
            part
            for part in (
                _plural(folders, "folder") if folders else "",
                _plural(len(entries) - folders, "file") if len(entries) > folders else "",
            )
            if part
        )
        head = [f"{found.agent_path}/ ({counts}{read_only}):"]
        head += [_entry_line(e) for e in entries]
        if truncated:
            head.append(f"… and more; only the first {LIST_MAX_ENTRIES} are shown.")
    if found.mount == HOME_MOUNT and found.is_root:
        also = "docs/ (Skald's manual, read-only)"
        if notes:
            also += f", {' and '.join(f'{n}/' for n in notes)} (memory notes)"
        head.append(f"Also reachable: {also}.")
    return "\n".join(head)


# -- grep and glob --------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over `/`-separated relative paths (use `fullmatch`).

    `*` and `?` stay within one name, `**` spans folders (`**/` also matches none),
    `[abc]`/`[!abc]` are classes, `{a,b}` alternatives.
    """
    return re.compile(_glob_part(pattern), re.DOTALL)


def _glob_part(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                if i + 2 < n and pattern[i + 2] == "/":
                    out.append("(?:[^/]*/)*")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\")
                out.append(f"(?!/)[{'^' if negate else ''}{body}]")
                i = j + 1
                continue
        elif c == "{":
            j = pattern.find("}", i)
            if j < 0:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : j].split(",")
                out.append("(?:" + "|".join(_glob_part(o) for o in options) + ")")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _pattern(raw: str) -> str:
    pattern = raw.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise _Refusal("The pattern is empty.")
    if pattern.startswith(("/", "~")) or "/../" in f"/{pattern}/":
        raise _Refusal(
            "The pattern is matched below 'path'; put the folder in 'path' and a relative "
            "pattern such as **/*.md in 'pattern'."
        )
    return pattern


@dataclass
class _Found:
    lines: list[str] = field(default_factory=list)
    files: int = 0
    matches: int = 0
    too_big: int = 0
    binary: int = 0
    visited: int = 0
    full: bool = False  # stopped at max_results
    cut: bool = False  # stopped at the walk limit


_SEARCH_PROPS: Final = {
    "path": {
        "type": "string",
        "description": ("Folder or file: ~ (default), docs, uploads. Notes: use memory_search."),
    },
    "hidden": {
        "type": "boolean",
        "description": "Include dot files (default false).",
    },
}


def _search_spec(
    name: str, description: str, pattern: str, options: dict[str, Any], results: tuple[int, int]
) -> ToolSpec:
    """A search below a folder: `pattern` (its help), the shared path and hidden, the
    tool's own `options`, and max_results (`results`: its default and its most)."""
    default, most = results
    properties = {
        "pattern": {"type": "string", "description": pattern},
        **_SEARCH_PROPS,
        **options,
        "max_results": {"type": "integer", "description": f"Default {default}, at most {most}."},
    }
    return tool_spec(name, description, properties, ["pattern"])


class _Searching(_Reading):
    """grep and glob: a search below a folder (the home without a path), of files only.
    A note path is refused with where notes are found instead (`for_notes`)."""

    path_required = False
    for_notes: str  # "<tool> <does what with> files; memory notes ({path}) are <…>."

    async def virtual(self, note: Virtual, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise _Refusal(self.for_notes.format(path=note.agent_path))


class GrepTool(_Searching):
    spec = _search_spec(
        "grep",
        "Search file contents below a folder with a Python regular expression, like "
        f"ripgrep (skips binary, hidden, over {_size(GREP_MAX_FILE_BYTES)}). Returns "
        "path:line: text.",
        "The regular expression.",
        {
            "glob": {
                "type": "string",
                "description": ("Only files matching this glob (*.md, notes/**/*.txt)."),
            },
            "ignore_case": {
                "type": "boolean",
                "description": "Ignore case (default false).",
            },
            "files_only": {
                "type": "boolean",
                "description": "Only the paths of matching files.",
            },
        },
        (GREP_DEFAULT_RESULTS, GREP_MAX_RESULTS),
    )
    for_notes = "grep searches files; memory notes ({path}) are searched with memory_search."

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        source = _text(args, "pattern")
        if not source:
            raise _Refusal("The pattern is empty.")
        flags = re.IGNORECASE if _flag(args, "ignore_case") else 0
        try:
            regex = re.compile(source, flags)
        except re.error as exc:
            raise _Refusal(f"The pattern is not a valid regular expression: {exc}.") from None
        name_glob = args.get("glob")
        matcher: re.Pattern[str] | None = None
        by_name = True
        if name_glob is not None:
            pattern = _pattern(_text(args, "glob"))
            matcher = glob_regex(pattern)
            by_name = "/" not in pattern
        files_only = _flag(args, "files_only")
        hidden = _flag(args, "hidden")
        limit = _int(args, "max_results", GREP_DEFAULT_RESULTS, 1, GREP_MAX_RESULTS)

        def search(stop: threading.Event) -> tuple[Resolved, _Found]:
            found = self.paths.physical(raw)
            result = _Found()
            if entry_for(found).type == "file":
                handle, st = open_read(found)
                with handle:
                    _grep_file(
                        handle, st.st_size, found.agent_path, regex, files_only, limit, result, stop
                    )
                return found, result
            for item in walk(found, hidden=hidden, stop=stop):
                result.visited += 1
                if result.visited > WALK_MAX_ENTRIES:
                    result.cut = True
                    break
                if item.kind != "file":
                    continue
                if matcher is not None:
                    subject = item.name if by_name else "/".join(item.rel)
                    if not matcher.fullmatch(subject):
                        continue
                if item.stat.st_size > GREP_MAX_FILE_BYTES:
                    result.too_big += 1
                    continue
                try:
                    handle = item.open()
                except SkaldError:
                    continue
                with handle:
                    _grep_file(
                        handle,
                        item.stat.st_size,
                        item.agent_path,
                        regex,
                        files_only,
                        limit,
                        result,
                        stop,
                    )
                if result.full:
                    break
            return found, result

        found, result = await _in_thread(search)
        return ToolResult(content=_grep_text(found, source, result, files_only, limit))


def _grep_file(
    handle: io.FileIO,
    size: int,
    agent_path: str,
    regex: re.Pattern[str],
    files_only: bool,
    limit: int,
    result: _Found,
    stop: threading.Event,
) -> None:
    if size > GREP_MAX_FILE_BYTES:
        result.too_big += 1
        return
    data = handle.read(GREP_MAX_FILE_BYTES + 1) or b""
    if is_binary(data[:BINARY_SAMPLE]):
        result.binary += 1
        return
    result.files += 1
    text = data.decode("utf-8", "replace")
    for number, line in enumerate(text.split("\n"), start=1):
        if stop.is_set():
            return
        if not regex.search(line):
            continue
        result.matches += 1
        if files_only:
            result.lines.append(agent_path)
        else:
            line = line.removesuffix("\r")
            if len(line) > GREP_LINE_CHARS:
                line = line[:GREP_LINE_CHARS] + " … (line cut)"
            result.lines.append(f"{agent_path}:{number}: {line}")
        if len(result.lines) >= limit:
            result.full = True
            return
        if files_only:
            return


def _grep_text(found: Resolved, source: str, result: _Found, files_only: bool, limit: int) -> str:
    notes = []
    if result.full:
        notes.append(f"stopped at {limit} results; narrow the search or raise max_results")
    if result.cut:
        notes.append(f"stopped after {WALK_MAX_ENTRIES} entries; search a smaller folder")
    if result.too_big:
        notes.append(f"{_plural(result.too_big, 'file')} over {_size(GREP_MAX_FILE_BYTES)} skipped")
    if result.binary:
        notes.append(f"{_plural(result.binary, 'binary file')} skipped")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not result.lines:
        return (
            f"No matches for {source!r} in {found.agent_path} "
            f"({_plural(result.files, 'file')} searched){tail}."
        )
    what = _plural(len(result.lines), "file" if files_only else "match")
    return "\n".join([f"{what} for {source!r} in {found.agent_path}{tail}:", *result.lines])


class GlobTool(_Searching):
    spec = _search_spec(
        "glob",
        "Find files by name below a folder: * and ? in a name, ** across folders "
        "(**/*.pdf: every PDF). Folders end with /.",
        "Relative to path, e.g. **/*.md.",
        {},
        (GLOB_DEFAULT_RESULTS, GLOB_MAX_RESULTS),
    )
    for_notes = (
        "glob finds files; memory notes ({path}) are listed with list_files and searched "
        "with memory_search."
    )

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = _pattern(_text(args, "pattern"))
        matcher = glob_regex(pattern)
        hidden = _flag(args, "hidden")
        limit = _int(args, "max_results", GLOB_DEFAULT_RESULTS, 1, GLOB_MAX_RESULTS)

        def find(stop: threading.Event) -> tuple[Resolved, list[str], bool, bool]:
            found = self.paths.physical(raw)
            if entry_for(found).type != "dir":
                raise _Refusal(f"{found.agent_path} is not a folder; glob searches below a folder.")
            paths: list[str] = []
            for visited, item in enumerate(walk(found, hidden=hidden, stop=stop), start=1):
                if visited > WALK_MAX_ENTRIES:
                    return found, paths, False, True
                if matcher.fullmatch("/".join(item.rel)):
                    paths.append(item.agent_path + ("/" if item.kind == "dir" else ""))
                    if len(paths) >= limit:
                        return found, paths, True, False
            return found, paths, False, False

        found, paths, full, cut = await _in_thread(find)
        notes = []
        if full:
            notes.append(f"stopped at {limit}; narrow the pattern or raise max_results")
        if cut:
            notes.append(f"stopped after {WALK_MAX_ENTRIES} entries; search a smaller folder")
        tail = f" ({'; '.join(notes)})" if notes else ""
        if not paths:
            return ToolResult(content=f"Nothing matches {pattern!r} in {found.agent_path}{tail}.")
        head = f"{_plural(len(paths), 'path')} match {pattern!r} in {found.agent_path}{tail}:"
        return ToolResult(content="\n".join([head, *paths]))


# -- show_file ----------------------------------------------------------------------------


class ShowFileTool(_Reading):
    chat_only = True  # a helper has nobody to show it to
    spec = tool_spec(
        "show_file",
        "Show a file (image, PDF, document) or note to the person in the app's viewer.",
        {"path": {"type": "string", "description": _PATH_HELP}},
        ["path"],
    )

    async def virtual(self, note: Virtual, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self.reach.notes is None:
            raise _Refusal(f"{note.agent_path} is a memory note, which this tool cannot reach.")
        try:
            size = await self.reach.notes.size(note.agent_path)
        except NotFoundError:
            raise _Refusal(f"There is no note at {note.agent_path}.") from None
        name = note.agent_path.rsplit("/", 1)[-1]
        return _shown(note.agent_path, name, "text/markdown", size)

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        def look(_: threading.Event) -> tuple[FileEntry, str]:
            found = self.paths.physical(raw)
            entry = entry_for(found)
            if entry.type == "dir":
                raise _Refusal(f"{found.agent_path} is a folder; show_file shows one file.")
            mime = entry.mime or sniff(read_head(found, 512))
            return entry, mime

        entry, mime = await _in_thread(look)
        return _shown(entry.path, entry.name, mime, entry.size)


def _shown(path: str, name: str, mime: str, size: int) -> ToolResult:
    return ToolResult(
        content=f"Showing {path} to the person ({mime}, {_size(size)}).",
        metadata={"show": path, "mime": mime, "size": size, "name": name, "path": path},
    )


# -- the sets -----------------------------------------------------------------------------


def file_tools(
    router: PathRouter,
    budget: BudgetSource | None = None,
    container: ContainerPaths | None = None,
    on_change: ChangeListener | None = None,
) -> list[Tool]:
    """The file tools alone (no note stores): note paths are refused with a hint.
    `container`: the member's sandbox, for paths only it has (`skald.files.container`)."""
    return _family(FileReach(router, budget=budget, container=container, on_change=on_change))


def workspace_tools(
    owner: OwnerStore,
    shared: SharedMemoryStore,
    user_id: str,
    router: PathRouter,
    *,
    shared_writable: bool = True,
    shared_readable: bool = True,
    budget: BudgetSource | None = None,
    container: ContainerPaths | None = None,
    on_change: ChangeListener | None = None,
) -> list[Tool]:
    """One member's tools on files and notes: read_file, write_file, edit_file,
    list_files, memory_search, grep, glob, show_file, and the line tools
    (`text_tools`: append_file, insert_at_line, replace_lines, search_file,
    get_outline).

    The four shared names reach the note mounts through `NoteStores`; `shared_writable` /
    `shared_readable` mean what they mean for `memory_tools`. `budget`: the member's
    storage budget, checked by every write (files and notes alike). `container`: the
    member's sandbox, for paths only it has (`skald.files.container`).
    """
    notes = NoteStores(
        owner,
        shared,
        user_id,
        shared_writable,
        shared_readable,
        budget,
        lambda: _indexed(router.member_mounts),
    )
    return _family(FileReach(router, notes, budget, container, on_change), MemorySearchTool(notes))


def _family(reach: FileReach, *after_listing: Tool) -> list[Tool]:
    """Every file tool on `reach`, in the order the prompt has always listed them;
    `after_listing` (memory_search) stands after list_files."""
    return [
        ReadFileTool(reach),
        WriteFileTool(reach),
        EditFileTool(reach),
        ListFilesTool(reach),
        *after_listing,
        GrepTool(reach),
        GlobTool(reach),
        ShowFileTool(reach),
        *text_tools(reach),
    ]


def memory_tools(
    owner: OwnerStore,
    shared: SharedMemoryStore,
    user_id: str,
    *,
    shared_writable: bool = True,
    shared_readable: bool = True,
    budget: BudgetSource | None = None,
    mounts: Sequence[MemberMount] | None = None,
) -> list[Tool]:
    """The note tools of a member without files: the same family on their own private
    store and the household's one, described for notes alone.

    `shared_writable=False` turns writes to `shared-memory/` into error results (reads
    stay); `shared_readable=False` (a role without `memory.shared`) hides it entirely.
    Whether a write may go ahead at all is the approval gate's business. `mounts`: the
    member's (default: the built-in note mounts), whose rules the note stores follow.
    """
    indexed = _indexed(mounts)
    notes = NoteStores(
        owner, shared, user_id, shared_writable, shared_readable, budget, lambda: indexed
    )
    reach = FileReach(None, notes)
    return [
        ReadFileTool(reach, NOTE_SPECS["read_file"]),
        WriteFileTool(reach, NOTE_SPECS["write_file"]),
        EditFileTool(reach, NOTE_SPECS["edit_file"]),
        ListFilesTool(reach, NOTE_SPECS["list_files"]),
        MemorySearchTool(notes),
    ]


def _indexed(mounts: Sequence[MemberMount] | None) -> frozenset[str]:
    """The note stores whose mount keeps an index (`MemberMount.indexed`)."""
    return frozenset(m.name for m in (note_mounts() if mounts is None else mounts) if m.indexed)


# -- the line tools: append, insert, replace a range, search one file, outline --------------
# Files and notes alike, by the dispatch above. A change is a pure function of the current
# text (`changed`): the preview is the diff of exactly what the call would do, and a note
# changes inside its store's one transaction. `replace_lines` takes the text the model
# believes is there (`old_text`): a range that no longer holds it is refused with the
# lines as they are now, never applied to whatever moved there. `append_file` touches
# `@fs_append` besides `@fs_write`: every write rule still covers it, and a rule on
# `@fs_append` placed before them can allow appending where writing asks.

SEARCH_MAX_RESULTS: Final = 100
CONTEXT_DEFAULT: Final = 2
CONTEXT_MAX: Final = 20


def _file_text(found: Resolved, too_big: str) -> str:
    """The text of the file `found`, by descriptor; `too_big`: what a file over
    MAX_EDIT_BYTES is told after its path and size. A binary or non-UTF-8 file is refused."""
    handle, st = open_read(found)
    with handle:
        if st.st_size > MAX_EDIT_BYTES:
            raise _Refusal(f"{found.agent_path} is {_size(st.st_size)}; {too_big}")
        data = handle.read(MAX_EDIT_BYTES + 1) or b""
    if is_binary(data[:BINARY_SAMPLE]):
        raise _Refusal(_binary_note(found, len(data), data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refusal(f"{found.agent_path} is not UTF-8 text.") from None


def _line_tools_text(found: Resolved) -> str:
    return _file_text(
        found,
        f"the line tools work on text files up to {_size(MAX_EDIT_BYTES)}. Use grep, or a command.",
    )


def _whole_text(found: Resolved, missing_ok: bool) -> str | None:
    """The file's text (None when it does not exist and `missing_ok`), by descriptor."""
    try:
        return _line_tools_text(found)
    except NotFoundError:
        if missing_ok:
            return None
        raise


class _LineChange(_Writing):
    """A write that is a pure function of the current text (`changed`)."""

    creates = False  # may make the file or note when there is none

    @abstractmethod
    def changed(self, before: str | None, args: Mapping[str, Any], path: str) -> tuple[str, str]:
        """(the new text, the result's sentence); `before` None: there is none yet."""

    def _missing(self, path: str) -> str:
        return f"There is nothing at {path}. Use write_file to create it."

    def previewed(self, path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
        if old is None:
            return None
        try:
            after, _ = self.changed(old if old or self.creates else None, args, path)
        except _Refusal:
            return None
        return unified_diff(path, old, after)

    async def note(self, args: dict[str, Any]) -> ToolResult:
        return await self.stores.change(
            args.get("path"), lambda before, path: self.changed(before, args, path)
        )

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        # A project's or shared folder's writes count against its quota owner.
        budget = await self.current_budget(await asyncio.to_thread(self.paths.writable, raw))

        def change(_: threading.Event) -> tuple[str, str]:
            found = self.paths.writable(raw)
            before = _whole_text(found, self.creates)
            after, said = self.changed(before, args, found.agent_path)
            write_within(budget, found, _encode(after))
            return found.agent_path, said

        path, said = await _in_thread(change)
        return ToolResult(content=said, metadata={"path": path})

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        before = await self.box_text(path, missing_ok=self.creates)
        if before is None and not self.creates:
            raise _Refusal(self._missing(path))
        after, said = self.changed(before, args, path)
        await self.box.write(path, _encode(after))
        return ToolResult(content=said, metadata={"path": path})


class _TextRead(_Reading):
    """A read of one whole text file or note (`answer` works on its text)."""

    @abstractmethod
    def answer(self, text: str, args: Mapping[str, Any], path: str) -> str:
        """The result for the file or note at `path` holding `text`."""

    async def note(self, args: dict[str, Any]) -> ToolResult:
        path, text = await self.stores.text(args.get("path"))
        return ToolResult(content=self.answer(text, args, path), metadata={"path": path})

    async def work(self, raw: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        def read(_: threading.Event) -> tuple[str, str]:
            found = self.paths.physical(raw)
            text = _line_tools_text(found)
            return found.agent_path, self.answer(text, args, found.agent_path)

        path, said = await _in_thread(read)
        return ToolResult(content=said, metadata={"path": path})

    async def in_container(self, path: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text = await self.box_text(path)
        assert text is not None
        return ToolResult(content=self.answer(text, args, path), metadata={"path": path})


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _int_prop(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


# read_file carries the whole path help; these five are sent beside it on every request.
_PATH: Final = _str("As for read_file.")


# -- append_file ------------------------------------------------------------------------------


class AppendFileTool(_LineChange):
    creates = True
    spec = tool_spec(
        "append_file",
        "Add text at the end of a file or note (created if missing).",
        {"path": _PATH, "content": _str("Text to add.")},
        ["path", "content"],
    )

    def touches(self, args: Mapping[str, Any]) -> Touches:
        written = file_touches(self.kind, args)
        return Touches(categories=written.categories | {FS_APPEND}, paths=written.paths)

    def changed(self, before: str | None, args: Mapping[str, Any], path: str) -> tuple[str, str]:
        content = _text(dict(args), "content")
        if not content:
            raise _Refusal("content is empty, so there is nothing to append.")
        base = before or ""
        lines, _ = lines_of(base)
        if is_crlf(lines):
            content = "\r\n".join(line.removesuffix("\r") for line in content.split("\n"))
        glue = "" if not base or base.endswith("\n") else ("\r\n" if is_crlf(lines) else "\n")
        after = base + glue + content
        total = len(lines_of(after)[0])
        made = " (created it)" if before is None else ""
        return after, (
            f"Appended {_plural(len(text_lines(content)), 'line')} to {path}{made}; "
            f"it now has {_plural(total, 'line')}."
        )


# -- insert_at_line --------------------------------------------------------------------------


class InsertAtLineTool(_LineChange):
    spec = tool_spec(
        "insert_at_line",
        "Insert lines before line N of a file or note (read_file's numbers; last+1 appends).",
        {"path": _PATH, "line": _int_prop("N."), "content": _str("Lines to insert.")},
        ["path", "line", "content"],
    )

    def changed(self, before: str | None, args: Mapping[str, Any], path: str) -> tuple[str, str]:
        if before is None:
            raise _Refusal(self._missing(path))
        content = _text(dict(args), "content")
        if not content:
            raise _Refusal("content is empty, so there is nothing to insert.")
        lines, final = lines_of(before)
        at = _int(dict(args), "line", 0, 1)
        if at > len(lines) + 1:
            raise _Refusal(
                f"{path} has {_plural(len(lines), 'line')}; line must be between 1 and "
                f"{len(lines) + 1} (one past the end adds at the end)."
            )
        added = new_lines(content, is_crlf(lines))
        lines[at - 1 : at - 1] = added
        last = at + len(added) - 1
        return joined(lines, final or not before), (
            f"Inserted {_plural(len(added), 'line')} into {path} as lines {at}-{last}; "
            f"it now has {_plural(len(lines), 'line')}."
        )


# -- replace_lines ----------------------------------------------------------------------------


class ReplaceLinesTool(_LineChange):
    spec = tool_spec(
        "replace_lines",
        "Replace lines start_line..end_line (read_file's numbers) of a file or note. If "
        "they no longer hold old_text, nothing changes and you get them as they are.",
        {
            "path": _PATH,
            "start_line": _int_prop("First line."),
            "end_line": _int_prop("Last line (included)."),
            "old_text": _str("Their current text, without numbers."),
            "new_text": _str("Replacement; empty deletes them."),
        },
        ["path", "start_line", "end_line", "old_text", "new_text"],
    )

    def changed(self, before: str | None, args: Mapping[str, Any], path: str) -> tuple[str, str]:
        if before is None:
            raise _Refusal(self._missing(path))
        given = dict(args)
        old = _text(given, "old_text")
        new = _text(given, "new_text")
        lines, final = lines_of(before)
        start = _int(given, "start_line", 0, 1)
        end = _int(given, "end_line", 0, 1)
        if end < start or end > len(lines):
            raise _Refusal(
                f"{path} has {_plural(len(lines), 'line')}; start_line and end_line must "
                f"name a range within 1-{len(lines)}, start_line first."
            )
        now = lines[start - 1 : end]
        if [line.rstrip() for line in now] != [line.rstrip() for line in text_lines(old)]:
            raise _Refusal(stale_range(path, start, now))
        added = new_lines(new, is_crlf(lines))
        lines[start - 1 : end] = added
        where = (
            f"now lines {start}-{start + len(added) - 1}"
            if added
            else "deleted; nothing in their place"
        )
        return joined(lines, final), (
            f"Replaced lines {start}-{end} of {path} with {_plural(len(added), 'line')} "
            f"({where}); it now has {_plural(len(lines), 'line')}."
        )


# -- search_file ------------------------------------------------------------------------------


class SearchFileTool(_TextRead):
    spec = tool_spec(
        "search_file",
        "Find text in one file or note: matches (marked >) with the lines around them, "
        "numbered as read_file numbers them.",
        {
            "path": _PATH,
            "pattern": _str("Text to find."),
            "regex": {"type": "boolean", "description": "pattern is a Python regex."},
            "ignore_case": {"type": "boolean"},
            "context_lines": _int_prop(f"Lines around each match (default {CONTEXT_DEFAULT})."),
        },
        ["path", "pattern"],
    )

    def answer(self, text: str, args: Mapping[str, Any], path: str) -> str:
        given = dict(args)
        source = _text(given, "pattern")
        if not source:
            raise _Refusal("The pattern is empty.")
        flags = re.IGNORECASE if _flag(given, "ignore_case") else 0
        try:
            regex = re.compile(source if _flag(given, "regex") else re.escape(source), flags)
        except re.error as exc:
            raise _Refusal(f"The pattern is not a valid regular expression: {exc}.") from None
        around = _int(given, "context_lines", CONTEXT_DEFAULT, 0, CONTEXT_MAX)
        limit = SEARCH_MAX_RESULTS
        lines, _ = lines_of(text)
        hits = [n for n, line in enumerate(lines, start=1) if regex.search(line.removesuffix("\r"))]
        if not hits:
            return f"No matches for {source!r} in {path} ({_plural(len(lines), 'line')})."
        shown = hits[:limit]
        cut = f"; the first {limit} are shown, narrow the pattern" if len(hits) > limit else ""
        matches = "1 match" if len(hits) == 1 else f"{len(hits)} matches"
        head = f"{matches} for {source!r} in {path} ({_plural(len(lines), 'line')}{cut}):"
        return "\n".join([head, *match_groups(lines, shown, around)])


# -- get_outline ------------------------------------------------------------------------------


class GetOutlineTool(_TextRead):
    spec = tool_spec(
        "get_outline",
        "Outline of a Python file (classes, functions) or Markdown file or note "
        "(headings), with each one's line range.",
        {"path": _PATH},
        ["path"],
    )

    def answer(self, text: str, args: Mapping[str, Any], path: str) -> str:
        try:
            language, entries = outline(path, text)
        except OutlineRefused as refused:
            raise _Refusal(f"{path}: {refused}") from None
        total = _plural(len(lines_of(text)[0]), "line")
        if not entries:
            what = "headings" if language == "Markdown" else "classes or functions"
            return f"{path} ({language}, {total}) has no {what}."
        rows = [f"Outline of {path} ({language}, {total}):"]
        for entry in entries[:MAX_ENTRIES]:
            rows.append(f"{'  ' * entry.depth}{entry.start}-{entry.end} {entry.kind} {entry.name}")
        if len(entries) > MAX_ENTRIES:
            rows.append(f"… and {len(entries) - MAX_ENTRIES} more; search_file finds the rest.")
        return "\n".join(rows)


def text_tools(reach: FileReach) -> list[FileTool]:
    """The line tools of one member, on the same router, note stores, budget and sandbox
    as the rest of the family (`workspace_tools`, `file_tools`)."""
    return [
        AppendFileTool(reach),
        InsertAtLineTool(reach),
        ReplaceLinesTool(reach),
        SearchFileTool(reach),
        GetOutlineTool(reach),
    ]
