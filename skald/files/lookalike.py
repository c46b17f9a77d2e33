"""Names that read as something they are not (issue 20 item 11): the part of
`router.checked_name` beyond control and format characters.

Rules, each refused with a 400 that names the character:
- **Invisible characters**: line and paragraph separators (Zl, Zp: U+2028, U+2029),
  Unicode's default-ignorable code points (DerivedCoreProperties.txt
  `Default_Ignorable_Code_Point`, listed below from Unicode 15.1: U+034F combining
  grapheme joiner, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, variation
  selectors, tags...) and the braille blank U+2800, which renders as a space but is
  not one. Python's `unicodedata` has no such property, hence the list.
- **A look-alike of `.`, `/` or `\\`**: a punctuation or symbol character that Unicode's
  confusables data (UTS #39) maps to one of them ("report\u2024pdf" reads as report.pdf,
  "a\u2215b" as a/b). Letters and digits are left to the next rule.
- **A word mixing scripts with look-alike letters** ("p\u0430ypal.pdf": Latin with a
  Cyrillic а): a run of letters and digits whose scripts are not one of the combinations
  UTS #39 calls highly restrictive (Latin with Han, Hiragana, Katakana; with Han and
  Bopomofo; with Han and Hangul), and where a letter of one script is in the
  confusables data as a look-alike of a letter of another script of that word.
  Words are checked one by one: "Отчёт report.pdf" (a Cyrillic word, a Latin word) is fine.

The data is the `confusable_homoglyphs` package (confusables.txt and Scripts.txt, as
JSON): kept up to date by its authors, not a hand list here.

Traps:
- A name that is all one script but looks like a word of another ("сосо", all
  Cyrillic) is not caught: UTS #39's whole-script confusables would refuse real words.
- ASCII names never reach the tables (the fast path): every path and every listed
  entry comes through here. Nor do names whose other characters are all letters of
  Latin-1 and Latin Extended-A (U+00C0-U+017F without the signs U+00D7, U+00F7):
  "Perché.pdf", "Łódź.txt". Each such letter is of the Latin script (so no word mixes
  scripts), none is punctuation, a symbol or a space (so none is a look-alike of a
  separator), none is invisible; tests/test_files_router.py checks every one of them
  against the tables.
- The tables (about 6 MiB once parsed, and a tenth of the start's import time) are
  loaded at the first name that needs them, not at import (`_tables`). That load takes
  0.1-0.7 s: a caller on the event loop awaits `ready_for(name)` before its synchronous
  check, so the first emoji or Cyrillic name loads them in a thread, not on the loop.
- Emoji with a variation selector (U+FE0F) are refused like the joiner U+200D already was.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import re
import unicodedata
from types import ModuleType
from typing import Final

__all__ = ["look_alike_reason"]

# DerivedCoreProperties.txt (Unicode 15.1), Default_Ignorable_Code_Point.
_DEFAULT_IGNORABLE: Final = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
_BLANK: Final = "\u2800"  # BRAILLE PATTERN BLANK: shown as a space
_SEPARATORS: Final = frozenset("./\\")
_HIGHLY_RESTRICTIVE: Final = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
_NO_SCRIPT: Final = frozenset({"COMMON", "INHERITED"})
_WORD = re.compile(r"\w+")


def _char_class(points: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in points)


def _separator_look_alikes(confusables: ModuleType) -> dict[str, str]:
    """Punctuation and symbols the confusables data maps to `.`, `/` or `\\`."""
    found: dict[str, str] = {}
    for ch, glyphs in confusables.confusables_data.items():
        if len(ch) != 1 or ch in _SEPARATORS or unicodedata.category(ch)[0] not in "PSZ":
            continue
        like = [g["c"] for g in glyphs if g["c"] in _SEPARATORS]
        if like:
            found[ch] = like[0]
    return found


_INVISIBLE = re.compile(f"[{_char_class(list(_DEFAULT_IGNORABLE))}{_BLANK}\\u2028\\u2029]")
# ASCII and the letters of Latin-1 and Latin Extended-A: nothing here needs the tables.
_PLAIN_LATIN = re.compile("[\\x00-\\x7f\\u00c0-\\u00d6\\u00d8-\\u00f6\\u00f8-\\u017f]*")


class _Tables:
    """The confusables data and what is built from it: once, at the first name that
    needs them (each name is then one regular-expression search)."""

    def __init__(self) -> None:
        from confusable_homoglyphs import categories, confusables

        self.categories = categories
        self.confusables = confusables
        self.looks_like: Final = _separator_look_alikes(confusables)
        self.look_alike = re.compile("[" + "".join(re.escape(ch) for ch in self.looks_like) + "]")


@functools.cache
def _tables() -> _Tables:
    return _Tables()


def _needs_tables(name: str) -> bool:
    return not (name.isascii() or _PLAIN_LATIN.fullmatch(name))


async def ready_for(name: object) -> None:
    """Load the tables in a thread when `name` is the first name to need them (no-op
    otherwise): the synchronous check that follows then never loads them on the loop."""
    if isinstance(name, str) and _tables.cache_info().currsize == 0 and _needs_tables(name):
        await asyncio.to_thread(_tables)


@functools.lru_cache(maxsize=8192)
def _script(ch: str) -> str:
    return "LATIN" if ch.isascii() and ch.isalpha() else str(_tables().categories.alias(ch))


def _mixed_confusable(word: str) -> str | None:
    """A character of `word` that looks like a letter of the word's main script."""
    scripts = {_script(ch) for ch in word} - _NO_SCRIPT
    if len(scripts) < 2 or any(scripts <= allowed for allowed in _HIGHLY_RESTRICTIVE):
        return None
    counts = collections.Counter(_script(ch) for ch in word)
    for script in sorted(scripts, key=lambda s: -counts[s]):  # the main script first
        found = _tables().confusables.is_confusable(word, preferred_aliases=[script])
        if found:
            return str(found[0]["character"])
    return None


def _named(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}"


def look_alike_reason(name: str) -> str | None:
    """Why `name` (NFC) reads as something it is not, or None."""
    if not _needs_tables(name):
        return None
    return _reason_from_tables(name)


def _reason_from_tables(name: str) -> str | None:
    hit = _INVISIBLE.search(name)
    if hit is not None:
        return f"{_named(hit.group())} is invisible or a line break"
    tables = _tables()
    hit = tables.look_alike.search(name)
    if hit is not None:
        return f"{_named(hit.group())} looks like {tables.looks_like[hit.group()]!r} but is not"
    if len({_script(ch) for ch in name} - _NO_SCRIPT) < 2:
        return None  # one script in the whole name: no word can mix two
    for word in _WORD.findall(name):
        if word.isascii():
            continue  # Latin letters and digits only
        ch = _mixed_confusable(word)
        if ch is not None:
            return f"{word!r} mixes scripts: {_named(ch)} looks like a letter of another"
    return None
