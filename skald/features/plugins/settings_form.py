"""The settings form of a plugin, generated from its msgspec config struct.

Rule: each field of each config section the plugin declares becomes one input: text,
whole number, number, yes/no, or a choice (a `Literal`); its label is the field's
`msgspec.Meta(description=...)` when it has one, else its name. A field of any other
type is shown read-only (set it in config.toml). What is saved is checked with the same
struct before it is stored, so the plugin never reads a value its struct refuses.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import inspect as mi

from skald.errors import InvalidInputError


class Field(msgspec.Struct, frozen=True, kw_only=True):
    section: str
    name: str
    kind: str  # "text", "integer", "number", "boolean", "choice", "other"
    label: str
    default: Any = None
    choices: list[Any] = msgspec.field(default_factory=list)


def _kind(t: mi.Type) -> tuple[str, str, list[Any]]:
    label = ""
    if isinstance(t, mi.Metadata):
        label = str((t.extra_json_schema or {}).get("description", "")) or ""
        if not label and isinstance(t.extra, dict):
            label = str(t.extra.get("description", ""))
        t = t.type
    if isinstance(t, mi.StrType):
        return "text", label, []
    if isinstance(t, mi.BoolType):
        return "boolean", label, []
    if isinstance(t, mi.IntType):
        return "integer", label, []
    if isinstance(t, mi.FloatType):
        return "number", label, []
    if isinstance(t, mi.LiteralType):
        return "choice", label, list(t.values)
    return "other", label, []


def fields(sections: dict[str, type[msgspec.Struct]]) -> list[Field]:
    out = []
    for section, struct in sections.items():
        info = mi.type_info(struct)
        assert isinstance(info, mi.StructType)
        for f in info.fields:
            kind, label, choices = _kind(f.type)
            default = None if f.default is msgspec.NODEFAULT else msgspec.to_builtins(f.default)
            out.append(
                Field(
                    section=section,
                    name=f.name,
                    kind=kind,
                    label=label or f.name.replace("_", " "),
                    default=default,
                    choices=choices,
                )
            )
    return out


def check(sections: dict[str, type[msgspec.Struct]], values: dict[str, Any]) -> dict[str, Any]:
    """The values to store, each section checked by its struct (400 with the reason)."""
    out: dict[str, Any] = {}
    for section, given in values.items():
        struct = sections.get(section)
        if struct is None:
            raise InvalidInputError(f"the plugin has no settings section {section!r}")
        if not isinstance(given, dict):
            raise InvalidInputError(f"settings {section}: expected an object")
        try:
            checked = msgspec.convert(given, type=struct)
        except msgspec.ValidationError as exc:
            raise InvalidInputError(f"settings {section}: {exc}") from None
        out[section] = msgspec.to_builtins(checked)
    return out
