"""Setup: the household's instance settings (admin Settings page), the first-run wizard
and the Overview's "to finish setting up" list."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_routes = lazy.routes("skald.features.setup.routes")


WEB = FeatureWeb(__file__, "setup")
WEB.page("/admin/settings", "AdminSettingsPage", capability="admin.system", order=155, icon="home")
WEB.page(
    "/welcome", "WelcomePage", capability="admin.system", order=160, icon="sparkle", full_only=True
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.permissions:ADMIN_SYSTEM")
