"""Capabilities and the one function that decides them.

Rule: a capability is a `Capability` value declared (with `declare`) by the module that
enforces it, and every decision — route guards, the member's tool set, services, the CLI —
goes through `can(role, capability)`. The registry's `capabilities` table only mirrors
the declared set so roles can be edited; it never grants by itself.

Trap: a capability that is seeded and shown in the Roles page but that no code checks is a
silent hole (`sandbox.exec` was one). A test walks `declared()` and proves each one guards
something; do not declare a capability without the check that enforces it.
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class Capability(msgspec.Struct, frozen=True):
    """A permission a role can hold, e.g. `sandbox.exec`."""

    name: str
    description: str


class CapabilityHolder(Protocol):
    """Anything that lists the capabilities it holds (a `Role` row)."""

    @property
    def capabilities(self) -> list[str]: ...


_DECLARED: dict[str, Capability] = {}


def declare(name: str, description: str) -> Capability:
    """Declare a capability once; declaring the same name differently is a programming error."""
    cap = Capability(name=name, description=description)
    known = _DECLARED.setdefault(name, cap)
    if known != cap:
        raise ValueError(f"capability {name!r} declared twice with different descriptions")
    return known


def declared() -> list[Capability]:
    """Every declared capability, by name."""
    return sorted(_DECLARED.values(), key=lambda c: c.name)


def can(holder: CapabilityHolder, capability: Capability) -> bool:
    """The one permission check: does this role hold `capability`? Deny by default."""
    return capability.name in _DECLARED and capability.name in holder.capabilities
