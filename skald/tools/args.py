"""Reading a tool's arguments, and the small texts tool results share.

Models send all sorts: every helper turns a bad value into a `Refusal`, which the tools
report as an error result the model can correct, never as an exception that escapes.
"""

from __future__ import annotations

from typing import Any


class Refusal(Exception):
    """Bad input or a state the model must fix; becomes an error result."""


def text_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise Refusal(f"'{key}' must be text.")
    return value


def flag_arg(args: dict[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise Refusal(f"'{key}' must be true or false.")
    return value


def int_arg(args: dict[str, Any], key: str, default: int, low: int, high: int | None = None) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise Refusal(f"'{key}' must be a whole number.")
    number = int(value)
    if number < low or (high is not None and number > high):
        limit = f"at least {low}" if high is None else f"between {low} and {high}"
        raise Refusal(f"'{key}' must be {limit}.")
    return number


def plural(count: int, word: str) -> str:
    """Counts said as English's regular plurals: 1 match, 2 matches, 3 entries."""
    if count == 1:
        return f"{count} {word}"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return f"{count} {word}es"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{count} {word[:-1]}ies"
    return f"{count} {word}s"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def text_lines(content: str) -> list[str]:
    """Lines as an editor counts them: a final newline does not start another line."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
