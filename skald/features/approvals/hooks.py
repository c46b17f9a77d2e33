"""Approvals: rules and security groups (admin), and each conversation's group."""

from __future__ import annotations

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes
from skald.store.migrations import Feature
from skald.store.migrations.owner import CONVERSATION_GROUPS
from skald.store.migrations.registry import APPROVALS


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [APPROVALS] if schema == "registry" else [CONVERSATION_GROUPS]


skald_routes = lazy_routes("skald.features.approvals.routes")


WEB = FeatureWeb(__file__, "approvals")
WEB.page("/admin/approvals", "AdminApprovalsPage", capability="admin.roles", order=130, icon="list")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
