"""The privacy self-check page (`#/privacy`) and its route; `skald privacy` in the CLI."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.privacy.routes import ROUTES

    return list(ROUTES)


WEB = FeatureWeb(__file__, "privacy")
WEB.page("/privacy", "PrivacyPage", order=57, icon="shield", simple_ok=True)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
