"""The diff a write tool shows the person deciding on it (the tool contract's `preview`).

Each write tool reads its own old text (the note tools through the note stores, the file
tools through the member's path router, so the diff shows the very file the call would
change) and hands it here with the call's arguments. Best effort: anything unusual (a
binary or huge file, an `old_text` that is not there) gives no preview, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_PREVIEW_CHARS", "MAX_READ_BYTES", "edit_preview", "unified_diff", "write_preview"]

MAX_READ_BYTES: Final = 1_000_000  # a file larger than this gets no preview
MAX_PREVIEW_CHARS: Final = 20_000


def unified_diff(path: str, old: str, new: str) -> str:
    """`old` -> `new` as a unified diff naming `path`, cut at `MAX_PREVIEW_CHARS`."""
    import difflib  # at the first preview: every server imports this module, few diff

    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), path, path
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return text[:MAX_PREVIEW_CHARS]


def write_preview(path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
    """The diff of `write_file` (the whole new `content`); `old` None: unreadable."""
    content = args.get("content")
    if old is None or not isinstance(content, str):
        return None
    return unified_diff(path, old, content)


def edit_preview(path: str, old: str | None, args: Mapping[str, Any]) -> str | None:
    """The diff of `edit_file` (`old_text` -> `new_text`, once or `replace_all`)."""
    before, after = args.get("old_text"), args.get("new_text")
    if old is None or not isinstance(before, str) or not isinstance(after, str) or not before:
        return None
    count = old.count(before)
    replace_all = args.get("replace_all") is True
    if count == 0 or (count > 1 and not replace_all):
        return None
    new = old.replace(before, after) if replace_all else old.replace(before, after, 1)
    return unified_diff(path, old, new)
