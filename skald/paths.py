"""Layout of the data directory (DESIGN.md §3), in one place.

Everything under the data directory is private to the service account: directories are
0700 and secret-bearing files 0600, whatever the umask of whoever started the process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["CONTAINER_HOME", "DataLayout", "secure_file", "validate_user_id"]

# Where a member's home is mounted in their sandbox (its agent path is `~`); the rule
# engine, the mounts list and the sandbox all spell the home this way.
CONTAINER_HOME: Final = "/home/skald"

DIR_MODE = 0o700
FILE_MODE = 0o600

# User ids become file names: only this shape, so no `..`, `/`, case tricks or NULs.
_USER_ID = re.compile(r"[a-z0-9]{1,64}")


def validate_user_id(user_id: str) -> str:
    """Return `user_id` if it is safe to use as a file name, else raise ValueError."""
    if not isinstance(user_id, str) or not _USER_ID.fullmatch(user_id):
        raise ValueError(f"invalid user id: {user_id!r}")
    return user_id


def secure_file(path: Path) -> None:
    """Make an existing file readable by the owner only (databases, config, backups)."""
    if path.exists():
        path.chmod(FILE_MODE)


@dataclass(frozen=True)
class DataLayout:
    """Paths inside one data directory; `ensure()` creates the private ones."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def database_dir(self) -> Path:
        return self.root / "database"

    @property
    def system_db(self) -> Path:
        return self.database_dir / "system.db"

    @property
    def users_db_dir(self) -> Path:
        return self.database_dir / "users"

    def user_db(self, user_id: str) -> Path:
        return self.users_db_dir / f"{validate_user_id(user_id)}.db"

    @property
    def instance_key(self) -> Path:
        return self.root / "instance.key"

    @property
    def vapid_key(self) -> Path:
        """The instance's Web Push (VAPID) signing key, PEM, 0600."""
        return self.root / "vapid.pem"

    @property
    def homes_dir(self) -> Path:
        return self.root / "homes"

    def home(self, user_id: str) -> Path:
        return self.homes_dir / validate_user_id(user_id)

    @property
    def agents_dir(self) -> Path:
        """Agents the operator added (`agents/<id>/`, as the shipped ones): kept by
        updates (it is data) and by every backup."""
        return self.root / "agents"

    @property
    def backups_dir(self) -> Path:
        return self.root / "backups"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def plugins_dir(self) -> Path:
        """Installed plugins, one folder each (`plugins/<id>/`: a wheel unpacked there)."""
        return self.root / "plugins"

    def ensure(self) -> DataLayout:
        """Create the private directories (0700) and tighten any that already exist."""
        for directory in (
            self.root,
            self.database_dir,
            self.users_db_dir,
            self.homes_dir,
            self.backups_dir,
        ):
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            # mkdir's mode is filtered by the umask and ignored for existing directories,
            # so set it explicitly.
            directory.chmod(DIR_MODE)
        return self
