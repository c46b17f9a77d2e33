"""Bad input, said in words: msgspec's validation messages as sentences a person can read.

Rule: every 400 a form can trigger reaches the page as a sentence naming the field and
what it needs ("Address must be a web address such as http://192.168.1.10:8080/v1."),
never a regular expression or a type name (`str`, `int`, `object`): the web UI shows
these messages as they come. `sentence(key, message)` knows msgspec's message shapes;
anything else becomes "<field> has a value that is not allowed."

Trap: msgspec's wording is not an API. A shape it changes falls to the generic
sentence (still no regex), and tests/test_invalid_input.py walks every form route with
bad values, so a new shape that leaks shows up there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

_KINDS: Final = {
    "str": "text",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "array": "a list",
    "object": "a group of fields",
    "null": "empty",
}
_FORMS: Final = {"url": "a web address such as http://192.168.1.10:8080/v1"}
_UNIT: Final = {"str": "characters", "array": "items", "object": "fields"}
_COMPARE: Final = {">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}


def _field(key: str) -> str:
    """`base_url` -> `Base url`; the whole body (`data`, no key) -> `The request`."""
    if key in ("", "data", "body"):
        return "The request"
    words = re.sub(r"[_.]+", " ", re.sub(r"\[\d+\]", "", key)).strip()
    return (words[:1].upper() + words[1:]) if words else "The request"


def _kinds(spec: str) -> str:
    names = [_KINDS.get(k.strip(), "another kind of value") for k in spec.split("|")]
    return " or ".join(dict.fromkeys(names))


def _pattern(field: str, key: str, m: re.Match[str]) -> str:
    form = next((v for k, v in _FORMS.items() if k in key.lower()), None)
    return f"{field} must be {form}." if form else f"{field} is not in the expected form."


def _length(field: str, key: str, m: re.Match[str]) -> str:
    kind, op, n = m["kind"], m["op"], int(m["n"])
    if op == ">=" and n == 1:
        return f"{field} must not be empty."
    return f"{field} must have {_COMPARE[op]} {n} {_UNIT.get(kind, 'items')}."


def _bound(field: str, key: str, m: re.Match[str]) -> str:
    return f"{field} must be {_COMPARE[m['op']]} {m['n']}."


def _wrong_kind(field: str, key: str, m: re.Match[str]) -> str:
    return f"{field} must be {_kinds(m['want'])}."


def _choice(field: str, key: str, m: re.Match[str]) -> str:
    return f"{field} is not one of the choices offered."


def _unknown(field: str, key: str, m: re.Match[str]) -> str:
    return f"{_field(m['name'])} is not a field of this form."


def _missing(field: str, key: str, m: re.Match[str]) -> str:
    return f"{_field(m['name'])} is missing."


Render = Callable[[str, str, re.Match[str]], str]
_SHAPES: Final[tuple[tuple[re.Pattern[str], Render], ...]] = (
    (re.compile(r"^Expected `[^`]*` matching regex"), _pattern),
    (re.compile(r"^Expected `(?P<kind>\w+)` of length (?P<op>[<>]=?) (?P<n>\d+)"), _length),
    (re.compile(r"^Expected `(?:int|float)` (?P<op>[<>]=?) (?P<n>-?[\d.]+)"), _bound),
    (re.compile(r"^Expected `(?P<want>[^`]*)`(?:, got `[^`]*`)?$"), _wrong_kind),
    (re.compile(r"^Invalid enum value"), _choice),
    (re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`"), _unknown),
    (re.compile(r"^Object missing required field `(?P<name>[^`]*)`"), _missing),
)


def sentence(key: str, message: str) -> str:
    """One validation failure (`key`: the field, `message`: msgspec's text) in words."""
    # msgspec appends where the value sits (`- at `$.a[0]``); the key already says it.
    text = re.sub(r"\s+- at `[^`]*`$", "", message.strip())
    field = _field(key)
    for shape, render in _SHAPES:
        m = shape.search(text)
        if m is not None:
            return render(field, key, m)
    if text.startswith("JSON is malformed"):
        return "The request is not valid JSON."
    return f"{field} has a value that is not allowed."
