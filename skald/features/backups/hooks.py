"""Backups: the schedule and the monthly restore drill (a service), the Backups page."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    from skald.permissions import Capability
    from skald.plugins.facade import Server


skald_routes = lazy_routes("skald.features.backups.routes")


WEB = FeatureWeb(__file__, "backups")
WEB.page("/admin/backups", "AdminBackupsPage", capability="admin.system", order=150, icon="archive")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_capabilities() -> list[Capability]:
    from skald.permissions import ADMIN_SYSTEM

    return [ADMIN_SYSTEM]


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    # The one backup scheduler (the service and the Backups page's buttons share it).
    from skald.features.backups.scheduler import BackupScheduler

    return [BackupScheduler(server)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.backups.scheduler import BackupScheduler

    return [ServiceSpec("backup-schedule", server.state(BackupScheduler).run_forever, order=200)]
