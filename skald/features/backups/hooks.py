"""Backups: the schedule and the monthly restore drill (a service), the Backups page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.plugins.specs import Page, WebFiles, feature_folder

if TYPE_CHECKING:
    from skald.core.runtime import Runtime
    from skald.permissions import Capability


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.backups import routes as backups

    return list(backups.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/admin/backups",
            title="nav.backups",
            capability="admin.system",
            order=150,
            module="plugins/backups/admin-backups.js",
            component="AdminBackupsPage",
            icon="archive",
            testid="nav-admin-backups",
            say_not_allowed=True,
        )
    ]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    # The page modules in backups/web/ and the translations in backups/i18n/ beside this module.
    return [WebFiles("backups", feature_folder(__file__, "backups"))]


@hookimpl
def skald_capabilities() -> list[Capability]:
    from skald.permissions import ADMIN_SYSTEM

    return [ADMIN_SYSTEM]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    from skald.features.backups.scheduler import scheduler_for

    return [ServiceSpec("backup-schedule", scheduler_for(runtime).run_forever, order=200)]
