"""Capabilities and the one function that decides them.

Rule: a capability is a `Capability` value declared (with `declare`) by the module that
enforces it, and every decision — route guards, the member's tool set, services, the CLI —
goes through `can(role, capability)`. The registry's `capabilities` table mirrors the
declared set (upserted at every start by `Runtime`) so roles can be edited and keep their
foreign keys; it never grants by itself: a name that no code declares grants nothing.

A capability for a feature that is not built yet is declared here with `reserved_for`
(the issue that will enforce it). Its row stays, so an administrator's role edits survive
until the feature lands; the Roles page labels it, and the catalogue test
(`tests/test_capabilities.py`) accepts it as unchecked only while it carries that mark.

Trap: a capability that is seeded and shown in the Roles page but that no code checks is a
silent hole (`sandbox.exec` was one). The catalogue test walks `declared()` and proves
each unreserved one guards something (a route, a tool, a page) and that a role without
it is refused there; do not declare a capability without the check that enforces it.
Trap: `declared()` holds what has been imported. The server imports every route module
before it boots, so the start-up sync sees the full set; code that syncs from a partial
import must only ever add rows (the sync never deletes).
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class Capability(msgspec.Struct, frozen=True, kw_only=True):
    """A permission a role can hold, e.g. `sandbox.exec`."""

    name: str
    description: str
    # The feature (issue) that will enforce it; None once something checks it.
    reserved_for: str | None = None


class CapabilityHolder(Protocol):
    """Anything that lists the capabilities it holds (a `Role` row)."""

    @property
    def capabilities(self) -> list[str]: ...


_DECLARED: dict[str, Capability] = {}


def declare(name: str, description: str, *, reserved_for: str | None = None) -> Capability:
    """Declare a capability once; declaring the same name differently is a programming error."""
    cap = Capability(name=name, description=description, reserved_for=reserved_for)
    known = _DECLARED.setdefault(name, cap)
    if known != cap:
        raise ValueError(f"capability {name!r} declared twice with different descriptions")
    return known


def declared() -> list[Capability]:
    """Every declared capability, by name."""
    return sorted(_DECLARED.values(), key=lambda c: c.name)


def named(name: str) -> Capability | None:
    """The declared capability called `name` (for data that names one, e.g. a page)."""
    return _DECLARED.get(name)


def can(holder: CapabilityHolder, capability: Capability) -> bool:
    """The one permission check: does this role hold `capability`? Deny by default.

    A reserved capability grants nothing yet, whatever the role says: the feature that
    will check it does not exist, so nothing may act on it by accident meanwhile.
    """
    return (
        _DECLARED.get(capability.name) == capability
        and capability.reserved_for is None
        and capability.name in holder.capabilities
    )


# -- shared: checked by more than one feature (each feature imports them from here) ------

CHAT = declare("chat", "Talk to the assistant")
ADMIN_ROLES = declare("admin.roles", "Manage roles and their capabilities")


# -- reserved: kept in the catalogue for the features that will enforce them -------------

# Enforced by the Telegram bridge (each message) and its pairing routes
# (skald/features/telegram/).
TELEGRAM_USE = declare("telegram.use", "Chat through Telegram")
# Enforced by the instance settings and setup routes (skald/features/setup/routes.py) and the
# Backups page's routes (skald/features/backups/routes.py).
ADMIN_SYSTEM = declare("admin.system", "Instance settings, backups and diagnostics")
