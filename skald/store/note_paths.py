"""Paths of the two virtual note stores as agents write them.

An agent names a note `user-memory/people/ada.md` (the member's private notes, in their
owner database) or `shared-memory/recipes/bread.md` (the household's, in the registry).
This module turns such a path into (store, store-relative path) or refuses it with a
message the model can act on. It never touches a database or a disk.

Rules, checked on the raw text and again after normalising:
- relative only: no leading `/`, no `~`, no backslash, no control characters (NUL included);
- `.` segments are dropped; `..` anywhere is refused (so one store can never be reached
  from a path that starts in the other); empty segments (`a//b`) are refused;
- names may not start with a dot or have spaces at either end; folder names may not end
  in `.md`;
- a note is a `.md` file; `index.md` at the top of a store is that store's index;
- bounded length and depth; text is stored in Unicode NFC so one name has one key.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Final, Literal

from skald.errors import InvalidInputError

NoteStoreName = Literal["user-memory", "shared-memory"]

USER_MEMORY: Final = "user-memory"
SHARED_MEMORY: Final = "shared-memory"
STORES: Final[tuple[NoteStoreName, ...]] = (USER_MEMORY, SHARED_MEMORY)
INDEX_NOTE: Final = "index.md"
NOTE_SUFFIX: Final = ".md"

MAX_NOTE_PATH_CHARS: Final = 200  # the store-relative part
MAX_SEGMENT_CHARS: Final = 100
MAX_DEPTH: Final = 8  # folders plus the file name


@dataclass(frozen=True)
class NotePath:
    """A validated note: which store, and its path inside it (`people/ada.md`)."""

    store: NoteStoreName
    path: str

    @property
    def agent_path(self) -> str:
        return f"{self.store}/{self.path}"

    @property
    def is_index(self) -> bool:
        return self.path == INDEX_NOTE

    @property
    def is_shared(self) -> bool:
        return self.store == SHARED_MEMORY


@dataclass(frozen=True)
class NoteFolder:
    """A validated folder of a store for listing: `prefix` is "" or ends with "/"."""

    store: NoteStoreName
    prefix: str

    @property
    def agent_path(self) -> str:
        return f"{self.store}/{self.prefix}"


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 80 else raw[:77] + "...")


def _refuse(raw: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"invalid note path {_shown(raw)}: {why}")


def _segments(raw: str) -> list[str]:
    """Split and normalise; refuse anything that could escape or alias a path."""
    if not isinstance(raw, str):
        raise InvalidInputError("a note path must be text")
    if len(raw) > 4 * (len(SHARED_MEMORY) + 1 + MAX_NOTE_PATH_CHARS):
        raise _refuse(raw, "too long")
    if not raw.strip():
        raise _refuse(raw, "empty")
    if "\\" in raw:
        raise _refuse(raw, "use '/' between folders, never a backslash")
    if any(unicodedata.category(ch).startswith("C") for ch in raw):
        raise _refuse(raw, "control or invisible characters are not allowed")
    text = unicodedata.normalize("NFC", raw)
    if text.startswith("/"):
        raise _refuse(raw, f"use a relative path such as {USER_MEMORY}/notes.md")
    if text.startswith("~"):
        raise _refuse(raw, f"the note stores are not in the home folder; write {USER_MEMORY}/…")
    parts = text.split("/")
    if ".." in parts:
        raise _refuse(raw, "'..' is not allowed")
    kept = [p for p in parts if p != "."]
    if "" in kept[:-1] or (kept and kept[-1] == "" and len(kept) == 1):
        raise _refuse(raw, "empty folder name ('//')")
    return kept


def _check_name(raw: str, name: str) -> None:
    if name != name.strip():
        raise _refuse(raw, "names may not start or end with a space")
    if name.startswith("."):
        raise _refuse(raw, "names may not start with a dot")
    if len(name) > MAX_SEGMENT_CHARS:
        raise _refuse(raw, f"a name is longer than {MAX_SEGMENT_CHARS} characters")
    # Compatibility forms (fullwidth dots and slashes) must not turn into path syntax in
    # any tool that folds them later.
    folded = unicodedata.normalize("NFKC", name)
    if folded.startswith(".") or "/" in folded or "\\" in folded:
        raise _refuse(raw, "names may not contain characters that read as '.', '/' or '\\'")


def _split_store(raw: str, parts: list[str]) -> tuple[NoteStoreName, list[str]]:
    head = parts[0] if parts else ""
    for store in STORES:
        if head == store:
            return store, parts[1:]
    raise _refuse(raw, f"notes live under {USER_MEMORY}/ or {SHARED_MEMORY}/")


def store_of(raw: str) -> NoteStoreName | None:
    """Which virtual store a path points into (first real segment), without validating.

    For the file tools' router: a path that names a store goes to `parse_note_path` /
    `parse_note_folder` and is refused there if malformed; it never falls through to a
    folder on disk.
    """
    if not isinstance(raw, str):
        return None
    for part in unicodedata.normalize("NFC", raw.replace("\\", "/")).split("/"):
        if part in ("", "."):
            continue
        for store in STORES:
            if part == store:
                return store
        return None
    return None


def parse_note_path(raw: str) -> NotePath:
    """`user-memory/people/ada.md` -> NotePath("user-memory", "people/ada.md")."""
    parts = _segments(raw)
    store, rest = _split_store(raw, parts)
    if not rest or rest == [""]:
        raise _refuse(raw, f"that is the whole store; name a note such as {store}/{INDEX_NOTE}")
    if rest[-1] == "":
        raise _refuse(raw, "that is a folder; a note is a .md file")
    if len(rest) > MAX_DEPTH:
        raise _refuse(raw, f"more than {MAX_DEPTH} levels deep")
    for name in rest:
        _check_name(raw, name)
    for folder in rest[:-1]:
        if folder.lower().endswith(NOTE_SUFFIX):
            raise _refuse(raw, "a folder name may not end in .md")
    if not rest[-1].endswith(NOTE_SUFFIX) or rest[-1] == NOTE_SUFFIX:
        raise _refuse(raw, "notes are Markdown files whose names end in .md")
    rel = "/".join(rest)
    if len(rel) > MAX_NOTE_PATH_CHARS:
        raise _refuse(raw, f"longer than {MAX_NOTE_PATH_CHARS} characters after the store name")
    return NotePath(store, rel)


def parse_note_folder(raw: str) -> NoteFolder:
    """`user-memory`, `user-memory/` or `user-memory/people` -> a folder to list."""
    parts = _segments(raw)
    store, rest = _split_store(raw, parts)
    if rest and rest[-1] == "":
        rest = rest[:-1]
    if len(rest) >= MAX_DEPTH:
        raise _refuse(raw, f"more than {MAX_DEPTH} levels deep")
    for name in rest:
        _check_name(raw, name)
        if name.lower().endswith(NOTE_SUFFIX):
            raise _refuse(raw, "that is a note, not a folder")
    prefix = "".join(f"{name}/" for name in rest)
    if len(prefix) > MAX_NOTE_PATH_CHARS:
        raise _refuse(raw, f"longer than {MAX_NOTE_PATH_CHARS} characters after the store name")
    return NoteFolder(store, prefix)


def note_in(store: NoteStoreName, relative: str) -> NotePath:
    """Validate a store-relative path (e.g. from an API route) by the same rules."""
    if store not in STORES:
        raise InvalidInputError(f"unknown note store {store!r}")
    found = parse_note_path(f"{store}/{relative}")
    if found.store != store:  # cannot happen: '..' is refused; kept as a tripwire
        raise _refuse(relative, "leaves its store")
    return found


def index_of(store: NoteStoreName) -> NotePath:
    return NotePath(store, INDEX_NOTE)
