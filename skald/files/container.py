"""Paths that exist only inside the member's own sandbox container (`/tmp/build/out.csv`).

Rule: an absolute path outside every mount's container path (`PathRouter.container_only`)
is not on the host at all; the file tools reach it through the member's container
(`ContainerPaths`, implemented by `skald.sandbox.files.ContainerFiles`: `docker exec` as
the member's uid, the path passed as an argument to a fixed program, never put into a
shell string). Mounted paths (`/home/skald/…`, a plugin's `/srv/…`) keep the host path.
Only members whose role may run commands (`sandbox.exec`) have one.

Trap: the container follows its own links: `/tmp/x` may point into the home, and
that is fine (it is the member's own home as their container sees it), but such a call
is judged by the approval rules as the absolute path it names (a rule without a path
pattern decides: by default, a person is asked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from skald.errors import SkaldError

__all__ = ["ContainerEntry", "ContainerPathError", "ContainerPathMissing", "ContainerPaths"]


class ContainerPathError(SkaldError):
    """A container path could not be reached or used; the text is a plain sentence."""

    code = "container_path"


class ContainerPathMissing(ContainerPathError):
    """Nothing is at the path in the container."""

    code = "not_found"


@dataclass(frozen=True)
class ContainerEntry:
    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: str  # ISO 8601, UTC, seconds


class ContainerPaths(Protocol):
    """One member's container, as the file tools reach it (paths are absolute)."""

    async def read(self, path: str, limit: int) -> bytes:
        """The bytes of a regular file of at most `limit` bytes."""
        ...

    async def write(self, path: str, data: bytes) -> bool:
        """Replace or create the file (folders made); True when it was created."""
        ...

    async def listing(
        self, path: str, limit: int
    ) -> tuple[ContainerEntry, list[ContainerEntry], bool]:
        """(the entry at `path`, its children if a folder (at most `limit`), cut?)."""
        ...
