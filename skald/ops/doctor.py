"""`skald doctor`: check this machine and this data directory, and say how to fix each problem.

Every check returns one `Finding`: ok, warn, fail or skip (does not apply here), a one-line
finding and, for warn and fail, the exact command that fixes it. A check that raises
becomes a fail line naming the error: the doctor itself never crashes. The exit code is 1
when any check fails, else 0 (warnings allowed).

Blocking work (subprocesses, Docker, SQLite, filesystem walks) runs in threads; the
checks run one after the other, in the order an operator would fix things.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import msgspec

from skald import __version__
from skald.config import Config
from skald.errors import SkaldError
from skald.ops import install_root as ir
from skald.ops.channel import fetch_health, holder, is_serving, ops_request
from skald.paths import DIR_MODE, DataLayout

__all__ = ["Finding", "Report", "run_checks", "run_doctor"]

Status = Literal["ok", "warn", "fail", "skip"]

MIN_PYTHON = (3, 11)
DISK_WARN = 2 * 1024**3
DISK_FAIL = 200 * 1024**2
DOCKER_TIMEOUT_S = 5.0
SUBPROCESS_TIMEOUT_S = 10.0
# Beyond this many offending paths, one recursive command instead of a list.
MAX_LISTED_PATHS = 6


class Finding(msgspec.Struct, kw_only=True):
    name: str
    status: Status
    finding: str
    fix: str | None = None


class Report(msgspec.Struct, kw_only=True):
    ok: bool
    failures: int
    warnings: int
    checks: list[Finding]


@dataclass
class Context:
    """What the checks look at; tests build one directly to point at temporary paths."""

    layout: DataLayout
    config: Config
    environ: Mapping[str, str]
    config_error: str | None = None
    install: ir.InstallRoot = field(default_factory=lambda: ir.InstallRoot(Path("/nonexistent")))
    linger_dir: Path | None = None
    # Filled in by the checks for the ones after them.
    docker_client: Any = None
    serving: bool = False
    registry_users: list[tuple[str, str, bool]] | None = None  # (id, username, encrypted)

    @classmethod
    def create(
        cls,
        layout: DataLayout,
        config: Config,
        environ: Mapping[str, str],
        config_error: str | None = None,
    ) -> Context:
        return cls(
            layout=layout,
            config=config,
            environ=environ,
            config_error=config_error,
            install=ir.InstallRoot.from_environ(environ),
        )

    @property
    def user(self) -> str:
        return ir.current_user(self.environ)

    @property
    def installed(self) -> bool:
        """This machine has an install root (whether or not this process runs from it)."""
        return self.install.exists()

    def repair_command(self) -> str:
        """The command that rewrites the install (current, unit, linger) from scratch."""
        script = self.install.update_script
        if script.is_file():
            return f"{shlex.quote(str(script))} --force"
        return self.install.installer_command()


Check = Callable[[Context], Awaitable[Finding]]


def _q(path: Path | str) -> str:
    return shlex.quote(str(path))


def _run(argv: list[str], environ: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argv, no shell
        argv,
        capture_output=True,
        text=True,
        env=dict(environ),
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )


# -- python, configuration, install root --------------------------------------------------


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


async def check_config(ctx: Context) -> Finding:
    path = ctx.layout.config_file
    if ctx.config_error:
        return Finding(
            name="config",
            status="fail",
            finding=ctx.config_error,
            fix=f"correct {_q(path)} (or the SKALD_* variable named), then "
            "systemctl --user restart skald; the other checks used the defaults",
        )
    exists = await asyncio.to_thread(path.is_file)
    where = str(path) if exists else "built-in defaults (no config.toml)"
    return Finding(name="config", status="ok", finding=f"configuration valid: {where}")


async def check_install(ctx: Context) -> Finding:
    def probe() -> Finding:
        root = ctx.install
        running = ir.running_from(root)
        if not root.exists():
            if running is None:
                package = Path(__file__).resolve().parent.parent
                return Finding(
                    name="install",
                    status="skip",
                    finding=f"running from {package} (not an installed release); "
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
        if target is None:
            return Finding(
                name="install",
                status="fail",
                finding=f"{root.current} is missing{note}",
                fix=ctx.repair_command(),
            )
        version = root.current_version()
        if version is None:
            return Finding(
                name="install",
                status="fail",
                finding=f"{root.current} points at {target}, which does not exist{note}",
                fix=ctx.repair_command(),
            )
        if root.journal.exists():
            return Finding(
                name="install",
                status="warn",
                finding=f"an update was interrupted ({root.journal} is left over)",
                fix=f"{_q(root.update_script)} (finishes or rolls back the interrupted update)",
            )
        count = len(root.releases())
        found = f"{root.root}: current -> {target} ({count} release{'s' if count != 1 else ''})"
        if running is not None and running.name != version:
            note = f" (this command itself runs release {running.name})"
        return Finding(name="install", status="ok", finding=found + note)

    return await asyncio.to_thread(probe)


# -- the data directory -------------------------------------------------------------------


async def check_data(ctx: Context) -> Finding:
    layout = ctx.layout

    def probe() -> Finding:
        if not layout.root.is_dir():
            return Finding(
                name="data",
                status="fail",
                finding=f"no Skald data in {layout.root}",
                fix="skald setup (or pass --data DIR where the data lives)",
            )
        if not layout.system_db.is_file():
            return Finding(
                name="data",
                status="warn",
                finding=f"{layout.root} has no registry yet (nobody has set up Skald here)",
                fix="skald setup (or open the web setup page the server prints)",
            )
        return Finding(name="data", status="ok", finding=f"data directory {layout.root}")

    return await asyncio.to_thread(probe)


def _want_dirs(layout: DataLayout) -> list[Path]:
    return [
        layout.root,
        layout.database_dir,
        layout.users_db_dir,
        layout.homes_dir,
        layout.backups_dir,
    ]


def _secret_files(layout: DataLayout) -> list[Path]:
    root = layout.root
    files = [
        layout.instance_key,
        layout.config_file,
        root / "ops.token",
        root / "setup-token",
        root / ".serve.lock",
    ]
    for tree in (layout.database_dir, layout.backups_dir):
        with contextlib.suppress(OSError):
            files.extend(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    return files


def permission_problems(layout: DataLayout, uid: int) -> tuple[list[Path], list[Path], list[Path]]:
    """(dirs not 0700, files readable by others, paths owned by someone else)."""
    bad_dirs: list[Path] = []
    bad_files: list[Path] = []
    foreign: list[Path] = []
    dirs = _want_dirs(layout)
    with contextlib.suppress(OSError):
        for tree in (layout.database_dir, layout.backups_dir):
            dirs.extend(p for p in sorted(tree.rglob("*")) if p.is_dir() and not p.is_symlink())
    seen: set[Path] = set()
    for path in dirs:
        if path in seen:
            continue
        seen.add(path)
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if st.st_uid != uid:
            foreign.append(path)
        if stat.S_IMODE(st.st_mode) != DIR_MODE:
            bad_dirs.append(path)
    for path in _secret_files(layout):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if st.st_uid != uid:
            foreign.append(path)
        if stat.S_IMODE(st.st_mode) & 0o077:
            bad_files.append(path)
    return bad_dirs, bad_files, foreign


async def check_permissions(ctx: Context) -> Finding:
    layout = ctx.layout
    if not layout.root.is_dir():
        return Finding(name="permissions", status="skip", finding="no data directory yet")
    bad_dirs, bad_files, foreign = await asyncio.to_thread(
        permission_problems, layout, os.geteuid()
    )
    if foreign:
        shown = ", ".join(str(p) for p in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        return Finding(
            name="permissions",
            status="fail",
            finding=f"{len(foreign)} path(s) not owned by {ctx.user}: {shown}",
            fix=f"sudo chown -R {ctx.user}: {_q(layout.root)}",
        )
    if not bad_dirs and not bad_files:
        return Finding(
            name="permissions",
            status="ok",
            finding="data directories 0700, keys, config and databases 0600",
        )
    offending = [*bad_dirs, *bad_files]
    shown = ", ".join(str(p) for p in offending[:3]) + (" ..." if len(offending) > 3 else "")
    if len(offending) > MAX_LISTED_PATHS:
        fix = f"chmod -R go-rwx {_q(layout.root)}"
        if bad_dirs:
            fix += " && chmod 700 " + " ".join(_q(p) for p in _want_dirs(layout) if p.exists())
    else:
        parts = []
        if bad_dirs:
            parts.append("chmod 700 " + " ".join(_q(p) for p in bad_dirs))
        if bad_files:
            parts.append("chmod 600 " + " ".join(_q(p) for p in bad_files))
        fix = " && ".join(parts)
    return Finding(
        name="permissions",
        status="fail",
        finding=f"{len(offending)} path(s) readable by others or not 0700: {shown}",
        fix=fix,
    )


def _existing_ancestor(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


async def check_disk(ctx: Context) -> Finding:
    where = await asyncio.to_thread(_existing_ancestor, ctx.layout.root)
    usage = await asyncio.to_thread(shutil.disk_usage, where)
    found = f"{_size(usage.free)} free on the filesystem of {where}"
    fix = f"free some space there (du -sh {_q(where)}/* shows what is large)"
    if usage.free < DISK_FAIL:
        return Finding(name="disk", status="fail", finding=found + " (under 200 MiB)", fix=fix)
    if usage.free < DISK_WARN:
        return Finding(name="disk", status="warn", finding=found + " (under 2 GiB)", fix=fix)
    return Finding(name="disk", status="ok", finding=found)


# -- Docker and the runtime image --------------------------------------------------------


def _docker_url(ctx: Context) -> str:
    from skald.sandbox.client import DEFAULT_SOCKET

    return ctx.config.sandbox.docker_host or DEFAULT_SOCKET


def _which(name: str, environ: Mapping[str, str]) -> str | None:
    path = environ.get("PATH") or os.defpath
    return shutil.which(name, path=path + os.pathsep + "/usr/sbin:/usr/bin:/sbin:/bin")


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
                fix="sudo systemctl enable --now docker",
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
                fix = "sudo systemctl enable --now docker"
            else:
                fix = "sudo systemctl restart docker (and check sandbox.docker_host / DOCKER_HOST)"
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
        fix = "skald image build"
    return Finding(
        name="image", status="fail", finding=f"runtime image {image} is missing", fix=fix
    )


# -- the systemd user unit and linger ------------------------------------------------------


def _user_manager_answers(environ: Mapping[str, str]) -> bool:
    if _which("systemctl", environ) is None:
        return False
    try:
        r = _run(["systemctl", "--user", "is-system-running"], environ)
    except (OSError, subprocess.TimeoutExpired):
        return False
    state = r.stdout.strip()
    return bool(state) and state not in ("offline", "unknown")


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
    if _user_manager_answers(environ):
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


async def check_unit(ctx: Context) -> Finding:
    if not ctx.installed:
        return Finding(
            name="unit", status="skip", finding="not installed as a service (no install root)"
        )
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
    if not ctx.installed:
        return Finding(name="linger", status="skip", finding="not installed as a service")
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


def _bind_free(host: str, port: int) -> OSError | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # As the server does: a port with only TIME_WAIT leftovers counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc
    return None


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
        if _bind_free(host, candidate) is None:
            return candidate
    return None


async def check_port(ctx: Context) -> Finding:

    host, port = ctx.config.server.host, ctx.config.server.port
    ctx.serving = await asyncio.to_thread(is_serving, ctx.layout)
    info = await asyncio.to_thread(holder, ctx.layout) if ctx.serving else None
    if info is not None and info.role == "serve" and info.port and info.port != port:
        port = info.port  # the server was started with --port: check that one
    error = await asyncio.to_thread(_bind_free, host, port)
    if error is None:
        return Finding(name="port", status="ok", finding=f"port {port} on {host} is free")
    if error.errno not in (errno.EADDRINUSE, errno.EACCES):
        return Finding(
            name="port",
            status="fail",
            finding=f"cannot bind {host}:{port}: {error.strerror or error}",
            fix=f"set server.host in {_q(ctx.layout.config_file)} to an address of this machine "
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
                fix="systemctl --user restart skald",
            )
        return Finding(
            name="port",
            status="ok",
            finding=f"port {port} is served by this Skald (version {version})",
        )
    other = await asyncio.to_thread(_listener, port, ctx.environ)
    spare = await asyncio.to_thread(_free_port_near, host, port)
    move = (
        f"set port = {spare} under [server] in {_q(ctx.layout.config_file)} "
        "(or SKALD_SERVER_PORT), then systemctl --user restart skald"
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


# -- databases ---------------------------------------------------------------------------


def quick_check(path: Path) -> tuple[bool, str]:
    """`PRAGMA quick_check` on a plain database opened read-only: (ok, detail)."""
    import apsw

    uri = "file:" + str(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    try:
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        return False, f"cannot open: {exc}"
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
    except apsw.Error as exc:
        return False, f"{type(exc).__name__.removesuffix('Error').lower() or 'error'}: {exc}"
    finally:
        conn.close()
    if rows == ["ok"]:
        return True, "ok"
    return False, "; ".join(rows[:3]) + (" ..." if len(rows) > 3 else "")


def registry_users(path: Path) -> list[tuple[str, str, bool]]:
    """(id, username, encrypted) of every account, read from the registry read-only."""
    import apsw

    conn = apsw.Connection(
        "file:" + str(path) + "?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        rows = conn.execute("SELECT id, username, encrypted FROM users ORDER BY username")
        return [(str(r[0]), str(r[1]), bool(r[2])) for r in rows]
    finally:
        conn.close()


def _newest_archive(backups: Path) -> Path | None:
    try:
        archives = [p for p in backups.glob("skald-backup-*.tar") if p.is_file()]
    except OSError:
        return None
    return max(archives, key=lambda p: p.stat().st_mtime, default=None)


def _restore_fix(ctx: Context) -> str:
    archive = _newest_archive(ctx.layout.backups_dir)
    if archive is not None:
        return f"systemctl --user stop skald && skald restore {_q(archive)}"
    return (
        "systemctl --user stop skald, then skald restore ARCHIVE with your last backup "
        f"(none in {ctx.layout.backups_dir}; update snapshots are in its pre-update-* folders)"
    )


async def check_registry(ctx: Context) -> Finding:
    path = ctx.layout.system_db
    if not await asyncio.to_thread(path.is_file):
        return Finding(name="registry", status="skip", finding="no registry database yet")
    ok, detail = await asyncio.to_thread(quick_check, path)
    if not ok:
        return Finding(
            name="registry",
            status="fail",
            finding=f"{path} fails its integrity check: {detail}",
            fix=await asyncio.to_thread(_restore_fix, ctx),
        )
    with contextlib.suppress(Exception):
        ctx.registry_users = await asyncio.to_thread(registry_users, path)
    return Finding(name="registry", status="ok", finding=f"{path.name}: quick_check ok")


async def check_member_databases(ctx: Context) -> Finding:

    users = ctx.registry_users
    ctx.serving = await asyncio.to_thread(is_serving, ctx.layout)
    if ctx.serving:
        try:
            answer = await ops_request(
                ctx.layout, ctx.config, "GET", "/api/ops/integrity", timeout=120
            )
        except SkaldError as exc:
            return Finding(
                name="databases",
                status="fail",
                finding=f"cannot ask the running server: {exc}",
                fix="systemctl --user restart skald",
            )
        if answer is not None:
            dbs = answer.get("databases") or []
            bad = [d for d in dbs if not d.get("ok")]
            if bad:
                shown = "; ".join(f"{d.get('name')}: {d.get('detail')}" for d in bad[:3])
                return Finding(
                    name="databases",
                    status="fail",
                    finding=f"{len(bad)} of {len(dbs)} open database(s) fail: {shown}",
                    fix=await asyncio.to_thread(_restore_fix, ctx),
                )
            owners = [d for d in dbs if d.get("name") != "registry"]
            locked = ""
            if users is not None:
                n_locked = max(0, len(users) - len(owners))
                locked = f"; {n_locked} locked, not checked" if n_locked else ""
            return Finding(
                name="databases",
                status="ok",
                finding=f"the running server checked the registry and {len(owners)} "
                f"unlocked member database(s){locked}",
            )
    if users is None:
        return Finding(name="databases", status="skip", finding="no accounts to check")
    plain = [(uid, name) for uid, name, enc in users if not enc]
    locked_count = len(users) - len(plain)

    def check_plain() -> list[tuple[str, str]]:
        bad: list[tuple[str, str]] = []
        for uid, name in plain:
            path = ctx.layout.user_db(uid)
            if not path.is_file():
                continue  # created on first use
            ok, detail = quick_check(path)
            if not ok:
                bad.append((name, detail))
        return bad

    bad = await asyncio.to_thread(check_plain)
    if bad:
        shown = "; ".join(f"{name}: {detail}" for name, detail in bad[:3])
        return Finding(
            name="databases",
            status="fail",
            finding=f"{len(bad)} member database(s) fail their integrity check: {shown}",
            fix=await asyncio.to_thread(_restore_fix, ctx),
        )
    tail = (
        f"; {locked_count} encrypted, checked only by a running server once unlocked"
        if locked_count
        else ""
    )
    return Finding(
        name="databases",
        status="ok",
        finding=f"{len(plain)} unencrypted member database(s) ok{tail}",
    )


# -- running them -----------------------------------------------------------------------

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
    check_disk,
    check_docker,
    check_image,
    check_unit,
    check_linger,
    check_port,
]


async def run_checks(ctx: Context, checks: list[Check] | None = None) -> Report:
    findings: list[Finding] = []
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
