"""A minimal JSON Schema check of tool arguments, enough to catch model slips.

Checked: the value types (`type`, also as a list), `required`, `enum`, `properties`
and `items` recursively, and `additionalProperties: false`. Everything else in a
schema is ignored (accepted). The messages go back to the model, so they name the
argument and say what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_PROBLEMS = 5
_MAX_DEPTH = 16

_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def validate_arguments(args: object, schema: Mapping[str, Any]) -> list[str]:
    """The problems found (empty when the arguments fit the schema)."""
    problems: list[str] = []
    if not isinstance(args, dict):
        return ["the arguments must be a JSON object"]
    _check(args, schema, "", problems, 0)
    return problems[:MAX_PROBLEMS]


def _check(value: object, schema: object, where: str, problems: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return
    expected = schema.get("type")
    if expected is not None and not _type_ok(value, expected):
        problems.append(f"{_name(where)} must be {_describe(expected)}, not {_json_type(value)}")
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        problems.append(f"{_name(where)} must be one of {', '.join(map(repr, enum))}")
    if isinstance(value, dict):
        _check_object(value, schema, where, problems, depth)
    elif isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            _check(item, items, f"{where}[{i}]", problems, depth + 1)


def _check_object(
    value: dict[str, Any], schema: Mapping[str, Any], where: str, problems: list[str], depth: int
) -> None:
    prefix = f"{where}." if where else ""
    required = schema.get("required")
    for key in required if isinstance(required, list) else []:
        if key not in value:
            problems.append(f"missing required argument '{prefix}{key}'")
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    for key, sub in props.items():
        if key in value:
            _check(value[key], sub, f"{prefix}{key}", problems, depth + 1)
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in props:
                problems.append(f"unknown argument '{prefix}{key}'")


def _type_ok(value: object, expected: object) -> bool:
    if isinstance(expected, list):
        return any(_type_ok(value, t) for t in expected)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    py = _PY_TYPES.get(expected) if isinstance(expected, str) else None
    return True if py is None else isinstance(value, py)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    for name, py in _PY_TYPES.items():
        if isinstance(value, py):
            return name
    return type(value).__name__


def _describe(expected: object) -> str:
    if isinstance(expected, list):
        return " or ".join(map(str, expected))
    return f"{'an' if str(expected)[:1] in 'aeiou' else 'a'} {expected}"


def _name(where: str) -> str:
    return f"'{where}'" if where else "the arguments"
