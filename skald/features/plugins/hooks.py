"""Plugins an administrator manages: the Plugins page, its routes and its tables
(`skald/features/plugins/`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    from skald.permissions import Capability
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.store.plugins import OWNER_FEATURE, REGISTRY_FEATURE

    return [REGISTRY_FEATURE] if schema == "registry" else [OWNER_FEATURE]


@hookimpl
def skald_capabilities() -> list[Capability]:
    from skald.plugins.switches import PLUGIN_MANAGE

    return [PLUGIN_MANAGE]


skald_routes = lazy_routes("skald.features.plugins.routes")


WEB = FeatureWeb(__file__, "plugins")
WEB.page("/admin/plugins", "PluginsPage", capability="plugin.manage", order=137, icon="tool")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
