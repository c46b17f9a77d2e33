"""`skald status`: is the service up, which version is installed and which one runs, who is
unlocked and which sandboxes exist.

With a server serving the data directory, the running details come from its ops API
(`GET /api/ops/status`, falling back to the public `/api/health`); without one, the
command still reports the service, the installed version, the accounts (read-only from
the registry) and this instance's containers (asked of Docker directly, if it answers).
It only reads; blocking work runs in threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TextIO

import msgspec

from skald.config import Config
from skald.errors import SkaldError
from skald.ops import install_root as ir
from skald.ops.channel import fetch_health, holder, is_serving, ops_request
from skald.paths import DataLayout

__all__ = ["StatusReport", "collect", "run_status"]

DOCKER_TIMEOUT_S = 3.0


class Service(msgspec.Struct, kw_only=True):
    installed: bool
    unit: str
    enabled: str | None = None  # systemctl's word, or None when no user manager answers
    active: str | None = None


class ServiceInfo(msgspec.Struct, kw_only=True):
    name: str
    state: str  # ok, degraded or stopped
    reason: str | None = None


class Running(msgspec.Struct, kw_only=True):
    version: str | None = None
    pid: int | None = None
    uptime_s: float | None = None
    url: str | None = None
    source: str = "ops"  # "ops" (the ops API) or "health" (the public health route)
    services: list[ServiceInfo] | None = None  # from the ops API only
    degraded: list[str] = msgspec.field(default_factory=list)  # why it is degraded, if it is


class UserInfo(msgspec.Struct, kw_only=True):
    username: str
    role: str | None = None
    active: bool | None = None
    encrypted: bool | None = None
    unlocked: bool | None = None


class ContainerInfo(msgspec.Struct, kw_only=True):
    name: str
    user: str | None = None
    state: str | None = None


class StatusReport(msgspec.Struct, kw_only=True):
    data_dir: str
    install_root: str | None
    service: Service
    installed_version: str | None
    running: Running | None
    users: list[UserInfo] | None
    containers: list[ContainerInfo] | None
    sandbox_enabled: bool = True
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def unlocked(self) -> int:
        return sum(bool(u.unlocked) for u in self.users or [])


def _service(environ: Mapping[str, str]) -> Service:
    from skald.ops.checks_host import unit_state

    path, exists, enabled, active = unit_state(environ)
    installed = exists or enabled not in (None, "not-found")
    return Service(installed=installed, unit=str(path), enabled=enabled, active=active)


def _registry_facts(
    layout: DataLayout,
) -> tuple[list[UserInfo] | None, str | None, dict[str, str]]:
    """Accounts, the instance id and user id -> username, read-only; (None, None, {})
    without a registry."""
    import json

    import apsw

    path = layout.system_db
    if not path.is_file():
        return None, None, {}
    conn = apsw.Connection(
        "file:" + str(path) + "?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        rows = conn.execute(
            "SELECT id, username, role, active, encrypted FROM users ORDER BY username"
        ).fetchall()
        users = [
            UserInfo(
                username=str(r[1]),
                role=str(r[2]),
                active=bool(r[3]),
                encrypted=bool(r[4]),
                unlocked=False,
            )
            for r in rows
        ]
        names = {str(r[0]): str(r[1]) for r in rows}
        row = conn.execute("SELECT value FROM config WHERE key='instance_id'").fetchone()
        instance = str(json.loads(row[0])) if row else None
    finally:
        conn.close()
    return users, instance, names


def _docker_containers(config: Config, instance: str, names: dict[str, str]) -> list[ContainerInfo]:
    from skald.sandbox.client import connect
    from skald.sandbox.manager import LABEL_INSTANCE, LABEL_USER

    client = connect(config.sandbox.docker_host, DOCKER_TIMEOUT_S)
    try:
        found = client.containers.list(all=True, filters={"label": f"{LABEL_INSTANCE}={instance}"})
        return sorted(
            (
                ContainerInfo(
                    name=str(c.name),
                    user=names.get(c.labels.get(LABEL_USER, ""), c.labels.get(LABEL_USER)),
                    state=str(c.status),
                )
                for c in found
            ),
            key=lambda c: c.name,
        )
    finally:
        client.close()


def _url(layout: DataLayout, config: Config) -> tuple[str, int]:

    info = holder(layout)
    port = info.port if info is not None and info.port else config.server.port
    return "127.0.0.1", port


async def collect(layout: DataLayout, config: Config, environ: Mapping[str, str]) -> StatusReport:

    install = ir.InstallRoot.from_environ(environ)
    notes: list[str] = []
    service = await asyncio.to_thread(_service, environ)
    installed_version = await asyncio.to_thread(install.current_version)
    install_exists = await asyncio.to_thread(install.exists)

    users: list[UserInfo] | None = None
    instance: str | None = None
    names: dict[str, str] = {}
    try:
        users, instance, names = await asyncio.to_thread(_registry_facts, layout)
    except Exception as exc:  # status reports what it can
        notes.append(f"cannot read the registry: {type(exc).__name__}: {exc}")

    running: Running | None = None
    containers: list[ContainerInfo] | None = None
    if await asyncio.to_thread(is_serving, layout):
        host, port = await asyncio.to_thread(_url, layout, config)
        url = f"http://{host}:{port}"
        answer: dict[str, Any] | None = None
        try:
            answer = await ops_request(layout, config, "GET", "/api/ops/status", timeout=15)
        except SkaldError as exc:
            notes.append(str(exc))
        if answer is not None:
            running = Running(
                version=answer.get("version"),
                pid=answer.get("pid"),
                uptime_s=answer.get("uptime_s"),
                url=url,
                services=msgspec.convert(answer.get("services") or [], list[ServiceInfo]),
            )
            running.degraded = [s.reason for s in running.services or [] if s.reason]
            if isinstance(answer.get("users"), list):
                users = msgspec.convert(answer["users"], list[UserInfo])
            if isinstance(answer.get("containers"), list):
                containers = msgspec.convert(answer["containers"], list[ContainerInfo])
        else:
            health = await fetch_health(host, port)
            if health is not None:
                running = Running(
                    version=health.get("version"),
                    uptime_s=health.get("uptime_s"),
                    url=url,
                    source="health",
                    degraded=[str(r) for r in health.get("reasons") or []],
                )
            else:
                notes.append(f"a process holds the instance lock but {url} does not answer")
    if containers is None and instance and config.sandbox.enabled:
        try:
            containers = await asyncio.to_thread(_docker_containers, config, instance, names)
        except SkaldError as exc:
            notes.append(str(exc))
    return StatusReport(
        data_dir=str(layout.root),
        install_root=str(install.root) if install_exists else None,
        service=service,
        installed_version=installed_version,
        running=running,
        users=users,
        containers=containers,
        sandbox_enabled=config.sandbox.enabled,
        notes=notes,
    )


def _duration(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d {hours}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {s:02d}s"
    return f"{s}s"


def _services(run: Running) -> str:
    """`4 ok` or `3 ok, 1 degraded: <reason>`: the server's background services."""
    if run.services is None:
        return ("degraded: " + "; ".join(run.degraded)) if run.degraded else "unknown"
    counts: dict[str, int] = {}
    for s in run.services:
        counts[s.state] = counts.get(s.state, 0) + 1
    words = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"
    return words + (": " + "; ".join(run.degraded) if run.degraded else "")


