"""Inbox: approval requests and questions waiting for the member."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_migrations = lazy.migrations(owner=("skald.store.migrations.owner:INBOX",))


skald_routes = lazy.routes("skald.features.inbox.routes")


WEB = FeatureWeb(__file__, "inbox")
WEB.page(
    "/inbox",
    "InboxPage",
    capability="inbox",
    simple_ok=True,
    order=20,
    icon="inbox",
    badge=True,
    dock=True,
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.features.inbox.routes:INBOX_CAP")
