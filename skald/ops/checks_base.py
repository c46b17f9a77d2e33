"""What every `skald doctor` check is built from: the `Context` it looks at, the
`Finding` it returns, and the shell quoting of the paths in its fix commands.

Rule: a fix is a command that works on *this* install's shape (docs/doctor.md, "Install
shapes"): installed with a systemd user service, installed without systemd, or run from
a source checkout. So fixes are built here from the shape, never typed into a check:
`skald(...)` is the command that reaches this data directory, `restart_command()` how
this Skald is restarted, `repair_command()` how this install is rewritten. A check that
does not apply to the shape returns `not_applicable(name, reason)`.
Trap: `update.sh --force` needs the release server the install came from; an install
from a checkout (`install.sh --from-source`, recorded as SKALD_SOURCE) has none.

The checks are in `skald.ops.checks_host` and `skald.ops.checks_data`; running them is
`skald.ops.doctor`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from skald.config import Config, resolve_data_dir
from skald.ops import install_root as ir
from skald.paths import DataLayout

Status = Literal["ok", "warn", "fail", "skip"]

# Present when systemd is the init (what install.sh's `detect_systemd` looks at first):
# the shape with a user service, linger and `systemctl` fixes.
SYSTEMD_RUN_DIR = Path("/run/systemd/system")


class Finding(msgspec.Struct, kw_only=True):
    name: str
    status: Status
    finding: str
    fix: str | None = None


def not_applicable(name: str, reason: str) -> Finding:
    """A check that does not apply to this install's shape, and why."""
    return Finding(name=name, status="skip", finding=f"not applicable: {reason}")


def no_answer(ctx: Context, name: str, status: Status, exc: Exception) -> Finding:
    """The server runs but did not answer on its ops channel: a restart is the fix."""
    return Finding(
        name=name,
        status=status,
        finding=f"cannot ask the running server: {exc}",
        fix=ctx.restart_command(),
    )


def user_manager_answers(environ: Mapping[str, str]) -> bool:
    """A systemd user manager runs for this account and answers `systemctl --user`."""
    if not SYSTEMD_RUN_DIR.is_dir():
        return False
    path = (environ.get("PATH") or os.defpath) + os.pathsep + "/usr/bin:/bin"
    if shutil.which("systemctl", path=path) is None:
        return False
    try:
        r = subprocess.run(
            ["systemctl", "--user", "is-system-running"],  # noqa: S607
            capture_output=True,
            text=True,
            env=dict(environ),
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    state = r.stdout.strip()
    return bool(state) and state not in ("offline", "unknown")


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
    # systemd is the init here (the service shape); None: look (tests set it).
    systemd: bool | None = None

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

    @property
    def has_systemd(self) -> bool:
        """systemd runs this machine, so Skald is (or should be) a user service. Not
        whether the user manager answers now: with linger off and nobody logged in it
        does not, and that is the linger check's finding, not another shape."""
        if self.systemd is None:
            self.systemd = SYSTEMD_RUN_DIR.is_dir()
        return self.systemd

    @property
    def source_checkout(self) -> Path | None:
        """The checkout an `install.sh --from-source` install was built from."""
        value = self.install.installer_env().get("SKALD_SOURCE")
        return Path(value) if value else None

    @property
    def release_url(self) -> str:
        return self.install.installer_env().get("SKALD_RELEASES_URL", "").strip()

    def repair_command(self) -> str:
        """The command that rewrites the install (current, unit, linger) from scratch."""
        source = self.source_checkout
        if source is not None and not self.release_url:
            return f"{shell_quote(source / 'install.sh')} --from-source"
        script = self.install.update_script
        if script.is_file() and self.release_url:
            return f"{shlex.quote(str(script))} --force"
        if self.release_url:
            return self.install.installer_command()
        return "run ./install.sh --from-source in your Skald checkout (or the installer you used)"

    def skald(self, *args: str) -> str:
        """`skald ARGS` as a command that reaches this data directory from a shell."""
        on_path = shutil.which("skald", path=self.environ.get("PATH") or os.defpath)
        wrapper = self.install.bin_skald
        if on_path is not None:
            command = "skald"
            is_wrapper = wrapper.is_file() and Path(on_path).resolve() == wrapper.resolve()
        elif wrapper.is_file():
            command, is_wrapper = shell_quote(wrapper), True
        elif sys.argv and sys.argv[0].endswith(".pyz"):  # a zipapp outside an install
            command, is_wrapper = f"{shell_quote(sys.executable)} {shell_quote(sys.argv[0])}", False
        else:
            command, is_wrapper = f"{shell_quote(sys.executable)} -m skald", False
        environ = dict(self.environ)
        if is_wrapper:
            environ["SKALD_HOME"] = str(self.install.root)  # the wrapper sets it
        if resolve_data_dir(None, environ) != self.layout.root.resolve():
            command += f" --data {shell_quote(self.layout.root)}"
        return " ".join([command, *args])

    @property
    def runs_as_service(self) -> bool:
        """Skald is installed as a systemd user service here."""
        return self.installed and self.has_systemd

    def restart_command(self) -> str:
        if self.runs_as_service:
            return "systemctl --user restart skald"
        return f"stop the running `{self.skald('serve')}` (Ctrl-C), then start it again"

    def stop_command(self) -> str:
        if self.runs_as_service:
            return "systemctl --user stop skald"
        return f"stop the running `{self.skald('serve')}` (Ctrl-C)"


Check = Callable[[Context], Awaitable[Finding]]


def shell_quote(path: Path | str) -> str:
    return shlex.quote(str(path))
