"""Inbox: approval requests and questions waiting for the member."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page
from skald.store.migrations import Feature
from skald.store.migrations.owner import INBOX

if TYPE_CHECKING:
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [INBOX] if schema == "owner" else []


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.inbox import routes as inbox

    return list(inbox.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/inbox", title="nav.inbox", capability="inbox", simple_ok=True, order=20)]


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.features.inbox.routes import INBOX_CAP

    return [INBOX_CAP]
