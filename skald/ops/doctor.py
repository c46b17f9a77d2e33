"""`skald doctor`: check this machine and this data directory, and say how to fix each problem.

Every check returns one `Finding`: ok, warn, fail or skip (does not apply here), a one-line
finding and, for warn and fail, the exact command that fixes it. A check that raises
becomes a fail line naming the error: the doctor itself never crashes. The exit code is 1
when any check fails, else 0 (warnings allowed).

Blocking work (subprocesses, Docker, SQLite, filesystem walks) runs in threads; the
checks run one after the other, in the order an operator would fix things.

The checks are in `skald.ops.checks_host` (this machine) and `skald.ops.checks_data`
(this data directory); what they share (`Context`, `Finding`) is `skald.ops.checks_base`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TextIO

import msgspec

from skald import __version__
from skald.ops.checks_base import Check, Context, Finding
from skald.ops.checks_data import (
    check_backups,
    check_config,
    check_data,
    check_disk,
    check_homes,
    check_member_databases,
    check_permissions,
    check_registry,
)
from skald.ops.checks_host import (
    check_docker,
    check_host_listeners,
    check_image,
    check_install,
    check_linger,
    check_port,
    check_python,
    check_sandbox_network,
    check_sandbox_trust,
    check_services,
    check_unit,
)

__all__ = ["Report", "run_checks", "run_doctor"]


class Report(msgspec.Struct, kw_only=True):
    ok: bool
    failures: int
    warnings: int
    checks: list[Finding]


# The integrity checks come before the permission check: opening a WAL database, even
# read-only, creates its -wal/-shm files (with the database's own mode), and the
# permission check should see them.
CHECKS: list[Check] = [
    check_python,
    check_config,
    check_install,
    check_data,
    check_registry,
    check_member_databases,
    check_permissions,
    check_homes,
    check_disk,
    check_docker,
    check_image,
    check_sandbox_network,
    check_sandbox_trust,
    check_host_listeners,
    check_unit,
    check_linger,
    check_port,
    check_services,
    check_backups,
]


async def run_checks(ctx: Context, checks: list[Check] | None = None) -> Report:
    findings: list[Finding] = []
    # The install's shape decides which checks apply and what the fixes say; asking
    # systemd is a subprocess, so it happens here, once, off the loop.
    await asyncio.to_thread(lambda: ctx.has_systemd)
    try:
        for check in checks or CHECKS:
            name = check.__name__.removeprefix("check_").replace("_", " ")
            try:
                findings.append(await check(ctx))
            except Exception as exc:  # a broken check is a finding, not a crash
                findings.append(
                    Finding(
                        name=name,
                        status="fail",
                        finding=f"the check itself failed: {type(exc).__name__}: {exc}",
                        fix="report this with the output of skald doctor",
                    )
                )
    finally:
        if ctx.docker_client is not None:
            with contextlib.suppress(Exception):
                ctx.docker_client.close()
            ctx.docker_client = None
    failures = sum(f.status == "fail" for f in findings)
    warnings = sum(f.status == "warn" for f in findings)
    return Report(ok=failures == 0, failures=failures, warnings=warnings, checks=findings)


def render(report: Report, out: TextIO) -> None:
    width = max((len(f.name) for f in report.checks), default=0)
    for f in report.checks:
        out.write(f"{f.status:<4}  {f.name:<{width}}  {f.finding}\n")
        if f.fix and f.status in ("warn", "fail"):
            out.write(f"{'':<4}  {'':<{width}}  fix: {f.fix}\n")
    summary = (
        f"{report.failures} failed, {report.warnings} warning(s)"
        if report.failures or report.warnings
        else "all checks passed"
    )
    out.write(f"\nskald {__version__}: {summary}\n")


async def run_doctor(ctx: Context, out: TextIO, *, as_json: bool = False) -> int:
    report = await run_checks(ctx)
    if as_json:
        out.write(msgspec.json.encode(report).decode() + "\n")
    else:
        render(report, out)
    return 0 if report.ok else 1
