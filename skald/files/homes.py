"""Sweeps over every member's home: writes a killed server left half done, files only
root can have made (for `skald doctor`), and what older versions let land in the
folders the groups of shared places reserve (`shared`, `projects`, `skills`).

Rule: homes are member-controlled trees, so both sweeps walk them by descriptor
(`skald.walk`) and never follow a link. Each home is opened below the trusted
`homes/` folder without following a link either.

Traps:
- The leftover sweep runs while the server already serves: it removes only temporary
  files older than the server's start (a new upload's file is younger), and only names
  of the exact shape Skald makes (`.skald-<16 hex>.tmp`).
- Homes can be large: the sweeps block for a while; run them in a thread.
- The groups' sweep never moves a folder where the sandbox may have mounted something
  (`~/shared/<slug>`, `~/projects/<owner>/<slug>` and the folders above): a container
  made by an older version may still have a shared place bound there, and a moved
  mountpoint would carry that mount along. It moves what is inside them instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skald import walk as tree
from skald.files.mounts import GROUPS
from skald.log import get_logger
from skald.paths import validate_user_id

__all__ = [
    "HomeProblem",
    "home_problems",
    "move_out_of_groups",
    "move_out_of_home_groups",
    "own_name",
    "remove_home",
    "remove_partial_writes",
]

log = get_logger("skald.files.homes")


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


def remove_place(place: Path) -> list[str]:
    """Delete a folder of the member's outside their home (`skald_private_places`), by
    descriptor from its parent, as `remove_home` does; returns what is left."""
    try:
        fd = tree.open_tree(place.parent)
    except FileNotFoundError:
        return []
    try:
        return [f"{place.parent.name}/{line}" for line in tree.remove_tree(fd, place.name)]
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


def own_name(group: str, n: int = 1) -> str:
    """Where a home's own `shared` folder goes: `shared (own)`, `shared (own 2)`…"""
    return f"{group} (own)" if n == 1 else f"{group} (own {n})"


def move_out_of_groups(homes_dir: Path) -> list[str]:
    """Move what members have in their homes' `shared`, `projects` and `skills` folders
    to `shared (own)` (…), keeping each item's path below it; returns what moved
    (`<user id>/<path>`). Since those names are reserved (`skald.files.mounts.GROUPS`)
    neither Skald's file tools nor the sandbox show such a folder of the home any more,
    so its files would be out of reach. Idempotent: run at every start, it finds nothing
    once the folders hold only (empty) mountpoints. A name taken in the target gets
    ` (2)`, ` (3)`…; an item that cannot be moved is logged and left."""
    moved: list[str] = []
    for user_id in _homes(homes_dir):
        moved += [f"{user_id}/{path}" for path in move_out_of_home_groups(homes_dir, user_id)]
    return moved


def move_out_of_home_groups(homes_dir: Path, user_id: str) -> list[str]:
    """`move_out_of_groups` for one home (the sandbox manager's, before it makes the
    mountpoints there: a file or link at `~/shared` moves aside instead of blocking)."""
    try:
        home = tree.open_tree(homes_dir, (validate_user_id(user_id),))
    except (OSError, ValueError):
        return []  # not a folder, or a link: nothing of ours is in there
    try:
        return [
            path
            for group, spec in GROUPS.items()
            for path in _move_group(home, group, spec.names, user_id)
        ]
    finally:
        os.close(home)


def _move_group(home: int, group: str, keep: int, user_id: str) -> list[str]:
    st = tree.lstat_at(home, group)
    if st is None:
        return []
    moved: list[str] = []

    def visit(fd: int, rel: tuple[str, ...]) -> None:
        for name in sorted(os.listdir(fd)):
            item = tree.lstat_at(fd, name)
            if item is None:
                continue
            path = "/".join((group, *rel, name))
            try:
                if stat.S_ISDIR(item.st_mode) and len(rel) < keep:
                    child = tree.open_dir_at(fd, name)
                    try:
                        visit(child, (*rel, name))
                    finally:
                        os.close(child)
                else:
                    _move(home, fd, name, group, rel)
                    moved.append(path)
            except OSError as exc:
                log.warning("left in a reserved folder", user_id=user_id, path=path, error=str(exc))

    if not stat.S_ISDIR(st.st_mode):  # a file or a link named like the group
        _move(home, home, group, group, None)
        return [group]
    top = tree.open_dir_at(home, group)
    try:
        visit(top, ())
    finally:
        os.close(top)
    return moved


def _move(home: int, fd: int, name: str, group: str, rel: tuple[str, ...] | None) -> None:
    """`name` (in folder `fd`) to the same path below `<group> (own)`; `rel` None: the
    group's own entry, which becomes `<group> (own)` itself."""
    for n in range(1, 100):
        if rel is None:
            if tree.lstat_at(home, own_name(group, n)) is None:
                os.rename(name, own_name(group, n), src_dir_fd=fd, dst_dir_fd=home)
                return
            continue
        try:
            target = tree.makedirs_at(home, (own_name(group, n), *rel))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST, errno.ESTALE):
                continue  # something else by that name: the next `(own n)`
            raise
        try:
            os.rename(name, _free(target, name), src_dir_fd=fd, dst_dir_fd=target)
        finally:
            os.close(target)
        return
    raise OSError(errno.EEXIST, "no free name", own_name(group))


def _free(fd: int, name: str) -> str:
    """`name`, or `name (2)`, `name (3)`… (the suffix before the extension), free in `fd`."""
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    for n in range(1, 1000):
        candidate = name if n == 1 else f"{stem} ({n}){dot}{suffix}"
        if tree.lstat_at(fd, candidate) is None:
            return candidate
    raise OSError(errno.EEXIST, "no free name", name)
