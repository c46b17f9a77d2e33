"""`skald doctor` checks of this machine: Python, the install root, Docker and the runtime
image, the systemd user unit and linger, and the server's port."""

from __future__ import annotations

import asyncio
import errno
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skald.errors import SkaldError
from skald.ops import checks_base
from skald.ops import install_root as ir
from skald.ops.channel import bind_error, fetch_health, holder, is_serving, ops_request
from skald.ops.checks_base import (
    Context,
    Finding,
    Status,
    no_answer,
    not_applicable,
    shell_quote,
    user_manager_answers,
)

MIN_PYTHON = (3, 11)
DOCKER_TIMEOUT_S = 5.0
SUBPROCESS_TIMEOUT_S = 10.0


def _run(argv: list[str], environ: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argv, no shell
        argv,
        capture_output=True,
        text=True,
        env=dict(environ),
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )


def _which(name: str, environ: Mapping[str, str]) -> str | None:
    path = environ.get("PATH") or os.defpath
    return shutil.which(name, path=path + os.pathsep + "/usr/sbin:/usr/bin:/sbin:/bin")


# -- python and the install root ------------------------------------------------------


async def check_python(ctx: Context) -> Finding:
    v = sys.version_info
    version = f"{v.major}.{v.minor}.{v.micro}"
    where = sys.executable or "(unknown interpreter)"
    if (v.major, v.minor) < MIN_PYTHON:
        return Finding(
            name="python",
            status="fail",
            finding=f"Python {version} at {where} is too old (Skald needs 3.11 or newer)",
            fix="install python3 3.11 or newer (Debian: sudo apt-get install python3), "
            f"then {ctx.repair_command()}",
        )
    return Finding(name="python", status="ok", finding=f"Python {version} at {where}")


async def check_install(ctx: Context) -> Finding:
    def probe() -> Finding:
        root = ctx.install
        running = ir.running_from(root)
        if not root.exists():
            if running is None:
                package = Path(__file__).resolve().parent.parent
                return not_applicable(
                    "install",
                    f"running from {package} (not an installed release); "
                    f"no install root at {root.root}",
                )
            return Finding(
                name="install",
                status="fail",
                finding=f"no install root at {root.root}",
                fix=root.installer_command(),
            )
        here = Path(__file__).resolve().parent.parent
        note = "" if running is not None else f" (this command itself runs from {here})"
        target = root.current_target()
        version = root.current_version()  # None too when `current` is missing
        if target is None or version is None:
            broken = (
                f"{root.current} is missing"
                if target is None
                else f"{root.current} points at {target}, which does not exist"
            )
            return Finding(
                name="install", status="fail", finding=broken + note, fix=ctx.repair_command()
            )
        if root.journal.exists():
            return Finding(
                name="install",
                status="warn",
                finding=f"an update was interrupted ({root.journal} is left over)",
                fix=f"{shell_quote(root.update_script)} (finishes or rolls back the interrupted update)",
            )
        count = len(root.releases())
        found = f"{root.root}: current -> {target} ({count} release{'s' if count != 1 else ''})"
        if running is not None and running.name != version:
            note = f" (this command itself runs release {running.name})"
        return Finding(name="install", status="ok", finding=found + note)

    return await asyncio.to_thread(probe)


# -- Docker and the runtime image --------------------------------------------------------


def _docker_url(ctx: Context) -> str:
    from skald.sandbox.client import DEFAULT_SOCKET

    return ctx.config.sandbox.docker_host or DEFAULT_SOCKET


def docker_start_command() -> str:
    """How this host starts the Docker daemon: systemd's unit, else the init script."""
    if checks_base.SYSTEMD_RUN_DIR.is_dir():
        return "sudo systemctl enable --now docker"
    return "sudo service docker start"


