"""The Overview's health lines for administrators: the doctor's own checks of the disk,
Docker and the backups (with the last drill), each with what to do when it is not ok.

Rule: the same checks as `skald doctor` (skald/ops), run at view time, so the page and
the command never disagree. The service's own state comes from `GET /api/health`.
Trap: no check asks whether a newer Skald exists (that needs the network); the line
says so and names the command that updates, rather than claiming "up to date".
"""

from __future__ import annotations

import os

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.api.deps import requires
from skald.ops.checks_base import Context
from skald.ops.checks_data import check_backups, check_disk
from skald.ops.checks_host import check_docker
from skald.ops.doctor import run_checks
from skald.permissions import ADMIN_SYSTEM
from skald.plugins.facade import Server  # Litestar reads the route's annotations


class HealthLine(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # disk | docker | backups | update
    status: str  # ok | warn | fail | skip | unknown
    finding: str
    fix: str | None = None


@get("/api/dashboard/health", guards=[requires(ADMIN_SYSTEM)])
async def dashboard_health(server: NamedDependency[Server]) -> list[HealthLine]:
    ctx = Context.create(server.layout, server.config, dict(os.environ))
    ctx.serving = True
    report = await run_checks(ctx, [check_disk, check_docker, check_backups])
    lines = [
        HealthLine(name=f.name, status=f.status, finding=f.finding, fix=f.fix)
        for f in report.checks
    ]
    lines.append(
        HealthLine(
            name="update",
            status="unknown",
            finding="Skald does not look for new versions by itself (that would need the network).",
            fix=ctx.skald("update"),
        )
    )
    return lines
