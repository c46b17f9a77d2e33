"""The request log: a member's own model requests (metadata), a detail page, and the
administrators' counts per provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page, WebFiles, feature_folder

if TYPE_CHECKING:
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.requestlog.store import SCHEMA

    return [SCHEMA] if schema == "registry" else []


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.requestlog.routes import ROUTES

    return list(ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/requests",
            title="nav.requests",
            order=36,
            module="plugins/requestlog/requests.js",
            component="RequestsPage",
            icon="list",
            testid="nav-requests",
            full_only=True,
            say_not_allowed=True,
            sub="requestId",
        )
    ]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    return [WebFiles("requestlog", feature_folder(__file__, "requestlog"))]
