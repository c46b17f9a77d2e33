"""Inbox: approval requests and questions waiting for the member."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes
from skald.store.migrations import Feature
from skald.store.migrations.owner import INBOX

if TYPE_CHECKING:
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [INBOX] if schema == "owner" else []


skald_routes = lazy_routes("skald.features.inbox.routes")


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


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.features.inbox.routes import INBOX_CAP

    return [INBOX_CAP]
