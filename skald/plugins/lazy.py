"""Hooks a built-in feature binds rather than writes: each answers objects its hooks
module names as text, `"module:NAME"` (an entry point's syntax), imported when the hook
is called.

Rule: where a hook's whole answer is what it names, the hooks module binds it
(`skald_routes = lazy.routes("skald.features.files.routes")`); pluggy registers a
module's attributes by name, as for `FeatureWeb`'s two hooks. A hook with a check or a
choice of its own stays a function. Plugins write their hooks as functions.

Trap: nothing named is imported when the hooks module is, so a start that builds no app
(the CLI, `skald.lean`) stays cold; the price is that a misspelt name fails at the
hook's first call (every start), not at import, and mypy cannot see it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl

if TYPE_CHECKING:
    import msgspec

    from skald.permissions import Capability
    from skald.plugins.facade import Server
    from skald.store.migrations import Feature


def imported(ref: str) -> Any:
    """The object `ref` names, `"module:NAME"`, its module imported now."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def routes(*modules: str) -> Callable[[], list[Any]]:
    """`skald_routes`: the `ROUTES` of each named module, in order (imported at app
    creation)."""

    @hookimpl
    def skald_routes() -> list[Any]:
        return [route for name in modules for route in importlib.import_module(name).ROUTES]

    return skald_routes


def capabilities(*refs: str) -> Callable[[], list[Capability]]:
    """`skald_capabilities`: each capability named, in order. Name the module that
    enforces it: importing that module declares it (`permissions.declare`)."""

    @hookimpl
    def skald_capabilities() -> list[Capability]:
        return [imported(ref) for ref in refs]

    return skald_capabilities


def migrations(
    *, registry: tuple[str, ...] = (), owner: tuple[str, ...] = ()
) -> Callable[[str], list[Feature]]:
    """`skald_migrations`: the `Feature`s named for each schema; a schema the feature
    has no tables in is left out (and any other schema gets none)."""
    by_schema = {"registry": registry, "owner": owner}

    @hookimpl
    def skald_migrations(schema: str) -> list[Feature]:
        return [imported(ref) for ref in by_schema.get(schema, ())]

    return skald_migrations


def config_section(name: str, ref: str) -> Callable[[], dict[str, type[msgspec.Struct]]]:
    """`skald_config_sections`: the feature's one section `[name]`, validated by the
    struct named."""

    @hookimpl
    def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
        return {name: imported(ref)}

    return skald_config_sections


def built_with_server(*refs: str) -> Callable[[Server], list[Any]]:
    """A hook of the server (`skald_server_state`, `skald_system_agents`,
    `skald_authenticators`) answering one object of each class named, built with the
    server alone: `Bridge(server)`."""

    @hookimpl
    def built(server: Server) -> list[Any]:
        return [imported(ref)(server) for ref in refs]

    return built
