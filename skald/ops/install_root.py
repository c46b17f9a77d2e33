"""The install root (`$SKALD_HOME`, default `~/.local/share/skald`) as docs/dev/installer.md
lays it out, read-only: which releases are there, which one `current` points at, where the
systemd user unit and the linger flag live, and what the installer recorded.

Nothing here writes; every function is a few blocking filesystem reads (callers inside
asyncio run them in a thread).
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import skald
from skald.config import expand_path, home_dir

__all__ = [
    "LINGER_DIR",
    "UNIT_NAME",
    "InstallRoot",
    "current_user",
    "linger_file",
    "running_from",
    "unit_path",
]

UNIT_NAME = "skald.service"
# systemd-logind keeps one empty file per user with lingering enabled.
LINGER_DIR = Path("/var/lib/systemd/linger")


def current_user(environ: Mapping[str, str]) -> str:
    """The account this process runs as (the passwd entry wins over $USER)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return environ.get("USER") or str(os.geteuid())


def unit_path(environ: Mapping[str, str]) -> Path:
    """`${XDG_CONFIG_HOME:-~/.config}/systemd/user/skald.service`, the unit we own."""
    config_home = environ.get("XDG_CONFIG_HOME")
    base = expand_path(config_home, environ) if config_home else home_dir(environ) / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def linger_file(user: str, linger_dir: Path | None = None) -> Path:
    return (linger_dir or LINGER_DIR) / user


@dataclass(frozen=True)
class InstallRoot:
    """Paths inside one install root; `exists()` says whether anything was installed."""

    root: Path

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> InstallRoot:
        value = environ.get("SKALD_HOME")
        if value:
            return cls(expand_path(value, environ).absolute())
        return cls((home_dir(environ) / ".local" / "share" / "skald").absolute())

    @property
    def releases_dir(self) -> Path:
        return self.root / "releases"

    @property
    def current(self) -> Path:
        return self.root / "current"

    @property
    def bin_skald(self) -> Path:
        return self.root / "bin" / "skald"

    @property
    def update_script(self) -> Path:
        return self.root / "update.sh"

    @property
    def uninstall_script(self) -> Path:
        return self.root / "uninstall.sh"

    @property
    def installer_env_file(self) -> Path:
        return self.root / "installer.env"

    @property
    def journal(self) -> Path:
        return self.root / ".update-journal"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def exists(self) -> bool:
        """True when an installer has laid out this root (a `current` link or releases)."""
        return self.current.is_symlink() or self.releases_dir.is_dir()

    def releases(self) -> list[str]:
        """Installed release versions (directory names under releases/), sorted by name."""
        try:
            return sorted(p.name for p in self.releases_dir.iterdir() if p.is_dir())
        except OSError:
            return []

    def current_target(self) -> str | None:
        """What `current` points at, as written in the link (None: not a symlink)."""
        try:
            return str(self.current.readlink())
        except OSError:
            return None

    def current_version(self) -> str | None:
        """The version `current` points at, when it points at an existing release directory."""
        target = self.current_target()
        if target is None:
            return None
        resolved = self.root / target  # an absolute target replaces the root
        if not resolved.is_dir():
            return None
        return resolved.name

    def installer_env(self) -> dict[str, str]:
        """KEY=VALUE lines of installer.env (blank lines, comments and junk are skipped;
        one level of single or double quotes around a value is removed)."""
        try:
            text = self.installer_env_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        return parse_env_file(text)

    def installer_command(self) -> str:
        """How to (re)install: the served installer of the recorded release URL."""
        base = self.installer_env().get("SKALD_RELEASES_URL", "").rstrip("/")
        if base:
            return f"curl -fsSL {base}/install.sh | bash"
        return "curl -fsSL <release site>/install.sh | bash"


def parse_env_file(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum() or key[0].isdigit():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def running_from(root: InstallRoot) -> Path | None:
    """The release directory this process runs from, or None when it runs from elsewhere
    (a source checkout, a pyz outside the install root)."""
    candidates = [Path(skald.__file__)]
    # shiv runs `python skald.pyz`: argv[0] names the artefact even when the package was
    # extracted somewhere else (SHIV_ROOT).
    if sys.argv and sys.argv[0]:
        candidates.append(Path(sys.argv[0]))
    releases = root.releases_dir.resolve()
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_relative_to(releases):
            parts = resolved.relative_to(releases).parts
            if parts:
                return releases / parts[0]
        if resolved.is_relative_to(root.root.resolve()):
            # The package extracted under data/cache/shiv of this root.
            return root.current.resolve() if root.current.exists() else root.root
    return None
