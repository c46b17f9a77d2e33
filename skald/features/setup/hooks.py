"""Setup: the household's instance settings (admin Settings page), the first-run wizard
and the Overview's "to finish setting up" list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page

if TYPE_CHECKING:
    from skald.permissions import Capability


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.setup import routes as setup

    return list(setup.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(path="/admin/settings", title="nav.settings", capability="admin.system", order=155),
        Page(path="/welcome", title="nav.welcome", capability="admin.system", order=160),
    ]


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.permissions import ADMIN_SYSTEM

    return [ADMIN_SYSTEM]
