"""What a write would change, as a unified diff, for the person deciding on it.

The old text is read the way the file tools read it: notes through the note stores
(`user-memory/…`, `shared-memory/…`), everything else through the member's path router,
so the diff shows the very file the call would change. Best effort: anything unusual
(a malformed path, a binary or huge file, an `old_text` that is not there) gives no preview.
"""

from __future__ import annotations

import asyncio
import difflib
from typing import Any, Final

from skald.errors import NotFoundError
from skald.files.router import PathRouter, Resolved
from skald.store.note_paths import SHARED_MEMORY, parse_note_path, store_of
from skald.store.owner import OwnerStore
from skald.store.shared_memory import SharedMemoryStore

__all__ = ["write_preview"]

MAX_READ_BYTES: Final = 1_000_000
MAX_PREVIEW_CHARS: Final = 20_000


async def _old_text(
    path: str, owner: OwnerStore, shared: SharedMemoryStore, router: PathRouter
) -> str | None:
    if store_of(path) is not None:
        note = parse_note_path(path)
        try:
            if note.store == SHARED_MEMORY:
                return await shared.note_get(note.path)
            return await owner.note_get(note.path)
        except NotFoundError:
            return ""
    found = await asyncio.to_thread(router.resolve, path)
    if not isinstance(found, Resolved):
        return None

    def read() -> str | None:
        if not found.path.exists():
            return ""
        if not found.path.is_file() or found.path.stat().st_size > MAX_READ_BYTES:
            return None
        try:
            return found.path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return None

    return await asyncio.to_thread(read)


def _new_text(tool: str, args: dict[str, Any], old: str) -> str | None:
    if tool == "write_file":
        content = args.get("content")
        return content if isinstance(content, str) else None
    before, after = args.get("old_text"), args.get("new_text")
    if not isinstance(before, str) or not isinstance(after, str) or not before:
        return None
    count = old.count(before)
    if count == 0 or (count > 1 and not args.get("replace_all")):
        return None
    return old.replace(before, after) if args.get("replace_all") else old.replace(before, after, 1)


async def write_preview(
    tool: str,
    args: dict[str, Any],
    *,
    owner: OwnerStore,
    shared: SharedMemoryStore,
    router: PathRouter,
) -> str | None:
    """A unified diff for `write_file` / `edit_file`; None for other tools or on doubt."""
    path = args.get("path")
    if tool not in ("write_file", "edit_file") or not isinstance(path, str):
        return None
    try:
        old = await _old_text(path, owner, shared, router)
    except Exception:  # a refused or malformed path: the call will say why
        return None
    if old is None:
        return None
    new = _new_text(tool, args, old)
    if new is None:
        return None
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), path, path
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text[:MAX_PREVIEW_CHARS]