def render(report: StatusReport, out: TextIO) -> None:
    rows: list[tuple[str, str]] = [("data", report.data_dir)]
    svc = report.service
    if not svc.installed:
        rows.append(("service", "not installed as a service"))
    else:
        words = [w for w in (svc.active, svc.enabled) if w]
        state = ", ".join(words) if words else "installed (no user manager to ask)"
        rows.append(("service", f"{state} ({svc.unit})"))
    if report.installed_version:
        rows.append(("installed", f"{report.installed_version} ({report.install_root}/current)"))
    elif report.install_root:
        rows.append(("installed", f"{report.install_root}: current is missing or broken"))
    else:
        rows.append(("installed", "not installed (no install root)"))
    run = report.running
    if run is None:
        rows.append(("running", "no server serves this data directory"))
    else:
        parts = [run.version or "unknown version"]
        if run.pid:
            parts.append(f"pid {run.pid}")
        if run.uptime_s is not None:
            parts.append(f"up {_duration(run.uptime_s)}")
        if run.url:
            parts.append(run.url)
        rows.append(("running", ", ".join(parts)))
        if report.installed_version and run.version and run.version != report.installed_version:
            rows.append(("", "the running version differs: systemctl --user restart skald"))
        rows.append(("services", _services(run)))
    set_up = report.users is not None
    if report.users is None:
        rows.append(("users", "unknown (no registry: not set up yet?)"))
    else:
        count = len(report.users)
        detail = f"{report.unlocked} unlocked" if run is not None else "server down: all locked"
        rows.append(("users", f"{count} ({detail})"))
    if report.containers is None and not report.sandbox_enabled:
        rows.append(("containers", "none (sandbox disabled)"))
    elif report.containers is None:
        rows.append(("containers", "unknown" if set_up else "none (not set up)"))
    elif not report.containers:
        rows.append(("containers", "none"))
    else:
        listed = ", ".join(
            f"{c.name} ({c.state or '?'}{', ' + c.user if c.user else ''})"
            for c in report.containers
        )
        rows.append(("containers", f"{len(report.containers)}: {listed}"))
    for note in report.notes:
        rows.append(("note", note))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")


async def run_status(
    layout: DataLayout,
    config: Config,
    environ: Mapping[str, str],
    out: TextIO,
    *,
    as_json: bool = False,
) -> int:
    report = await collect(layout, config, environ)
    if as_json:
        out.write(msgspec.json.encode(report).decode() + "\n")
    else:
        render(report, out)
    return 0
