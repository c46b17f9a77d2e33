"""The Overview's health lines for administrators: the doctor's own checks of the disk,
Docker and the backups (with the last drill), each with what to do when it is not ok.

Rule: the same checks as `skald doctor` (skald/ops), run at view time, so the page and
the command never disagree. The service's own state comes from `GET /api/health`.
The "update" line asks the release server the updater uses, through `UpdateCheck`
(updates.py: cached for hours, never from a source checkout); without it (a server
state left out) the line says it was not checked and names the command that updates.
"""

from __future__ import annotations

import os

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.api.deps import requires
from skald.features.usage.updates import UpdateCheck
from skald.permissions import ADMIN_SYSTEM
from skald.plugins.facade import Server  # Litestar reads the route's annotations


class HealthLine(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # disk | docker | backups | update
    status: str  # ok | warn | fail | skip | unknown
    finding: str
    fix: str | None = None


@get("/api/dashboard/health", guards=[requires(ADMIN_SYSTEM)])
async def dashboard_health(server: NamedDependency[Server]) -> list[HealthLine]:
    # The doctor's checks load at the first look, not in every server (docs/dev/web.md).
    from skald.ops.checks_base import Context
    from skald.ops.checks_data import check_backups, check_disk
    from skald.ops.checks_host import check_docker
    from skald.ops.doctor import run_checks

    ctx = Context.create(server.layout, server.config, dict(os.environ))
    ctx.serving = True
    report = await run_checks(ctx, [check_disk, check_docker, check_backups])
    lines = [
        HealthLine(name=f.name, status=f.status, finding=f.finding, fix=f.fix)
        for f in report.checks
    ]
    check = server.state(UpdateCheck, None)
    if check is None:
        lines.append(
            HealthLine(
                name="update",
                status="unknown",
                finding="Skald did not look for new versions.",
                fix=ctx.skald("update"),
            )
        )
        return lines
    update = await check.status()
    fix = ctx.skald("update") if update.status in ("warn", "unknown") else None
    lines.append(HealthLine(name="update", status=update.status, finding=update.finding, fix=fix))
    return lines
