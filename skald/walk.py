"""Walking, measuring and removing trees a member controls, by directory descriptor.

Rule: below a trusted starting folder, no path string is ever resolved. Every folder is
opened from its parent's descriptor with `O_DIRECTORY | O_NOFOLLOW`, checked with
`fstat` to be the folder that was just listed, and its entries are looked at with
`dir_fd=` and without following links. Symbolic links, FIFOs, sockets and device nodes
are reported as what they are and never followed or opened; files are opened with
`O_NOFOLLOW | O_NONBLOCK` and `fstat`ed to be the regular file that was listed.
Writes below such a folder (`makedirs_at`, `write_file_at`, `copy_tree_into`) work the
same way: folders are made with `mkdir(dir_fd=)` and reopened without following, files
are created `O_EXCL | O_NOFOLLOW` under a temporary name and renamed into place by
descriptor (a rename replaces a link in the way; it never writes through it).

Why: a member has root in a sandbox whose home is bind-mounted from the host, and can
swap any folder of it for a link (to the data directory, to another home) at any moment.
A walker that joins names into paths (`os.walk`, `Path.rglob`, `shutil.copytree`,
`lstat(root/a/b)` ...) follows such a link in the middle of the path, even when it opens
the last component with `O_NOFOLLOW`. Every server-side walk of a member's tree
(backup, ZIP, grep/glob, usage, recursive delete, doctor) goes through this module.

Traps:
- `O_DIRECTORY | O_NOFOLLOW` on a link fails with ENOTDIR, not ELOOP (`open_dir_at`
  tells them apart).
- Depth is capped (`DEFAULT_MAX_DEPTH`): the walk holds one descriptor per level, and a
  member can make a tree thousands of levels deep. What lies deeper is reported.
- Everything blocks: run it in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DIR_FLAGS",
    "Entry",
    "Kind",
    "Usage",
    "copy_tree_into",
    "is_temp_name",
    "kind_of",
    "lstat_at",
    "makedirs_at",
    "open_dir_at",
    "open_file_at",
    "open_tree",
    "opened",
    "remove_tree",
    "temp_name",
    "usage",
    "walk",
    "write_file_at",
]

DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# One descriptor per level is held while walking; deeper content is reported, not walked.
DEFAULT_MAX_DEPTH: Final = 128

# Temporary files of atomic writes and uploads: `.skald-<16 hex>.tmp`. A server killed
# mid-write leaves them behind; they are hidden from listings, ZIPs and backups, and
# removed at the next start.
_TEMP = re.compile(r"\.skald-[0-9a-f]{16}\.tmp")

Kind = Literal["file", "dir", "symlink", "other"]
Report = Callable[[tuple[str, ...], str], None]
Skip = Callable[[tuple[str, ...], str], bool]


def temp_name() -> str:
    return f".skald-{secrets.token_hex(8)}.tmp"


def is_temp_name(name: str) -> bool:
    return _TEMP.fullmatch(name) is not None


def kind_of(mode: int) -> Kind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def lstat_at(fd: int, name: str) -> os.stat_result | None:
    """The entry itself (a link is not followed); None if it is gone."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_dir_at(fd: int, name: str) -> int:
    """The folder `name` in `fd`, never through a link (ELOOP if a link is there)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:
        # O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR: tell a link from a file, and
        # both from an entry that changed since (a folder swapped to and fro).
        st = lstat_at(fd, name)
        if st is None:
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", name) from None
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link is in the way", name) from None
        if stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ESTALE, "changed while it was being opened", name) from None
        raise


def open_tree(base: Path, parts: Sequence[str] = ()) -> int:
    """Open `base` (trusted: chosen by the operator, links allowed) and then each of
    `parts` below it without following links. The caller closes the descriptor."""
    return _descend(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), parts)


def _descend(here: int, parts: Sequence[str], make: int | None = None) -> int:
    """From the open folder `here` down through `parts`, each level opened from the one
    above without following a link; `make`: the mode to create a missing level with
    (None: each must exist). `here` is taken over: every descriptor but the returned
    one is closed, also when a level fails."""
    try:
        for part in parts:
            if make is not None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, make, dir_fd=here)
            child = open_dir_at(here, part)
            os.close(here)
            here = child
    except BaseException:
        os.close(here)
        raise
    return here


def open_file_at(fd: int, name: str, listed: os.stat_result | None = None) -> int:
    """A regular file in folder `fd`, opened for reading without following a link and
    without blocking on a FIFO. `listed` (what a walk saw) must still be what opens:
    anything swapped in meanwhile fails with ESTALE."""
    before = listed if listed is not None else os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISLNK(before.st_mode):
        raise OSError(errno.ELOOP, "a symbolic link is in the way", name)
    if not stat.S_ISREG(before.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", name)
    ffd = os.open(name, READ_FLAGS, dir_fd=fd)
    after = os.fstat(ffd)
    if not stat.S_ISREG(after.st_mode) or not os.path.samestat(before, after):
        os.close(ffd)
        raise OSError(errno.ESTALE, "changed while it was being opened", name)
    return ffd


@dataclass(frozen=True)
class Entry:
    """One entry met by `walk`: `dir_fd` is its folder, valid until the next entry."""

    rel: tuple[str, ...]  # below the walked folder, the entry's own name last
    kind: Kind
    stat: os.stat_result
    dir_fd: int

    @property
    def name(self) -> str:
        return self.rel[-1]

    @property
    def path(self) -> str:
        return "/".join(self.rel)

    def open(self) -> io.FileIO:
        """The file as listed (OSError if it was replaced since)."""
        return io.FileIO(open_file_at(self.dir_fd, self.name, self.stat), "rb", closefd=True)

    def readlink(self) -> str:
        return os.readlink(self.name, dir_fd=self.dir_fd)


# An open folder of a walk: its descriptor, where it is, and the names left to visit.
_Folder = tuple[int, tuple[str, ...], Iterator[str]]


@contextlib.contextmanager
def _open_folders() -> Iterator[list[_Folder]]:
    """The stack of a walk's open folders, one a level: whatever is still on it when the
    walk ends (done, stopped, failed, or a generator closed early) is closed."""
    stack: list[_Folder] = []
    try:
        yield stack
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def walk(
    dir_fd: int,
    *,
    skip: Skip | None = None,
    report: Report | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    stop: threading.Event | None = None,
) -> Generator[Entry, None, None]:
    """Every entry below the open folder `dir_fd`, depth first, by name; a folder comes
    before its content. Links and special files are yielded (as `symlink`, `other`) and
    never followed. `skip(parent_rel, name)` leaves a name out (and its content).
    Folders that cannot be entered (unreadable, replaced by a link meanwhile, deeper
    than `max_depth`) are passed to `report(rel, reason)`. `dir_fd` stays the caller's.
    """
    with _open_folders() as stack:
        first = os.dup(dir_fd)
        try:
            names = sorted(os.listdir(first))  # noqa: PTH208  (by descriptor)
        except BaseException:
            os.close(first)
            raise
        stack.append((first, (), iter(names)))
        while stack:
            if stop is not None and stop.is_set():
                return
            fd, rel, it = stack[-1]
            name = next(it, None)
            if name is None:
                os.close(fd)
                stack.pop()
                continue
            if skip is not None and skip(rel, name):
                continue
            st = lstat_at(fd, name)
            if st is None:
                continue  # removed meanwhile
            item = (*rel, name)
            kind = kind_of(st.st_mode)
            yield Entry(item, kind, st, fd)
            if kind != "dir":
                continue
            if len(item) >= max_depth:
                if report is not None:
                    report(item, f"deeper than {max_depth} levels; not walked")
                continue
            child = _enter(fd, name, st, item, report)
            if child is not None:
                stack.append(child)


def _open_listed(fd: int, name: str, st: os.stat_result, doing: str) -> tuple[int, list[str]]:
    """The folder `name` of `fd`, opened by descriptor (never through a link) and listed,
    once it is checked to be the folder `st` describes: one swapped in since the lstat
    raises ESTALE ("replaced while it was being <doing>"). Errors are the open's (a
    FileNotFoundError: removed meanwhile; ELOOP: a link is there now) or the listing's;
    the descriptor is closed before any leaves."""
    child = open_dir_at(fd, name)
    try:
        if not os.path.samestat(st, os.fstat(child)):
            raise OSError(errno.ESTALE, f"replaced while it was being {doing}", name)
        return child, os.listdir(child)  # noqa: PTH208
    except BaseException:
        os.close(child)
        raise


def _enter(
    fd: int, name: str, st: os.stat_result, item: tuple[str, ...], report: Report | None
) -> _Folder | None:
    try:
        child, names = _open_listed(fd, name, st, "read")
    except FileNotFoundError:
        return None  # removed meanwhile
    except OSError as exc:
        if report is not None:
            report(item, _reason(exc))
        return None
    return child, item, iter(sorted(names))


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "not readable by the service account"
    if exc.errno == errno.ELOOP:
        return "replaced by a symbolic link while it was being read; not followed"
    if exc.errno in (errno.ENOTDIR, errno.ESTALE):
        return "replaced while it was being read"
    return exc.strerror or str(exc)


# -- measuring --------------------------------------------------------------------------


@dataclass
class Usage:
    """What a tree takes: `allocated` is what the disk gives it (sparse files count
    what they hold, preallocated ones what they reserve), `apparent` the sum of sizes.
    Hard links count once."""

    allocated: int = 0
    apparent: int = 0
    files: int = 0
    dirs: int = 0
    incomplete: list[str] = field(default_factory=list)  # what could not be measured


def usage(
    base: Path,
    parts: Sequence[str] = (),
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    stop: threading.Event | None = None,
) -> Usage:
    """The size of the tree at `base/parts` (`parts` opened without following links)."""
    out = Usage()
    seen: set[tuple[int, int]] = set()

    def note(rel: tuple[str, ...], why: str) -> None:
        out.incomplete.append(f"{'/'.join(rel)}: {why}")

    fd = open_tree(base, parts)
    try:
        top = os.fstat(fd)
        out.allocated += top.st_blocks * 512
        for entry in walk(fd, report=note, max_depth=max_depth, stop=stop):
            st = entry.stat
            if entry.kind == "dir":
                out.dirs += 1
            elif entry.kind == "file":
                out.files += 1
            if st.st_nlink > 1 and entry.kind != "dir":
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            out.allocated += st.st_blocks * 512
            if entry.kind != "dir":
                out.apparent += st.st_size
    finally:
        os.close(fd)
    return out


# -- removing ---------------------------------------------------------------------------


def remove_tree(parent_fd: int, name: str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> list[str]:
    """Remove `name` in folder `parent_fd` and everything below it, never through a
    link (a link is removed, not what it points to), carrying on past what cannot be
    removed. Returns what is left (`path: reason`, relative to the parent); empty when
    all is gone. A `name` that does not exist is not an error.
    """
    left: list[str] = []
    st = lstat_at(parent_fd, name)
    if st is None:
        return left
    if not stat.S_ISDIR(st.st_mode):
        _remove(os.unlink, parent_fd, name, (name,), left)
        return left
    _remove_dir(parent_fd, name, st, (name,), left, max_depth)
    return left


def _remove(
    remove: Callable[..., None], fd: int, name: str, rel: tuple[str, ...], left: list[str]
) -> None:
    """`os.unlink` or `os.rmdir` of `name` in `fd`; what fails is noted in `left`."""
    try:
        remove(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY and any(p.startswith("/".join(rel) + "/") for p in left):
            return  # a folder's content that stayed was already reported
        left.append(f"{'/'.join(rel)}: {_removal_reason(exc)}")


def _removal_reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (made by another user, e.g. root in the sandbox?)"
    if exc.errno == errno.EBUSY:
        return "busy (a mount point?)"
    if exc.errno == errno.ENOTEMPTY:
        return "not empty (something inside could not be removed, or was added meanwhile)"
    return exc.strerror or str(exc)


def _remove_dir(
    parent: int,
    name: str,
    st: os.stat_result,
    rel: tuple[str, ...],
    left: list[str],
    max_depth: int,
) -> None:
    """Post-order with an explicit stack: (folder fd, rel, names left, its stat)."""
    with _open_folders() as stack:
        top = _open_for_removal(parent, name, st, rel, left)
        if top is None:
            return
        stack.append(top)
        while stack:
            fd, here, it = stack[-1]
            child = next(it, None)
            if child is None:
                os.close(fd)
                stack.pop()
                at = stack[-1][0] if stack else parent
                _remove(os.rmdir, at, here[-1], here, left)
                continue
            cst = lstat_at(fd, child)
            if cst is None:
                continue
            crel = (*here, child)
            if not stat.S_ISDIR(cst.st_mode):
                _remove(os.unlink, fd, child, crel, left)
                continue
            if len(crel) > max_depth:
                left.append(f"{'/'.join(crel)}: deeper than {max_depth} levels")
                continue
            opened = _open_for_removal(fd, child, cst, crel, left)
            if opened is not None:
                stack.append(opened)


def _open_for_removal(
    fd: int, name: str, st: os.stat_result, rel: tuple[str, ...], left: list[str]
) -> _Folder | None:
    try:
        child, names = _open_listed(fd, name, st, "removed")
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link: remove the link itself
            _remove(os.unlink, fd, name, rel, left)
        else:
            left.append(f"{'/'.join(rel)}: {_removal_reason(exc)}")
        return None
    return child, rel, iter(names)


@contextlib.contextmanager
def opened(base: Path, parts: Sequence[str] = ()) -> Iterator[int]:
    """`open_tree` as a context manager."""
    fd = open_tree(base, parts)
    try:
        yield fd
    finally:
        os.close(fd)


# -- writing ----------------------------------------------------------------------------

WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
COPY_CHUNK: Final = 1 << 20


def makedirs_at(fd: int, parts: Sequence[str], mode: int = 0o755) -> int:
    """The folder `parts` below the open folder `fd`, made where missing, each level
    reopened without following a link (ELOOP if one is in the way). `fd` stays the
    caller's; the returned descriptor is the caller's to close."""
    return _descend(os.dup(fd), parts, make=mode)


def _write_all(fd: int, data: bytes | io.RawIOBase | io.BufferedIOBase) -> None:
    if isinstance(data, bytes):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view[:COPY_CHUNK]) :]
        return
    while chunk := data.read(COPY_CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def write_file_at(
    fd: int, name: str, data: bytes | io.RawIOBase | io.BufferedIOBase, mode: int = 0o644
) -> None:
    """`name` in the open folder `fd` becomes a regular file holding `data`, atomically:
    written to a fresh temporary file (`O_EXCL | O_NOFOLLOW`), then renamed over `name`
    by descriptor. A link at `name` is replaced, never written through; a folder there
    is an error (EISDIR)."""
    temp = temp_name()
    tfd = os.open(temp, WRITE_FLAGS, mode, dir_fd=fd)
    try:
        _write_all(tfd, data)
        os.fchmod(tfd, mode)
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        raise
    finally:
        os.close(tfd)


def copy_tree_into(src_fd: int, dest_fd: int, *, max_depth: int = DEFAULT_MAX_DEPTH) -> int:
    """Copy the content of the open folder `src_fd` into the open, empty folder
    `dest_fd`, both by descriptor: folders and regular files (with their permission
    bits) only; a link, special file or unreadable folder in the source is an error.
    Nothing is ever opened in the destination by a path: a link the member puts there
    meanwhile makes the copy fail (EEXIST, ELOOP), it is never followed. Returns the
    number of files copied."""
    problems: list[str] = []

    def note(rel: tuple[str, ...], why: str) -> None:
        problems.append(f"{'/'.join(rel)}: {why}")

    # The destination folders open along the walk's current branch (depth first).
    branch: list[tuple[tuple[str, ...], int]] = [((), os.dup(dest_fd))]
    copied = 0
    try:
        for entry in walk(src_fd, report=note, max_depth=max_depth):
            while branch[-1][0] != entry.rel[:-1]:
                os.close(branch.pop()[1])
            parent = branch[-1][1]
            perms = stat.S_IMODE(entry.stat.st_mode) & 0o755
            if entry.kind == "dir":
                os.mkdir(entry.name, perms | 0o700, dir_fd=parent)
                branch.append((entry.rel, open_dir_at(parent, entry.name)))
            elif entry.kind == "file":
                with entry.open() as source:
                    _copy_new(parent, entry.name, source, perms | 0o600)
                copied += 1
            else:
                raise OSError(errno.EINVAL, f"not a file or folder: {entry.path}")
    finally:
        for _, fd in branch:
            os.close(fd)
    if problems:
        raise OSError(errno.EIO, "could not copy " + "; ".join(problems[:3]))
    return copied


def _copy_new(fd: int, name: str, source: io.RawIOBase, mode: int) -> None:
    out = os.open(name, WRITE_FLAGS, mode, dir_fd=fd)
    try:
        _write_all(out, source)
        os.fchmod(out, mode)
    finally:
        os.close(out)
