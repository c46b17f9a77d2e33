"""The privacy self-check page (`#/privacy`) and its route; `skald privacy` in the CLI."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page, WebFiles, feature_folder


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.privacy.routes import ROUTES

    return list(ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/privacy",
            title="nav.privacy",
            order=57,
            module="plugins/privacy/privacy.js",
            component="PrivacyPage",
            icon="shield",
            testid="nav-privacy",
            simple_ok=True,
            say_not_allowed=True,
        )
    ]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    return [WebFiles("privacy", feature_folder(__file__, "privacy"))]
