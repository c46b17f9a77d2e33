"""What every `skald doctor` check is built from: the `Context` it looks at, the
`Finding` it returns, and the shell quoting of the paths in its fix commands.

The checks are in `skald.ops.checks_host` and `skald.ops.checks_data`; running them is
`skald.ops.doctor`.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from skald.config import Config
from skald.ops import install_root as ir
from skald.paths import DataLayout

Status = Literal["ok", "warn", "fail", "skip"]


class Finding(msgspec.Struct, kw_only=True):
    name: str
    status: Status
    finding: str
    fix: str | None = None


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


def shell_quote(path: Path | str) -> str:
    return shlex.quote(str(path))
