"""The memory notes as the file tools reach them: reads, writes, edits, listings, search.

The tools themselves are the one family of `skald.files.tools` (`read_file`, `write_file`,
`edit_file`, `list_files` dispatch a note path to `NoteStores` here); `memory_search` is
the stores' own. This module keeps what is particular to notes.

Two virtual stores, named by agent paths (`skald.store.note_paths`):
- `user-memory/…`: the member's private notes, in their own owner database;
- `shared-memory/…`: the household's notes, in the registry.

A member's tools are built around that member's `OwnerStore`, so no path can reach
another member's notes. Every path goes through `parse_note_path` / `parse_note_folder`;
anything else (`/etc/passwd`, `..`, a home folder) is an error result that names the two
places that exist. Bad input never raises: it becomes a `ToolResult` with `is_error`.

Each store keeps an `index.md` with one line per note (`- people/ada.md — Ada`). After a
write to any other note, if the store's index does not mention that note yet, a line is
appended with the note's first heading (or first line) as its summary. Lines are only
ever added, never rewritten or removed: the model owns the index.

A write runs as one transaction on the store's database: the note and its index line
commit together, and an edit's read-modify-write cannot interleave with another writer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import apsw

from skald.agent.prompts import one_line
from skald.agent.tools import (
    Reads,
    Tool,
    ToolContext,
    ToolResult,
    Touches,
    file_touches,
)
from skald.errors import DiskFullError, InvalidInputError, NotFoundError, QuotaExceededError
from skald.llm.types import tool_spec
from skald.permissions import declare
from skald.quota import Budget, BudgetSource
from skald.store import notes
from skald.store.note_paths import (
    INDEX_NOTE,
    SHARED_MEMORY,
    STORES,
    USER_MEMORY,
    NoteFolder,
    NotePath,
    NoteStoreName,
    parse_note_folder,
    parse_note_path,
    store_of,
)
from skald.store.notes import PRIVATE_NOTES, SHARED_NOTES, NoteHit, NoteInfo, NoteTables
from skald.store.owner import OwnerStore
from skald.store.registry import now_iso
from skald.store.shared_memory import SharedMemoryStore
from skald.tools.args import Refusal as _Refusal
from skald.tools.args import human_size as _size
from skald.tools.args import int_arg as _int
from skald.tools.args import plural as _plural
from skald.tools.args import text_arg as _text
from skald.tools.args import text_lines as _lines

__all__ = [
    "INDEX_SEPARATOR",
    "MAX_NOTE_BYTES",
    "MemorySearchTool",
    "NoteStores",
    "NumberedRows",
    "index_line",
    "note_summary",
    "replaced_text",
]

# Reading the household's notes: the note tools (`shared_readable`), the prompt's shared
# index and the Files API's `shared-memory` place.
MEMORY_SHARED = declare("memory.shared", "Read the household's shared memory")

MAX_NOTE_BYTES: Final = 256 * 1024  # a note is a page of facts, not a document store
READ_DEFAULT_LINES: Final = 2000
READ_MAX_LINE_CHARS: Final = 2000
READ_MAX_CHARS: Final = 50_000
LIST_MAX_ENTRIES: Final = 200
SEARCH_DEFAULT_LIMIT: Final = 10
SEARCH_MAX_LIMIT: Final = 50
SUMMARY_MAX_CHARS: Final = 100
INDEX_SEPARATOR: Final = " — "

PLACES: Final = (
    f"Notes live in two places: {USER_MEMORY}/ (your private notes) and "
    f"{SHARED_MEMORY}/ (the household's shared notes), for example "
    f"{USER_MEMORY}/people/ada.md."
)


# -- index maintenance --------------------------------------------------------------------

_HEADING = re.compile(r"#{1,6}(?:\s+|$)")


def note_summary(content: str) -> str:
    """The index summary of a note: its first heading, else its first non-blank line."""
    lines = [line.strip() for line in content.split("\n") if line.strip().strip("#").strip()]
    text = ""
    for line in lines:
        match = _HEADING.match(line)
        if match and line[match.end() :].strip("# \t"):
            text = line[match.end() :].strip("# \t")
            break
    if not text and lines:
        text = lines[0]
    text = " ".join(text.split())
    if not text:
        return "(empty note)"
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - 1] + "…"
    return text


def index_line(path: str, content: str) -> str:
    """`- people/ada.md — Ada, Marco's sister` (a store-relative path)."""
    return f"- {path}{INDEX_SEPARATOR}{note_summary(content)}"


def _mentions(index: str, note: NotePath) -> bool:
    """Whether the index names the note, as `people/ada.md` or `user-memory/people/ada.md`.

    The path must stand on its own: `ada.md` is not found inside `people/ada.md`, nor
    `people/ada.md` inside `people/ada.md.bak`.
    """
    pattern = re.compile(
        r"(?<![\w./-])(?:"
        + re.escape(f"{note.store}/")
        + ")?"
        + re.escape(note.path)
        + r"(?![\w/-]|\.[\w/])"
    )
    return pattern.search(index) is not None


def _with_line(index: str, line: str) -> str:
    if index and not index.endswith("\n"):
        index += "\n"
    return f"{index}{line}\n"


# -- the two stores, as the tools see them ----------------------------------------------


@dataclass(frozen=True)
class _Written:
    created: bool  # there was no note at that path before
    indexed: bool  # a line for it was appended to the store's index


@dataclass(frozen=True)
class _Place:
    """One note store: reads go through its store class, writes through one transaction."""

    name: NoteStoreName
    store: OwnerStore | SharedMemoryStore
    tables: NoteTables
    author: str | None  # recorded as `updated_by` on household notes
    # Its mount's rule, asked at each write: a new note gets a line in index.md.
    indexed: Callable[[], bool]

    async def get(self, path: str) -> str | None:
        try:
            return await self.store.note_get(path)
        except NotFoundError:
            return None

    async def update(
        self, note: NotePath, change: Callable[[str | None], str], budget: Budget | None = None
    ) -> _Written:
        """Replace the note by `change(current content or None)`, and keep the index.

        `change` runs on the database thread inside the transaction; a `_Refusal` it
        raises rolls everything back and reaches the caller. So does a write the member's
        storage `budget` refuses (quota or free disk), checked on what the note grows by.
        """
        t = self.tables
        grew: list[int] = []
        keeps_index = self.indexed()  # on the loop: the mounts are not the thread's to ask

        def write(c: apsw.Connection) -> _Written:
            before = notes.get(c, t, note.path)
            after = change(before)
            delta = _utf8_len(after) - _utf8_len(before or "")
            if budget is not None:
                try:
                    budget.check(delta)
                except (QuotaExceededError, DiskFullError) as exc:
                    message = str(exc)
                    raise _Refusal(
                        f"{message[:1].upper()}{message[1:]}. {note.agent_path} was not written."
                    ) from None
            grew.append(delta)
            stamp = now_iso()
            notes.put(c, t, note.path, after, stamp, self.author)
            indexed = False
            if keeps_index and not note.is_index:
                index = notes.get(c, t, INDEX_NOTE) or ""
                if not _mentions(index, note):
                    line = index_line(note.path, after)
                    notes.put(c, t, INDEX_NOTE, _with_line(index, line), stamp, self.author)
                    indexed = True
            return _Written(created=before is None, indexed=indexed)

        written = await self.store.db.transaction(write)
        if budget is not None and self.name == USER_MEMORY:  # the member's own database
            budget.wrote(grew[0])
        return written


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class _Notes:
    """One member's view of the note stores: path checks and the write permission."""

    def __init__(
        self,
        owner: OwnerStore,
        shared: SharedMemoryStore,
        user_id: str,
        shared_writable: bool,
        shared_readable: bool = True,
        budget: BudgetSource | None = None,
        indexed: Callable[[], Collection[str]] = lambda: STORES,
    ) -> None:
        """`indexed`: the note stores whose mount keeps an index, asked at each write (the
        member's mounts as they are then; listing the tools need not compute them)."""
        self.user_id = user_id
        self.budget = budget
        self.shared_writable = shared_writable and shared_readable
        self.places: dict[NoteStoreName, _Place] = {
            USER_MEMORY: _Place(
                USER_MEMORY, owner, PRIVATE_NOTES, None, lambda: USER_MEMORY in indexed()
            ),
        }
        if shared_readable:
            self.places[SHARED_MEMORY] = _Place(
                SHARED_MEMORY, shared, SHARED_NOTES, user_id, lambda: SHARED_MEMORY in indexed()
            )

    @property
    def stores(self) -> tuple[NoteStoreName, ...]:
        return tuple(s for s in STORES if s in self.places)

    def note(self, raw: object) -> NotePath:
        try:
            return parse_note_path(_path_text(raw))
        except InvalidInputError as exc:
            raise _refusal_for(raw, exc) from None

    def folder(self, raw: object) -> NoteFolder:
        try:
            return parse_note_folder(_path_text(raw))
        except InvalidInputError as exc:
            raise _refusal_for(raw, exc) from None

    def writable(self, raw: object) -> NotePath:
        note = self.note(raw)
        if note.is_shared and not self.shared_writable:
            raise _Refusal(
                f"{SHARED_MEMORY}/ is read-only for you, so {note.agent_path} was not "
                f"written. Keep the note in {USER_MEMORY}/ instead, or ask the member "
                "to have it shared."
            )
        return note

    async def current_budget(self) -> Budget | None:
        return None if self.budget is None else await self.budget()

    def place(self, store: NoteStoreName) -> _Place:
        place = self.places.get(store)
        if place is None:
            raise _Refusal(f"{store}/ is not available to you; keep notes in {USER_MEMORY}/.")
        return place


