"""Setup: the household's instance settings (admin Settings page), the first-run wizard
and the Overview's "to finish setting up" list."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    from skald.permissions import Capability


skald_routes = lazy_routes("skald.features.setup.routes")


WEB = FeatureWeb(__file__, "setup")
WEB.page("/admin/settings", "AdminSettingsPage", capability="admin.system", order=155, icon="home")
WEB.page(
    "/welcome", "WelcomePage", capability="admin.system", order=160, icon="sparkle", full_only=True
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.permissions import ADMIN_SYSTEM

    return [ADMIN_SYSTEM]
