"""Backups: the schedule and the monthly restore drill (a service), the Backups page."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.plugins.facade import Server


skald_routes = lazy.routes("skald.features.backups.routes")


WEB = FeatureWeb(__file__, "backups")
WEB.page("/admin/backups", "AdminBackupsPage", capability="admin.system", order=150, icon="archive")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.permissions:ADMIN_SYSTEM")


# The one backup scheduler (the service and the Backups page's buttons share it).
skald_server_state = lazy.built_with_server("skald.features.backups.scheduler:BackupScheduler")


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.backups.scheduler import BackupScheduler

    return [ServiceSpec("backup-schedule", server.state(BackupScheduler).run_forever, order=200)]
