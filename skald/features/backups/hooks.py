"""Backups: the schedule and the monthly restore drill (a service), the Backups page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.plugins.specs import Page

if TYPE_CHECKING:
    from skald.core.runtime import Runtime
    from skald.permissions import Capability


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.backups import routes as backups

    return list(backups.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/admin/backups", title="nav.backups", capability="admin.system", order=150)]


@hookimpl
def skald_capabilities() -> list[Capability]:
    from skald.permissions import ADMIN_SYSTEM

    return [ADMIN_SYSTEM]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    from skald.features.backups.scheduler import scheduler_for

    return [ServiceSpec("backup-schedule", scheduler_for(runtime).run_forever, order=200)]
