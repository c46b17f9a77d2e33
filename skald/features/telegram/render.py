"""Model answers as Telegram messages: Markdown to Telegram's HTML, cut at its limit.

Rule: the text is split first (at most `LIMIT` characters a piece, at a paragraph,
line or word break when there is one), then each piece is rendered; a piece whose
HTML would pass the limit, or that Telegram refuses to parse, goes as plain text: the
member always gets the exact words.

Trap: Telegram counts UTF-16 code units, not Python characters; an emoji is two. The
split measures that way.
"""

from __future__ import annotations

import html
import re

__all__ = ["LIMIT", "split", "to_html", "utf16_len"]

LIMIT = 4096

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.S)
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)([^*\n]+?)\*(?!\w)|(?<![\w_])_(?!\s)([^_\n]+?)_(?!\w)")
_STRIKE = re.compile(r"~~(.+?)~~", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+)$", re.M)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def split(text: str, limit: int = LIMIT) -> list[str]:
    """Pieces of at most `limit` UTF-16 units, cut at the latest break that fits."""
    pieces: list[str] = []
    rest = text
    while utf16_len(rest) > limit:
        head = _fit(rest, limit)
        cut = max(head.rfind("\n\n"), head.rfind("\n"), head.rfind(" "))
        if cut <= len(head) // 2:
            cut = len(head)  # no break in the second half: cut the word
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def _fit(text: str, limit: int) -> str:
    """The longest prefix of at most `limit` UTF-16 units."""
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def to_html(text: str) -> str:
    """Markdown as Telegram's HTML subset (b, i, s, code, pre, a); the rest escaped."""
    stash: list[str] = []

    def keep(fragment: str) -> str:
        stash.append(fragment)
        return f"\x00{len(stash) - 1}\x00"

    out = _FENCE.sub(lambda m: keep(f"<pre>{html.escape(m.group(1).rstrip())}</pre>"), text)
    out = _CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), out)
    out = _LINK.sub(
        lambda m: keep(f'<a href="{html.escape(m.group(2))}">{html.escape(m.group(1))}</a>'), out
    )
    out = html.escape(out, quote=False)
    out = _HEADING.sub(r"<b>\1</b>", out)
    out = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", out)
    out = _STRIKE.sub(r"<s>\1</s>", out)
    out = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: stash[int(m.group(1))], out)