def _docker_socket_problem(ctx: Context, url: str) -> Finding | None:
    """A precise finding for a unix socket that is missing or not ours to use."""
    from skald.sandbox.client import DEFAULT_SOCKET

    if not url.startswith("unix://"):
        return None
    sock = Path(url[len("unix://") :])
    installed = _which("dockerd", ctx.environ) is not None
    if not sock.exists():
        if url != DEFAULT_SOCKET and installed:
            return Finding(
                name="docker",
                status="fail",
                finding=f"no Docker socket at {sock} (from sandbox.docker_host or DOCKER_HOST)",
                fix="unset DOCKER_HOST (or set sandbox.docker_host) to the running daemon's "
                f"socket, e.g. {DEFAULT_SOCKET}",
            )
        if installed:
            return Finding(
                name="docker",
                status="fail",
                finding=f"Docker is installed but not running (no socket at {sock})",
                fix=docker_start_command(),
            )
        return Finding(
            name="docker",
            status="fail",
            finding=f"Docker is not installed (no socket at {sock})",
            fix="install Docker (Debian: sudo apt-get install docker.io)",
        )
    if not os.access(sock, os.R_OK | os.W_OK):
        return Finding(
            name="docker",
            status="fail",
            finding=f"permission denied on {sock}: {ctx.user} is not in the docker group "
            "(or has not logged in again since joining it)",
            fix=f"sudo usermod -aG docker {ctx.user}, then log out and in",
        )
    return None


async def check_docker(ctx: Context) -> Finding:
    from skald.sandbox.client import DockerUnavailable, connect

    url = _docker_url(ctx)
    if not ctx.config.sandbox.enabled:
        return Finding(
            name="docker",
            status="skip",
            finding="sandbox disabled (sandbox.enabled = false): Docker not needed",
        )
    problem = await asyncio.to_thread(_docker_socket_problem, ctx, url)
    if problem is None:
        try:
            client = await asyncio.to_thread(connect, url, DOCKER_TIMEOUT_S)
        except DockerUnavailable as exc:
            message = str(exc)
            if "permission denied" in message:
                fix = f"sudo usermod -aG docker {ctx.user}, then log out and in"
            elif "refused" in message or "no such socket" in message:
                fix = docker_start_command()
            else:
                fix = (
                    docker_start_command().replace("enable --now", "restart")
                    + " (and check sandbox.docker_host / DOCKER_HOST)"
                )
            problem = Finding(name="docker", status="fail", finding=message, fix=fix)
        else:
            ctx.docker_client = client
            version = await asyncio.to_thread(_docker_version, client)
            return Finding(name="docker", status="ok", finding=f"Docker {version} at {url}")
    return problem


def _docker_version(client: Any) -> str:
    try:
        return str(client.version().get("Version", "?"))
    except Exception:  # cosmetic: the daemon answered the ping already
        return "?"


async def check_image(ctx: Context) -> Finding:
    from skald.sandbox.image import has_image, image_tag

    image = ctx.config.sandbox.image or image_tag()
    if not ctx.config.sandbox.enabled:
        return Finding(name="image", status="skip", finding="sandbox disabled; no image needed")
    if ctx.docker_client is None:
        return Finding(name="image", status="skip", finding=f"{image}: needs Docker (see above)")
    present = await asyncio.to_thread(has_image, ctx.docker_client, image)
    if present:
        return Finding(name="image", status="ok", finding=f"runtime image {image} present")
    if ctx.config.sandbox.image:
        fix = f"docker pull {shlex.quote(image)} (or empty sandbox.image to use the built-in one)"
    else:
        fix = ctx.skald("image", "build")
    return Finding(
        name="image", status="fail", finding=f"runtime image {image} is missing", fix=fix
    )


async def check_sandbox_trust(ctx: Context) -> Finding:
    """The certificate authorities the host trusts and the sandboxes would not (a
    TLS-inspecting network: in-sandbox installs fail), and `[connectors] extra_ca_file`
    itself. Compares files only: no container runs, nothing goes to the internet."""
    from skald.sandbox import trust
    from skald.sandbox.image import has_image, image_tag

    name = "sandbox trust"
    if not ctx.config.sandbox.enabled:
        return Finding(name=name, status="skip", finding="sandbox disabled")
    extra = str(getattr(ctx.config.extensions.get("connectors"), "extra_ca_file", "") or "")
    where = f"under [connectors] in {shell_quote(ctx.layout.config_file)}"
    if extra:
        problem = await asyncio.to_thread(trust.extra_problem, extra)
        if problem is not None:
            fix = f"point extra_ca_file {where} at a readable PEM bundle, then {ctx.restart_command()}"
            return Finding(name=name, status="fail", finding=problem, fix=fix)
    host = trust.host_bundle(ctx.environ)
    image = ctx.config.sandbox.image or image_tag()
    if ctx.docker_client is None or host is None:
        why = "needs Docker (see above)" if host is None else "no CA bundle on this host"
        return Finding(name=name, status="skip", finding=why)
    if not await asyncio.to_thread(has_image, ctx.docker_client, image):
        return Finding(name=name, status="skip", finding=f"{image}: missing (see above)")
    in_image = await asyncio.to_thread(trust.image_bundle, ctx.docker_client, image)
    if in_image is None:
        return Finding(name=name, status="skip", finding=f"{image} has no {trust.IMAGE_BUNDLE}")
    host_pem = await asyncio.to_thread(host.read_bytes)
    extra_pem = await asyncio.to_thread(Path(extra).read_bytes) if extra else b""
    missing = trust.untrusted_in_image(host_pem, in_image, extra_pem)
    if missing:
        fix = f'set extra_ca_file = "{host}" {where}, then {ctx.restart_command()}'
        finding = (
            f"this host trusts {missing} certificate authorit{'y' if missing == 1 else 'ies'} "
            "that the sandboxes do not (a TLS-inspecting network?): connector installs in "
            f"sandboxes may fail with a certificate error until {trust.SETTING} is set"
        )
        return Finding(name=name, status="warn", finding=finding, fix=fix)
    with_extra = f" (with {trust.SETTING})" if extra else ""
    finding = f"the sandboxes trust every certificate authority this host does{with_extra}"
    return Finding(name=name, status="ok", finding=finding)


