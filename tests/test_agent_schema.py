"""The minimal argument check against a tool's JSON schema."""

from __future__ import annotations

from typing import Any

from skald.agent.schema import validate_arguments

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "ratio": {"type": "number"},
        "recursive": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["r", "w"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "range": {
            "type": "object",
            "properties": {"start": {"type": "integer"}},
            "required": ["start"],
        },
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["path"],
}


def test_good_arguments_pass() -> None:
    args = {
        "path": "a",
        "limit": 3,
        "ratio": 0.5,
        "recursive": True,
        "mode": "r",
        "tags": ["x"],
        "range": {"start": 1},
        "maybe": None,
        "extra": "allowed unless additionalProperties is false",
    }
    assert validate_arguments(args, SCHEMA) == []
    assert validate_arguments({"path": "a", "limit": 3.0}, SCHEMA) == []  # integral float


def test_each_kind_of_slip_is_named() -> None:
    problems = validate_arguments(
        {"limit": True, "ratio": "1", "mode": "x", "tags": ["a", 2]}, SCHEMA
    )
    assert problems == [
        "missing required argument 'path'",
        "'limit' must be an integer, not boolean",
        "'ratio' must be a number, not string",
        "'mode' must be one of 'r', 'w'",
        "'tags[1]' must be a string, not number",
    ]
    assert validate_arguments({"path": "a", "range": {}}, SCHEMA) == [
        "missing required argument 'range.start'"
    ]
    assert validate_arguments({"path": 1, "maybe": 2}, SCHEMA) == [
        "'path' must be a string, not number",
        "'maybe' must be string or null, not number",
    ]


def test_closed_objects_and_non_objects() -> None:
    closed = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert validate_arguments({"a": 1, "b": 2}, closed) == ["unknown argument 'b'"]
    assert validate_arguments([1], closed) == ["the arguments must be a JSON object"]
    assert validate_arguments({}, {}) == []  # no schema, nothing to check
