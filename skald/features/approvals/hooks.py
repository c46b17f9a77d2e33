"""Approvals: rules and security groups (admin), and each conversation's group."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_migrations = lazy.migrations(
    registry=("skald.store.migrations.registry:APPROVALS",),
    owner=("skald.store.migrations.owner:CONVERSATION_GROUPS",),
)


skald_routes = lazy.routes("skald.features.approvals.routes")


WEB = FeatureWeb(__file__, "approvals")
WEB.page("/admin/approvals", "AdminApprovalsPage", capability="admin.roles", order=130, icon="list")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
