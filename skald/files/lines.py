"""Lines as the file tools count them, and the texts the line tools answer with (pure).

Rule: lines are `read_file`'s: split on `\n` only, numbered from 1, a final newline does
not start another line, a `\r` before it belongs to the line ending (a CRLF file keeps
CRLF for the lines the tools add). The tools are in `skald.files.tools` (append_file,
insert_at_line, replace_lines, search_file, get_outline).

Trap: `str.splitlines` also splits on `\r`, form feeds and Unicode separators; the
numbers would then differ from `read_file`'s. Only `lines_of` splits here.
"""

from __future__ import annotations

from typing import Final

from skald.tools.args import plural as _plural
from skald.tools.args import text_lines

__all__ = [
    "is_crlf",
    "joined",
    "lines_of",
    "match_groups",
    "new_lines",
    "numbered",
    "stale_range",
]

LINE_CHARS: Final = 400  # a longer line is cut in what these texts show (as grep's)
STALE_SHOWN_LINES: Final = 60


def lines_of(text: str) -> tuple[list[str], bool]:
    """(lines without their `\\n`, whether the text ends with one); "" is no lines."""
    rows = text.split("\n")
    tail = rows.pop()
    return ([*rows, tail] if tail else rows), tail == ""


def joined(lines: list[str], final_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if final_newline and lines else "")


def new_lines(content: str, crlf: bool) -> list[str]:
    lines = [line.removesuffix("\r") for line in text_lines(content)]
    return [line + "\r" for line in lines] if crlf else lines


def is_crlf(lines: list[str]) -> bool:
    return bool(lines) and all(line.endswith("\r") for line in lines)


def numbered(first: int, lines: list[str]) -> str:
    rows = []
    for number, line in enumerate(lines, start=first):
        line = line.removesuffix("\r")
        if len(line) > LINE_CHARS:
            line = line[:LINE_CHARS] + " … (line cut)"
        rows.append(f"{number:6d}\t{line}")
    return "\n".join(rows)


def stale_range(path: str, start: int, now: list[str]) -> str:
    shown = now[:STALE_SHOWN_LINES]
    more = len(now) - len(shown)
    tail = f"\n(and {_plural(more, 'more line')})" if more else ""
    return (
        f"Nothing was replaced: lines {start}-{start + len(now) - 1} of {path} do not hold "
        "old_text (the file changed since it was read, or the range is off). They now "
        f"read:\n{numbered(start, shown)}{tail}\nUse these numbers and this text, or "
        "read the file again."
    )


def match_groups(lines: list[str], hits: list[int], around: int) -> list[str]:
    """The matching lines with `around` lines of context; overlapping ranges merge."""
    matched = set(hits)
    rows: list[str] = []
    last = 0
    for hit in hits:
        first, end = max(1, hit - around), min(len(lines), hit + around)
        if first <= last:
            first = last + 1
        elif rows:
            rows.append("--")
        for number in range(first, end + 1):
            line = lines[number - 1].removesuffix("\r")
            if len(line) > LINE_CHARS:
                line = line[:LINE_CHARS] + " … (line cut)"
            mark = ">" if number in matched else " "
            rows.append(f"{mark}{number:5d}\t{line}")
        last = max(last, end)
    return rows
