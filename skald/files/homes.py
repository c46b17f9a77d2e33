"""Sweeps over every member's home: writes a killed server left half done, and files
only root can have made (for `skald doctor`).

Rule: homes are member-controlled trees, so both sweeps walk them by descriptor
(`skald.walk`) and never follow a link. Each home is opened below the trusted
`homes/` folder without following a link either.

Traps:
- The leftover sweep runs while the server already serves: it removes only temporary
  files older than the server's start (a new upload's file is younger), and only names
  of the exact shape Skald makes (`.skald-<16 hex>.tmp`).
- Homes can be large: both sweeps block for a while; run them in a thread.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skald import walk as tree
from skald.paths import validate_user_id

__all__ = ["HomeProblem", "home_problems", "remove_home", "remove_partial_writes"]


def _homes(homes_dir: Path) -> list[str]:
    try:
        names = sorted(os.listdir(homes_dir))  # noqa: PTH208
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        with contextlib.suppress(ValueError):
            out.append(validate_user_id(name))
    return out


def remove_partial_writes(
    homes_dir: Path, before: float, stop: threading.Event | None = None
) -> list[str]:
    """Remove the temporary files of uploads and writes cut off by a crash or kill -9
    (older than `before`, a time stamp) from every home; returns what was removed
    (`<user id>/<path>`). `stop` ends the sweep early (the server is shutting down)."""
    removed: list[str] = []
    for user_id in _homes(homes_dir):
        if stop is not None and stop.is_set():
            break
        try:
            fd = tree.open_tree(homes_dir, (user_id,))
        except OSError:
            continue  # not a folder, or a link: nothing of ours is in there
        try:
            for entry in tree.walk(fd, stop=stop):
                st = entry.stat
                if entry.kind == "file" and tree.is_temp_name(entry.name) and st.st_mtime < before:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=entry.dir_fd)
                        removed.append(f"{user_id}/{entry.path}")
        finally:
            os.close(fd)
    return removed


def remove_home(homes_dir: Path, user_id: str) -> list[str]:
    """Delete a member's home, by descriptor, carrying on past what cannot be removed
    (what root made in the sandbox, when the service account is not root). Returns what
    is left (`<user id>/<path>: reason`); empty when the home is gone."""
    validate_user_id(user_id)
    try:
        fd = tree.open_tree(homes_dir)
    except FileNotFoundError:
        return []
    try:
        return tree.remove_tree(fd, user_id)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class HomeProblem:
    """Something in a home that only root can have made, or that can hurt the host."""

    user_id: str
    path: str  # below the home
    kind: Literal["foreign", "setid", "device"]
    detail: str


def home_problems(homes_dir: Path, uid: int, limit: int = 1000) -> list[HomeProblem]:
    """Files and folders in the homes owned by another user than `uid` (the service
    account), with a setuid/setgid bit, or device nodes; at most `limit` of them."""
    found: list[HomeProblem] = []
    for user_id in _homes(homes_dir):
        try:
            fd = tree.open_tree(homes_dir, (user_id,))
        except OSError:
            continue
        try:
            top = os.fstat(fd)
            if top.st_uid != uid:
                found.append(HomeProblem(user_id, ".", "foreign", f"owned by uid {top.st_uid}"))
            for entry in tree.walk(fd):
                problem = _problem(user_id, entry.path, entry.stat, uid)
                if problem is not None:
                    found.append(problem)
                    if len(found) >= limit:
                        return found
        finally:
            os.close(fd)
    return found


def _problem(user_id: str, path: str, st: os.stat_result, uid: int) -> HomeProblem | None:
    mode = st.st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "character" if stat.S_ISCHR(mode) else "block"
        return HomeProblem(user_id, path, "device", f"a {kind} device node")
    if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
        bits = "setuid" if mode & stat.S_ISUID else "setgid"
        return HomeProblem(user_id, path, "setid", f"{bits}, owned by uid {st.st_uid}")
    if st.st_uid != uid:
        return HomeProblem(user_id, path, "foreign", f"owned by uid {st.st_uid}")
    return None
