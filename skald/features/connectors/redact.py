"""Known secret values out of every text a connector produced (issue 32, item 2).

Rule: what a connector prints (stderr), says (log notifications, errors, tool results)
or makes us say (a protocol error's excerpt of its output) may hold the member's stored
secrets; each such text goes through `redact` with the secret values the instance was
launched with before it is stored, shown, logged or handed to the model.

Traps, each seen in a test:
- A secret reaches us spelled as the connector's output was quoted: JSON-escaped inside
  a log record's object (`pa\\"ss`), `repr`-escaped in a protocol error's excerpt
  (`pa\\\\ss`). Every spelling is redacted.
- Texts are cut (an 80-character excerpt, 2000-character stderr lines, 4000-character
  log records) before we see them: a cut can leave the head of a secret. A piece of a
  secret from its first `PIECE` characters on is redacted wherever it stops; shorter
  secrets only as a whole. Values under `MIN_SECRET` characters are not redacted (they
  would blank ordinary words).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

MASK = "***"
MIN_SECRET = 4
PIECE = 8


def spellings(value: str) -> set[str]:
    """The value as it may appear in a text: itself, JSON-escaped, repr-escaped."""
    return {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
    }


def redact(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        if len(value) < MIN_SECRET:
            continue
        for form in sorted(spellings(value), key=len, reverse=True):
            text = _redact_form(text, form)
    return text


def _redact_form(text: str, form: str) -> str:
    head = form[:PIECE]
    out: list[str] = []
    start = 0
    while (found := text.find(head, start)) >= 0:
        end = found + len(head)
        # As far as the text keeps spelling the secret: all of it, or a cut-off head.
        while end - found < len(form) and end < len(text) and text[end] == form[end - found]:
            end += 1
        out += [text[start:found], MASK]
        start = end
    out.append(text[start:])
    return "".join(out)
