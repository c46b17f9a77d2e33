"""Plugins an administrator manages: the Plugins page, its routes and its tables
(`skald/features/plugins/`)."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_migrations = lazy.migrations(
    registry=("skald.store.plugins:REGISTRY_FEATURE",),
    owner=("skald.store.plugins:OWNER_FEATURE",),
)


skald_capabilities = lazy.capabilities("skald.plugins.switches:PLUGIN_MANAGE")


skald_routes = lazy.routes("skald.features.plugins.routes")


WEB = FeatureWeb(__file__, "plugins")
WEB.page("/admin/plugins", "PluginsPage", capability="plugin.manage", order=137, icon="tool")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