async def check_sandbox_network(ctx: Context) -> Finding:
    """The members' address pool: free of this host's routes, not exhausted, and no
    sandbox the running server could not make."""
    import ipaddress

    from skald.sandbox.network import (
        capacity,
        docker_subnets,
        free_subnets,
        host_routes,
        pool_conflict,
    )

    cfg = ctx.config.sandbox
    if not cfg.enabled:
        return Finding(name="sandbox network", status="skip", finding="sandbox disabled")
    pool = ipaddress.IPv4Network(cfg.subnet_pool)
    routes = await asyncio.to_thread(host_routes)
    conflict = pool_conflict(pool, routes)
    fix = (
        f"set subnet_pool under [sandbox] in {shell_quote(ctx.layout.config_file)} to a free range"
    )
    if conflict is not None:
        return Finding(name="sandbox network", status="fail", finding=conflict, fix=fix)
    if ctx.docker_client is None:
        return Finding(
            name="sandbox network", status="skip", finding=f"pool {pool}: needs Docker (see above)"
        )
    networks = await asyncio.to_thread(ctx.docker_client.networks.list)
    taken = docker_subnets(networks) + [r.net for r in routes]
    total = capacity(pool, cfg.subnet_prefix)
    free = sum(1 for _ in free_subnets(pool, cfg.subnet_prefix, taken))
    if free == 0:
        return Finding(
            name="sandbox network",
            status="fail",
            finding=f"the sandbox address pool {pool} is exhausted ({total} subnets of "
            f"/{cfg.subnet_prefix} in use): new members get no sandbox",
            fix=fix + " (or a wider one)",
        )
    health = await fetch_health(_probe_host(ctx.config.server.host), ctx.config.server.port, 2.0)
    reasons = [r for r in (health or {}).get("reasons", []) if "sandbox" in str(r)]
    if reasons:
        return Finding(
            name="sandbox network",
            status="warn",
            finding="the running server reports: " + "; ".join(map(str, reasons)),
            fix="see the reason; `skald doctor` again once it is fixed",
        )
    status: Status = "warn" if free < max(1, total // 10) else "ok"
    return Finding(
        name="sandbox network",
        status=status,
        finding=f"pool {pool}: {free} of {total} member subnets (/{cfg.subnet_prefix}) free",
        fix=fix + " (or a wider one)" if status == "warn" else None,
    )


async def check_host_listeners(ctx: Context) -> Finding:
    """Services of this host listening on all addresses: every sandbox with a network
    reaches them through its gateway. Skald's own port is left out while Skald refuses
    the sandboxes itself (`[sandbox] allow_skald_access` false)."""
    from skald.sandbox.network import listening_on_all_addresses

    name = "host listeners"
    cfg = ctx.config.sandbox
    if not cfg.enabled:
        return Finding(name=name, status="skip", finding="sandbox disabled")
    ports = await asyncio.to_thread(listening_on_all_addresses)
    own = ctx.config.server.port
    if not cfg.allow_skald_access:
        ports = [p for p in ports if p != own]
    if not ports:
        return Finding(name=name, status="ok", finding="no other service listens on all addresses")
    listed = ", ".join(map(str, ports))
    return Finding(
        name=name,
        status="warn",
        finding=f"TCP port(s) {listed} listen on all addresses: the sandboxes reach them "
        f"through their network's gateway (addresses from {cfg.subnet_pool})",
        fix=f"bind those services to 127.0.0.1 or to your home network's address, or drop "
        f"traffic from the sandboxes to this host: sudo iptables -I INPUT -s "
        f"{cfg.subnet_pool} -j REJECT",
    )


# -- the systemd user unit and linger ------------------------------------------------------


def _wanted_by(unit_text: str) -> list[str]:
    targets: list[str] = []
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Install" and line.startswith("WantedBy="):
            targets.extend(line[len("WantedBy=") :].split())
    return targets or ["default.target"]


def unit_state(environ: Mapping[str, str]) -> tuple[Path, bool, str | None, str | None]:
    """(unit path, file exists, is-enabled, is-active). The states are systemctl's words,
    or None when no user manager answers (is-enabled is then read from the files)."""
    path = ir.unit_path(environ)
    exists = path.is_file()
    if user_manager_answers(environ):
        enabled = _run(["systemctl", "--user", "is-enabled", ir.UNIT_NAME], environ)
        active = _run(["systemctl", "--user", "is-active", ir.UNIT_NAME], environ)
        return path, exists, enabled.stdout.strip() or None, active.stdout.strip() or None
    if not exists:
        return path, False, None, None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return path, True, None, None
    unit_dir = path.parent
    wants = [unit_dir / f"{target}.wants" / ir.UNIT_NAME for target in _wanted_by(text)]
    return path, True, "enabled" if any(w.exists() for w in wants) else "disabled", None


def _no_service_reason(ctx: Context) -> str | None:
    """Why the service checks do not apply here, or None when they do."""
    if not ctx.installed:
        return f"not installed as a service (no install root at {ctx.install.root})"
    if not ctx.has_systemd:
        return (
            "this machine does not run systemd, so Skald is not a service here; "
            f"it runs while `{ctx.skald('serve')}` runs"
        )
    return None


async def check_unit(ctx: Context) -> Finding:
    reason = await asyncio.to_thread(_no_service_reason, ctx)
    if reason is not None:
        return not_applicable("unit", reason)
    path, exists, enabled, active = await asyncio.to_thread(unit_state, ctx.environ)
    if not exists:
        return Finding(
            name="unit",
            status="fail",
            finding=f"no systemd user unit at {path}",
            fix=await asyncio.to_thread(ctx.repair_command),
        )
    if enabled == "masked":
        return Finding(
            name="unit",
            status="fail",
            finding=f"{ir.UNIT_NAME} is masked",
            fix="systemctl --user unmask skald && systemctl --user enable --now skald",
        )
    if enabled not in ("enabled", "enabled-runtime", "linked", "alias"):
        return Finding(
            name="unit",
            status="fail",
            finding=f"{path} is installed but not enabled ({enabled or 'unknown'})",
            fix="systemctl --user enable --now skald",
        )
    if active is None:
        return Finding(
            name="unit",
            status="ok",
            finding=f"{path} installed and enabled (no user manager to ask whether it runs)",
        )
    if active != "active":
        return Finding(
            name="unit",
            status="warn",
            finding=f"{ir.UNIT_NAME} is enabled but {active}",
            fix="systemctl --user restart skald (journalctl --user -u skald -e says why it stopped)",
        )
    return Finding(name="unit", status="ok", finding=f"{ir.UNIT_NAME} enabled and active")


async def check_linger(ctx: Context) -> Finding:
    reason = await asyncio.to_thread(_no_service_reason, ctx)
    if reason is not None:
        return not_applicable("linger", reason)
    user = ctx.user
    flag = ir.linger_file(user, ctx.linger_dir)
    if await asyncio.to_thread(flag.exists):
        return Finding(name="linger", status="ok", finding=f"lingering enabled for {user}")
    return Finding(
        name="linger",
        status="warn",
        finding=f"lingering is off for {user}: Skald stops at logout and does not start at boot",
        fix=f"sudo loginctl enable-linger {user}",
    )


# -- the port ---------------------------------------------------------------------------


_SS_USER = re.compile(r'\("(?P<name>[^"]+)",pid=(?P<pid>\d+)')


def _listener(port: int, environ: Mapping[str, str]) -> str | None:
    """`name (pid N)` of whoever listens on the port, when `ss` can tell."""
    if _which("ss", environ) is None:
        return None
    try:
        r = _run(["ss", "-Hltnp", f"sport = :{port}"], environ)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _SS_USER.search(r.stdout)
    return f"{m['name']} (pid {m['pid']})" if m else None


def _probe_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::", "[::]"):  # noqa: S104 - comparing, not binding
        return "127.0.0.1"
    return host


def _free_port_near(host: str, port: int) -> int | None:
    for candidate in range(port + 1, min(port + 50, 65536)):
        if bind_error(host, candidate) is None:
            return candidate
    return None


async def check_port(ctx: Context) -> Finding:

    host, port = ctx.config.server.host, ctx.config.server.port
    ctx.serving = await asyncio.to_thread(is_serving, ctx.layout)
    info = await asyncio.to_thread(holder, ctx.layout) if ctx.serving else None
    if info is not None and info.role == "serve" and info.port and info.port != port:
        port = info.port  # the server was started with --port: check that one
    error = await asyncio.to_thread(bind_error, host, port)
    if error is None:
        return Finding(name="port", status="ok", finding=f"port {port} on {host} is free")
    if error.errno not in (errno.EADDRINUSE, errno.EACCES):
        return Finding(
            name="port",
            status="fail",
            finding=f"cannot bind {host}:{port}: {error.strerror or error}",
            fix=f"set server.host in {shell_quote(ctx.layout.config_file)} to an address of this machine "
            "(0.0.0.0 serves every interface)",
        )
    health = await fetch_health(_probe_host(host), port, wait_s=2.0)
    version = None if health is None else str(health["version"])
    if version is not None and ctx.serving:
        current = await asyncio.to_thread(ctx.install.current_version)
        if current is not None and current != version:
            return Finding(
                name="port",
                status="warn",
                finding=f"port {port} is served by this Skald, version {version}, but the "
                f"installed version is {current} (waiting for a restart?)",
                fix=ctx.restart_command(),
            )
        return Finding(
            name="port",
            status="ok",
            finding=f"port {port} is served by this Skald (version {version})",
        )
    other = await asyncio.to_thread(_listener, port, ctx.environ)
    spare = await asyncio.to_thread(_free_port_near, host, port)
    start = "systemctl --user restart skald" if ctx.runs_as_service else ctx.skald("serve")
    move = (
        f"set port = {spare} under [server] in {shell_quote(ctx.layout.config_file)} "
        f"(or SKALD_SERVER_PORT), then {start}"
        if spare
        else "choose another server.port"
    )
    if error.errno == errno.EACCES:
        return Finding(
            name="port",
            status="fail",
            finding=f"port {port} is privileged: this account may not listen on it",
            fix=move,
        )
    if version is not None:
        who = f" ({other})" if other else ""
        return Finding(
            name="port",
            status="fail",
            finding=f"port {port} is taken by another Skald server{who}, version {version}, "
            f"that does not serve {ctx.layout.root}",
            fix=f"stop that server, or {move}",
        )
    who = other or "another program"
    return Finding(
        name="port",
        status="fail",
        finding=f"port {port} is taken by {who}, not Skald",
        fix=f"stop {who}, or {move}",
    )


async def check_services(ctx: Context) -> Finding:
    """The running server's background services (after `check_port`, which sees it)."""
    if not ctx.serving:
        return Finding(name="services", status="skip", finding="no server is running")
    try:
        answer = await _ops_status(ctx)
    except SkaldError as exc:
        return no_answer(ctx, "services", "warn", exc)
    services = answer.get("services") or []
    degraded = [s for s in services if s.get("state") == "degraded"]
    if degraded:
        return Finding(
            name="services",
            status="warn",
            finding="; ".join(str(s.get("reason") or s.get("name")) for s in degraded),
            fix="journalctl --user -u skald (the error is logged at every crash)"
            if ctx.runs_as_service
            else f"read the output of `{ctx.skald('serve')}` (the error is logged at every crash)",
        )
    return Finding(
        name="services",
        status="ok",
        finding=f"{len(services)} background service(s) running, none degraded",
    )


async def _ops_status(ctx: Context) -> dict[str, Any]:
    answer = await ops_request(ctx.layout, ctx.config, "GET", "/api/ops/status", timeout=15)
    if answer is None:
        raise SkaldError("the server did not answer on its ops channel")
    return answer
