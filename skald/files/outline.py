"""The outline `get_outline` gives: a source file's definitions, a Markdown file's headings.

Each entry has a depth, a kind, a name and the line range it spans (1-based, both ends
included, the numbers `read_file` shows), so the model can read or replace one section
without reading the whole file.

- Python goes through the standard library's own parser (`ast`): exact, and nothing to
  install. Trap: a file Python cannot parse gets no outline at all (a plain refusal
  naming the line), never a guess.
- Markdown: ATX headings (`#` … `######`) outside fenced code blocks; a section runs to
  the line before the next heading of the same or a higher level (or to the end).
  Setext headings (underlined) are rare in what members write and are not recognised.

Other languages are refused with the types that work. Pure: no I/O.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["OUTLINE_KINDS", "OutlineEntry", "OutlineRefused", "language_of", "outline"]

MAX_ENTRIES: Final = 500

_PYTHON: Final = (".py", ".pyi", ".pyw")
_MARKDOWN: Final = (".md", ".markdown", ".mdown", ".mkd")
OUTLINE_KINDS: Final = "Python (.py) and Markdown (.md)"


class OutlineRefused(Exception):
    """The file has no outline this module can give; the text says why."""


@dataclass(frozen=True)
class OutlineEntry:
    depth: int
    kind: str  # class, def, async def, heading
    name: str
    start: int
    end: int


def language_of(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(_PYTHON):
        return "Python"
    if lower.endswith(_MARKDOWN):
        return "Markdown"
    return None


def outline(name: str, text: str) -> tuple[str, list[OutlineEntry]]:
    """(language, entries) of the file called `name` holding `text`."""
    language = language_of(name)
    if language == "Python":
        return language, _python(text)
    if language == "Markdown":
        return language, _markdown(text)
    raise OutlineRefused(
        f"get_outline reads {OUTLINE_KINDS} files; use search_file or grep to find "
        "definitions in other files."
    )


def _python(text: str) -> list[OutlineEntry]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise OutlineRefused(
            f"Python cannot parse this file (line {exc.lineno}: {exc.msg}), so it has no "
            "outline; read_file shows it as it is."
        ) from None
    except ValueError as exc:  # a NUL byte
        raise OutlineRefused(f"Python cannot parse this file ({exc}).") from None
    entries: list[OutlineEntry] = []
    _walk_python(tree.body, 0, entries)
    return entries


def _walk_python(body: list[ast.stmt], depth: int, entries: list[OutlineEntry]) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            kind, name = "class", node.name
        elif isinstance(node, ast.AsyncFunctionDef):
            kind, name = "async def", f"{node.name}({_arguments(node.args)})"
        elif isinstance(node, ast.FunctionDef):
            kind, name = "def", f"{node.name}({_arguments(node.args)})"
        else:
            continue
        # A decorator belongs to its definition: the range starts there.
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        entries.append(OutlineEntry(depth, kind, name, first, node.end_lineno or node.lineno))
        _walk_python(node.body, depth + 1, entries)


def _arguments(args: ast.arguments) -> str:
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    if args.vararg:
        names.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        names.append("*")
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(f"**{args.kwarg.arg}")
    return ", ".join(names)


_HEADING: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE: Final = re.compile(r" {0,3}(`{3,}|~{3,})")


def _markdown(text: str) -> list[OutlineEntry]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    found: list[tuple[int, int, str]] = []  # (line, level, title)
    fence = ""
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        match = _HEADING.match(line)
        if match:
            found.append((number, len(match.group(1)), (match.group(2) or "").strip()))
    entries = []
    for i, (start, level, title) in enumerate(found):
        end = len(lines)
        for later, later_level, _ in found[i + 1 :]:
            if later_level <= level:
                end = later - 1
                break
        entries.append(OutlineEntry(level - 1, "#" * level, title or "(empty heading)", start, end))
    return entries