def _path_text(raw: object) -> str:
    if not isinstance(raw, str):
        raise _Refusal(f"'path' must be text. {PLACES}")
    return raw


def _refusal_for(raw: object, exc: InvalidInputError) -> _Refusal:
    if isinstance(raw, str) and store_of(raw) is not None:
        message = str(exc)
        return _Refusal(f"{message[:1].upper()}{message[1:]}. Nothing was read or written.")
    shown = raw if isinstance(raw, str) and len(raw) <= 80 else f"{str(raw)[:77]}..."
    return _Refusal(f"{shown!r} is not a note these tools can reach. {PLACES}")


# -- arguments ------------------------------------------------------------------------------


def _check_size(note: NotePath, content: str) -> None:
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise _Refusal("The text contains characters that are not valid Unicode.") from None
    if size > MAX_NOTE_BYTES:
        raise _Refusal(
            f"{note.agent_path} would be {size} bytes; a note may hold at most "
            f"{MAX_NOTE_BYTES} bytes. Split it into smaller notes by subject."
        )


# -- what the note stores do for the file tools ---------------------------------------------


class NoteStores(_Notes):
    """The note stores as the file tools reach them (`skald.files.tools`): each method
    takes the tool's arguments with `path` naming a note, and answers the tool's result.

    A `_Refusal` raised here is for the model to correct; the tool turns it into an
    error result, word for word."""

    async def old_text(self, raw: object) -> str | None:
        """The note's current text for a preview ("" when new; None when unreachable)."""
        try:
            note = self.note(raw)
            return await self.place(note.store).get(note.path) or ""
        except _Refusal:
            return None

    async def size(self, agent_path: str) -> int:
        """Bytes of the note at a canonical `agent_path`; NotFoundError when none."""
        note = parse_note_path(agent_path)
        place = self.places.get(note.store)
        if place is None:
            raise _Refusal(f"{SHARED_MEMORY}/ is not available to you.")
        return len((await place.store.note_get(note.path)).encode("utf-8"))

    async def read(self, args: dict[str, Any]) -> ToolResult:
        note = self.note(args.get("path"))
        offset = _int(args, "offset_line", 1, 1)
        limit = _int(args, "limit_lines", READ_DEFAULT_LINES, 1)
        content = await self.place(note.store).get(note.path)
        if content is None:
            raise _Refusal(
                f"There is no note at {note.agent_path}. "
                "list_files shows the notes that exist; memory_search finds them by content."
            )
        lines = _lines(content)
        if not lines:
            return ToolResult(content=f"{note.agent_path} is empty.")
        rows = NumberedRows(offset)
        for number in range(offset, min(len(lines), offset + limit - 1) + 1):
            if not rows.add(number, lines[number - 1]):
                break
        return ToolResult(
            content=rows.text(note.agent_path, len(lines)), metadata={"path": note.agent_path}
        )

    async def write(self, args: dict[str, Any]) -> ToolResult:
        note = self.writable(args.get("path"))
        content = _text(args, "content")
        _check_size(note, content)
        written = await self.place(note.store).update(
            note, lambda _before: content, await self.current_budget()
        )
        verb = "Created" if written.created else "Replaced"
        return _written(
            f"{verb} {note.agent_path} ({_plural(len(_lines(content)), 'line')}).", note, written
        )

    async def edit(self, args: dict[str, Any]) -> ToolResult:
        note = self.writable(args.get("path"))
        old = _text(args, "old_text")
        new = _text(args, "new_text")
        replace_all = args.get("replace_all", False)
        if not isinstance(replace_all, bool):
            raise _Refusal("'replace_all' must be true or false.")
        if not old:
            raise _Refusal("old_text is empty. To write a whole note, use write_file.")
        if old == new:
            raise _Refusal("old_text and new_text are the same, so there is nothing to change.")
        replaced: list[int] = []

        def change(before: str | None) -> str:
            if before is None:
                raise _Refusal(
                    f"There is no note at {note.agent_path}. Use write_file to create it."
                )
            after, count = replaced_text(before, old, new, replace_all, note.agent_path, "note")
            _check_size(note, after)
            replaced.append(count)
            return after

        written = await self.place(note.store).update(note, change, await self.current_budget())
        count = replaced[0]
        return _written(
            f"Edited {note.agent_path}: replaced {_plural(count, 'occurrence')}.", note, written
        )

    async def text(self, raw: object) -> tuple[str, str]:
        """(canonical agent path, content) of an existing note, for the line tools."""
        note = self.note(raw)
        content = await self.place(note.store).get(note.path)
        if content is None:
            raise _Refusal(
                f"There is no note at {note.agent_path}. "
                "list_files shows the notes that exist; memory_search finds them by content."
            )
        return note.agent_path, content

    async def change(
        self, raw: object, change: Callable[[str | None, str], tuple[str, str]]
    ) -> ToolResult:
        """Replace the note at `raw` by what `change(current or None, agent path)` gives,
        in one transaction (the line tools): (new content, the result's sentence)."""
        note = self.writable(raw)
        said: list[str] = []

        def checked(before: str | None) -> str:
            after, message = change(before, note.agent_path)
            _check_size(note, after)
            said.append(message)
            return after

        written = await self.place(note.store).update(note, checked, await self.current_budget())
        return _written(said[0], note, written)

    async def listing(self, args: dict[str, Any]) -> ToolResult:
        raw = args.get("path")
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            folders = [NoteFolder(store, "") for store in self.stores]
        else:
            folders = [self.folder(raw)]
        sections = []
        for folder in folders:
            infos = await self.place(folder.store).store.note_list(folder.prefix)
            sections.append(self._section(folder, infos))
        return ToolResult(content="\n\n".join(sections))

    def _section(self, folder: NoteFolder, infos: Sequence[NoteInfo]) -> str:
        read_only = folder.store == SHARED_MEMORY and not self.shared_writable
        note_text = ", read-only for you" if read_only else ""
        if not infos:
            empty = "no notes yet" if not folder.prefix else "no notes"
            return f"{folder.agent_path} has {empty}{note_text}."
        rows = [f"{folder.agent_path} ({_plural(len(infos), 'note')}{note_text}):"]
        for info in infos[:LIST_MAX_ENTRIES]:
            by_you = ", by you" if info.updated_by == self.user_id else ""
            rows.append(
                f"- {folder.store}/{info.path}  {_size(info.size)}, "
                f"updated {info.updated_at}{by_you}"
            )
        if len(infos) > LIST_MAX_ENTRIES:
            rows.append(
                f"… and {len(infos) - LIST_MAX_ENTRIES} more; list a folder to see the rest."
            )
        return "\n".join(rows)


