"""The style sheets parse as a whole: every `{` has its `}`.

A merge that drops one closing brace does not fail anything else: the browser reads
every rule after it as nested inside the unclosed one, and the pages after that point
(approval cards, message actions, search) lose their layout silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = sorted((Path(__file__).resolve().parents[1] / "web" / "css").glob("*.css"))
COMMENT_OR_STRING = re.compile(r"/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.S)


@pytest.mark.parametrize("sheet", CSS, ids=lambda p: p.name)
def test_every_brace_in_a_style_sheet_is_closed_where_it_should_be(sheet: Path) -> None:
    text = COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), sheet.read_text())
    open_at: list[tuple[int, bool]] = []  # (line, is an at-rule such as @media)
    for number, line in enumerate(text.split("\n"), start=1):
        # A rule that starts in column 0 is a top-level rule: nothing may still be open
        # then except at-rules around it (a dropped `}` is caught at the next rule, not
        # only at the end of the file).
        if line[:1] not in ("", " ", "}", "@") and not all(at for _, at in open_at):
            opened = next(n for n, at in reversed(open_at) if not at)
            raise AssertionError(f"{sheet.name}:{number}: the rule of line {opened} is not closed")
        for ch in line:
            if ch == "{":
                open_at.append((number, line.lstrip().startswith("@")))
            elif ch == "}":
                assert open_at, f"{sheet.name}:{number}: '}}' without its '{{'"
                open_at.pop()
    assert not open_at, (
        f"{sheet.name}: braces opened at lines {[n for n, _ in open_at]} never close"
    )
