"""The privacy self-check page (`#/privacy`) and its route; `skald privacy` in the CLI."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_routes = lazy.routes("skald.features.privacy.routes")


WEB = FeatureWeb(__file__, "privacy")
WEB.page("/privacy", "PrivacyPage", order=57, icon="shield", simple_ok=True)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