class NumberedRows:
    """The rows `read_file` shows, numbered like `cat -n`: long lines cut, and no more
    rows once they would pass `READ_MAX_CHARS` (notes and files alike)."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.rows: list[str] = []
        self.used = 0
        self.last = offset - 1  # the number of the last row shown

    def add(self, number: int, line: str) -> bool:
        """Add line `number`; False (and nothing added) once the rows are full."""
        if len(line) > READ_MAX_LINE_CHARS:
            line = line[:READ_MAX_LINE_CHARS] + " … (line cut)"
        row = f"{number:6d}\t{line}"
        if self.rows and self.used + len(row) + 1 > READ_MAX_CHARS:
            return False
        self.rows.append(row)
        self.used += len(row) + 1
        self.last = number
        return True

    def text(self, agent_path: str, total: int, counted_all: bool = True) -> str:
        """The rows and where to read on, for a text of `total` lines (at least, when
        not `counted_all`)."""
        if total == 0:
            return f"{agent_path} is empty."
        if self.offset > total:
            raise _Refusal(
                f"{agent_path} has {_plural(total, 'line')}; offset_line must be at most {total}."
            )
        shown = list(self.rows)
        more = self.last < total
        if self.offset > 1 or more:
            of = f" of {total}" if counted_all else ""
            tail = f"; read on with offset_line={self.last + 1}" if more else ""
            shown.append(f"(lines {self.offset}-{self.last}{of}{tail})")
        return "\n".join(shown)


def replaced_text(
    before: str, old: str, new: str, replace_all: bool, agent_path: str, what: str
) -> tuple[str, int]:
    """`before` with `old` replaced by `new` (once unless `replace_all`), and how many
    were replaced; a `_Refusal` naming `what` ("note", "file") when `old` is not there
    exactly once (or at all, with `replace_all`)."""
    count = before.count(old)
    if count == 0:
        raise _Refusal(
            f"old_text was not found in {agent_path}. Read the {what} and copy "
            "the text exactly, spaces and line breaks included."
        )
    if count > 1 and not replace_all:
        raise _Refusal(
            f"old_text occurs {count} times in {agent_path}. Include more of "
            "the surrounding text so that it matches exactly once, or set "
            "replace_all to true to change every occurrence."
        )
    after = before.replace(old, new) if replace_all else before.replace(old, new, 1)
    return after, count


def _written(message: str, note: NotePath, written: _Written) -> ToolResult:
    if written.indexed:
        message += (
            f" Added a line for it to {note.store}/{INDEX_NOTE}; "
            "improve its summary there if it is not clear."
        )
    return ToolResult(content=message, metadata={"path": note.agent_path})


class MemorySearchTool(Reads, Tool):
    """`memory_search`: the note stores' own full-text search (no path, so it names none)."""

    spec = tool_spec(
        "memory_search",
        "Full-text search of the notes (every word must match), best first: paths with an excerpt.",
        {
            "query": {"type": "string", "description": "Words to look for."},
            "store": {
                "type": "string",
                "enum": [USER_MEMORY, SHARED_MEMORY, "both"],
                "description": "Which notes to search (default both).",
            },
            "limit": {
                "type": "integer",
                "description": (f"Default {SEARCH_DEFAULT_LIMIT}, at most {SEARCH_MAX_LIMIT}."),
            },
        },
        ["query"],
    )

    def __init__(self, stores: NoteStores) -> None:
        self.notes = stores

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return file_touches(self.kind, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return await self.search(args)
        except _Refusal as refusal:
            return ToolResult.error(str(refusal))

    async def search(self, args: dict[str, Any]) -> ToolResult:
        query = _text(args, "query").strip()
        if not query:
            raise _Refusal("The query is empty; give the words to look for.")
        which = args.get("store", "both")
        if which == "both":
            stores: tuple[NoteStoreName, ...] = self.notes.stores
        elif which in STORES:
            stores = tuple(s for s in STORES if s == which)
        else:
            raise _Refusal(f"'store' must be {USER_MEMORY}, {SHARED_MEMORY} or both.")
        limit = _int(args, "limit", SEARCH_DEFAULT_LIMIT, 1, SEARCH_MAX_LIMIT)
        hits: list[tuple[NoteStoreName, NoteHit]] = []
        for store in stores:
            found = await self.notes.place(store).store.note_search(query, limit)
            hits += [(store, hit) for hit in found]
        # BM25 scores of two tables are not strictly comparable; close enough to interleave.
        hits.sort(key=lambda pair: pair[1].rank)
        hits = hits[:limit]
        if not hits:
            return ToolResult(content=f"No notes match {query!r}.")
        rows = [f"{_plural(len(hits), 'note')} found for {query!r}:"]
        rows += [f"- {store}/{hit.path}: {one_line(hit.snippet)}" for store, hit in hits]
        return ToolResult(content="\n".join(rows))
