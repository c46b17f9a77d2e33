"""Third parties' identifiers out of a report before it is stored, and the check that
nothing got through.

Rule: two layers. `redact` replaces what has the shape of an e-mail address, a phone
number or a street address with a plain placeholder. `leaks` then looks, in the
redacted report, for every identifier the transcript itself contained, in the forms a
model rewrites them into: a phone's digits joined across any separators and words
("333 1 and then 234567"), an e-mail spelled out ("luca at example dot com"), an
address whatever its spacing or case. A report with a leak is not stored; the run
fails with the reason (fail closed). People's names are the prompt's job (the model
writes "a classmate", "an adult they met online"): a name has no shape to recognise.

Trap: the check searches every digit of the report joined together, so a report
quoting many numbers could in principle trip it by accident; that fails closed (no
report, a failed run that says why), which is the side to err on.
"""

from __future__ import annotations

import re

__all__ = ["Identifiers", "find_identifiers", "leaks", "redact"]

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# 7+ digits, optionally a leading +, with spaces, dots, dashes, slashes or brackets between.
PHONE = re.compile(r"(?<![\w])\+?\d(?:[\s().\-/]{0,3}\d){6,}(?![\w])")
_STREET = (
    r"(?i:street|st\.|road|rd\.|avenue|ave\.|lane|drive|way|boulevard|place|square|"
    r"via|viale|piazza|corso|vicolo|rue|chemin|allée|impasse)"
)
_NAME = r"[A-Z][\w'’-]+"
ADDRESS = re.compile(
    rf"\b\d{{1,5}},?\s+(?:{_NAME}\s+){{1,3}}{_STREET}\b"
    rf"|\b{_STREET}\s+(?:{_NAME}\s+){{0,3}}{_NAME},?\s*\d{{1,5}}\b"
)
# Dates and times have the shape of a phone's digits; they are not identifiers.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")
_SPELLED_AT = re.compile(r"\s*(?:\(at\)|\[at\]|\bat\b)\s*", re.IGNORECASE)
_SPELLED_DOT = re.compile(r"\s*(?:\(dot\)|\[dot\]|\bdot\b)\s*", re.IGNORECASE)

PLACEHOLDERS = {"email": "[e-mail address]", "phone": "[phone number]", "address": "[address]"}


class Identifiers:
    """The identifiers a transcript contains, normalised for the leak check."""

    def __init__(self, emails: set[str], phones: set[str], addresses: set[str]) -> None:
        self.emails = emails
        self.phones = phones
        self.addresses = addresses


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def find_identifiers(text: str) -> Identifiers:
    return Identifiers(
        emails={m.group(0).lower() for m in EMAIL.finditer(text)},
        phones={_digits(p) for p in _phones(text)},
        addresses={_squash(m.group(0)) for m in ADDRESS.finditer(text)},
    )


def redact(text: str) -> str:
    text = EMAIL.sub(PLACEHOLDERS["email"], text)
    text = ADDRESS.sub(PLACEHOLDERS["address"], text)
    return PHONE.sub(lambda m: m.group(0) if _is_date(m.group(0)) else PLACEHOLDERS["phone"], text)


def _is_date(text: str) -> bool:
    return _DATE.fullmatch(text.strip()) is not None


def _phones(text: str) -> list[str]:
    return [m.group(0) for m in PHONE.finditer(text) if not _is_date(m.group(0))]


def leaks(report: str, known: Identifiers) -> list[str]:
    """What kinds of identifier are still in `report` (empty: none). Shapes first, then
    each identifier of the transcript in any rewritten form."""
    found: list[str] = []
    if EMAIL.search(report):
        found.append("an e-mail address")
    if _phones(report):
        found.append("a phone number")
    if ADDRESS.search(report):
        found.append("an address")
    spelled = _SPELLED_DOT.sub(".", _SPELLED_AT.sub("@", report)).lower()
    if any(e in spelled or e in report.lower() for e in known.emails):
        found.append("an e-mail address from the conversations")
    digits = _digits(report)
    if any(p in digits for p in known.phones):
        found.append("a phone number from the conversations")
    squashed = _squash(report)
    if any(a in squashed for a in known.addresses):
        found.append("an address from the conversations")
    return list(dict.fromkeys(found))
