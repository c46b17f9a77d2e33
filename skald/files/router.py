"""The path router: which place an agent path names, and safe operations on it.

Places a member can reach (DESIGN.md C4) are the member's mounts (`skald.files.mounts`,
one list shared with the sandbox, filled by the `skald_mounts` hook). Today:
- their home `data/homes/<user_id>/` (read-write): `~`, `~/…`, relative paths,
  `uploads/…`, and `/home/skald/…` (the same folder as the sandbox sees it);
- the manual (read-only): `docs/…`, also `~/docs/…` (the sandbox mounts it there);
- the two virtual note stores `user-memory/…` and `shared-memory/…`: not folders at all.
  The router only reports them (`Virtual`); the note tools and the note stores own them.
- the shared places the member was given: `shared/<slug>/…`, `projects/<owner>/<slug>/…`,
  `skills/shared/…`, `skills/mine/…`. Those group names are never the home's folders: a
  path under one that names no mount of the member is refused ("you have no access to
  the shared folder 'x'"), so a revoked member's write never lands privately in the home.
A mount's prefix names it at the top of a path (`docs/x`, `~/docs/x`), and an absolute
path under a mount's container path names it the way the sandbox sees it.

Rules (rules and traps in `docs/dev/files.md`):
- Parsing is lexical and strict: text only, bounded length, no `..` anywhere, no
  absolute host path, no `~other` home. Names follow one rule, `checked_name` (used by
  `parse` for every path and by `upload_name`): no control characters (Cc, NUL
  included) and no format characters (Cf: U+202E and the other bidirectional overrides,
  zero-width characters), normalised to NFC. Trap: a name made in the sandbox that is
  not NFC is listed but cannot be reached by its decomposed spelling.
- Every physical path is resolved with symlinks followed (`os.path.realpath`) and must
  stay inside its resolved mount root; anything else is refused, never "fixed".
- Operations never trust that answer for long: they open the path again from the mount
  root one component at a time with `O_NOFOLLOW` (`_opendir`), so a symlink swapped in
  after resolution fails the operation instead of redirecting it. Files must be regular
  files (FIFOs and device nodes planted from a container are never opened).
- Deleting and renaming resolve only the parent: the final component is the link
  itself, never what it points at.
- Writes need a writable place; directories created on the way are opened with
  `O_NOFOLLOW` right after `mkdir`, and the parent's real location is checked again.

Everything here is synchronous file-system work: callers on the event loop run it in a
thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import itertools
import mimetypes
import os
import stat
import threading
import time
import unicodedata
import zipfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import msgspec

from skald import walk as tree
from skald.assets import asset_dir
from skald.errors import (
    ConflictError,
    DiskFullError,
    InvalidInputError,
    NotFoundError,
    SkaldError,
)
from skald.files.lookalike import look_alike_reason
from skald.files.mounts import (
    DOCS_MOUNT,
    GROUPS,
    HOME_MOUNT,
    MemberMount,
    check_mounts,
    docs_mount,
    home_mount,
    note_mounts,
)
from skald.paths import CONTAINER_HOME, DataLayout
from skald.store.note_paths import SHARED_MEMORY, USER_MEMORY

__all__ = [
    "CONTAINER_HOME",
    "DOCS_MOUNT",
    "HOME_MOUNT",
    "FileEntry",
    "FileSystemError",
    "MemberMount",
    "NewFile",
    "PathDeniedError",
    "PathRouter",
    "Place",
    "ReadOnlyError",
    "Resolved",
    "Virtual",
    "WalkItem",
    "checked_name",
    "delete",
    "docs_mount",
    "entry_for",
    "guess_mime",
    "home_mount",
    "is_binary",
    "list_dir",
    "make_dir",
    "note_mounts",
    "open_read",
    "rename",
    "upload_name",
    "walk",
    "write_bytes",
    "zip_stream",
]


MAX_PATH_CHARS: Final = 4096  # PATH_MAX
MAX_NAME_BYTES: Final = 255  # NAME_MAX
MAX_DEPTH: Final = 64  # components below a mount root
DIR_MODE: Final = 0o755
FILE_MODE: Final = 0o644
CHUNK: Final = 64 * 1024

_READ_FLAGS: Final = tree.READ_FLAGS

PLACES_HINT: Final = (
    "Reachable places: your home (~/…, uploads/…), the manual (docs/…, read-only) "
    f"and the notes ({USER_MEMORY}/…, {SHARED_MEMORY}/…)."
)


class PathDeniedError(SkaldError):
    """The path leaves the member's places (escape, another home, a planted link)."""

    code = "forbidden"


class ReadOnlyError(PathDeniedError):
    """A write to a place that is read-only (the manual, the notes in the Files API)."""

    code = "read_only"


class FileSystemError(SkaldError):
    """The file system refused an operation for a reason not covered by the others."""

    code = "file_error"


# -- what a path names ----------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """A physical place: `prefix` is how agent paths name its root (`~`, `docs`)."""

    name: str
    prefix: str
    root: Path
    writable: bool
    label: str
    container_path: str | None = None
    quota_owner: str | None = None  # whose quota a write here counts against


@dataclass(frozen=True)
class Resolved:
    """A physical path inside a mount, resolved and checked.

    `parts` is the path below the resolved `root`, component by component (empty for
    the root itself); operations reopen it from `root` without following links.
    """

    mount: str
    root: Path
    path: Path
    writable: bool
    agent_path: str
    parts: tuple[str, ...]

    virtual: Literal[False] = False
    # Names at the top of the home that route to other mounts (the sandbox mounts over
    # them) or are a group's (`shared`): listings, walks and ZIPs of the home leave real
    # folders of those names out.
    shadowed: frozenset[str] = frozenset()
    # Whose storage quota a write here counts against (None: the caller's own).
    quota_owner: str | None = None

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else self.agent_path

    @property
    def is_root(self) -> bool:
        return not self.parts


@dataclass(frozen=True)
class Virtual:
    """A path into a note store: `agent_path` is canonical (`user-memory/people/ada.md`)."""

    store: str  # the note store's name (its mount prefix)
    agent_path: str
    relative: str  # below the store, "" for the store itself; may end with "/"

    virtual: Literal[True] = True
    writable: Literal[False] = False  # through files; the note tools decide for notes

    @property
    def mount(self) -> str:
        return self.store


class FileEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a listing, as the Files API and the tools show it."""

    name: str
    path: str  # agent path
    type: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: str | None  # ISO 8601, UTC
    mime: str | None = None


class Place(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    path: str  # the agent path of its root
    label: str
    writable: bool
    virtual: bool = False


def _denied(raw: str, why: str) -> PathDeniedError:
    return PathDeniedError(f"{_shown(raw)} is not reachable: {why}. {PLACES_HINT}")


def _ungranted(raw: str, head: str, below: list[str], table: _Table) -> PathDeniedError:
    """A path into a group of shared places that names none of the member's."""
    group = GROUPS[head]
    yours = sorted(f"{prefix}/" for prefix in table.named if prefix.startswith(head + "/"))
    held = f"yours: {', '.join(yours)}" if yours else f"you have no {group.noun}s"
    if len(below) < group.names:
        why = f"{head}/ holds the household's {group.noun}s ({group.pattern}; {held})"
    else:
        name = "/".join(below[: group.names])
        why = f"you have no access to the {group.noun} {name!r} ({held})"
    return PathDeniedError(
        f"{_shown(raw)} is not reachable: {why}. Nothing was read or written; files of "
        f"your own belong elsewhere in your home, never under {head}/."
    )


def _invalid(raw: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"invalid path {_shown(raw)}: {why}")


def _shown(raw: str) -> str:
    text = raw if len(raw) <= 80 else raw[:77] + "..."
    return repr(text)


_BAD_CATEGORIES: Final = frozenset({"Cc", "Cf"})


def _bad_character(text: str) -> bool:
    return any(unicodedata.category(ch) in _BAD_CATEGORIES for ch in text)


def checked_name(raw: str) -> str:
    """The one rule for file and folder names (a single name or a whole path): refuse
    control characters and format characters, which make a name read differently from
    what it is ("photo<U+202E>gnp.exe" shows as "photoexe.png"); return it in NFC, the
    form the approval rules compare (`skald.approvals.rules.normalise_path`)."""
    if _bad_character(raw):
        raise InvalidInputError(
            f"invalid name {_shown(raw)}: control characters (NUL included) and format "
            "characters (such as the direction override U+202E) are not allowed"
        )
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"invalid name {_shown(raw)}: not valid Unicode text") from None
    name = unicodedata.normalize("NFC", raw)
    reason = look_alike_reason(name)  # invisible characters, look-alikes (lookalike.py)
    if reason is not None:
        raise InvalidInputError(f"invalid name {_shown(raw)}: {reason}")
    return name


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class _Table:
    """A router's lookup tables for one list of mounts (the home first)."""

    member_mounts: list[MemberMount]
    home: Mount
    named: dict[str, Mount]  # by prefix; a prefix may be several names (`shared/photos`)
    deepest: int  # the most names in a prefix
    virtual: frozenset[str]
    shadowed: frozenset[str]  # prefixes the sandbox mounts over inside the home
    in_container: list[Mount]  # absolute paths as the sandbox sees them, longest first

    @classmethod
    def of(cls, mounts: list[MemberMount]) -> _Table:
        physical = [
            Mount(
                m.name,
                m.prefix,
                m.host_path,
                not m.read_only,
                m.label,
                m.container_path,
                m.quota_owner,
            )
            for m in mounts
            if m.host_path is not None and not m.sandbox_only
        ]
        named = {m.prefix: m for m in physical[1:]}
        return cls(
            member_mounts=mounts,
            home=physical[0],
            named=named,
            deepest=max((p.count("/") + 1 for p in named), default=1),
            virtual=frozenset(m.prefix for m in mounts if m.virtual),
            # The groups' names too (`shared`): the home's folders of those names are
            # not the member's (the sandbox's mountpoints, leftovers of older versions).
            shadowed=frozenset(m.prefix for m in mounts if not m.is_home and not m.sandbox_only)
            | frozenset(GROUPS),
            in_container=sorted(
                (m for m in physical if m.container_path),
                key=lambda m: len(m.container_path or ""),
                reverse=True,
            ),
        )


class PathRouter:
    """One member's view of their mounts: home, the manual, the note stores, more.

    Parsing (`parse`) is pure; `resolve` also asks the file system where links lead.
    `PathRouter(home, docs)` is the built-in places alone (tests, uploads); the member's
    full list comes from `mounts=` (the runtime collects it from the mounts hook).
    """

    def __init__(
        self,
        home: Path | None = None,
        docs: Path | None = None,
        *,
        mounts: list[MemberMount] | None = None,
        live: Callable[[], list[MemberMount]] | None = None,
    ) -> None:
        if mounts is None:
            if live is not None:
                mounts = live()
            elif home is None:
                raise ValueError("a router needs a home or a list of mounts")
            else:
                mounts = [home_mount(home), *([docs_mount(docs)] if docs else []), *note_mounts()]
        # `live`: the member's list as it is now, asked again at every path (a shared
        # folder granted or revoked reaches a turn's tools at its very next call).
        self._live = live
        self._given = mounts
        self._table = _Table.of(check_mounts(mounts))

    def _now(self) -> _Table:
        """The tables to use for one path (one object: a refresh never mixes two lists)."""
        if self._live is not None:
            given = self._live()
            # The same list as last time is the same table (the check is pure): a turn's
            # tools ask at every path, and the list rarely changes.
            if given != self._given:
                self._table = _Table.of(check_mounts(given))
                self._given = given
        return self._table

    @property
    def member_mounts(self) -> list[MemberMount]:
        return self._now().member_mounts

    @property
    def home(self) -> Mount:
        return self._table.home

    @property
    def shadowed(self) -> frozenset[str]:
        return self._now().shadowed

    @classmethod
    def for_member(cls, layout: DataLayout, user_id: str) -> PathRouter:
        """The built-in places only (home, manual, notes): enough for the home alone."""
        return cls(layout.home(user_id), asset_dir("docs"))

    @property
    def docs(self) -> Mount | None:
        return self._now().named.get(DOCS_MOUNT)

    @property
    def mounts(self) -> list[Mount]:
        table = self._now()
        return [table.home, *table.named.values()]

    def places(self) -> list[Place]:
        return [
            Place(name=m.name, path=m.prefix, label=m.label, writable=m.writable)
            for m in self.mounts
        ]

    def ensure_home(self) -> None:
        """Create the home folder (0700) if it is missing; a home that is a link is refused."""
        home = self.home.root
        if home.is_symlink():
            raise PathDeniedError("the home folder is a symbolic link; refusing to use it")
        home.mkdir(mode=0o700, parents=False, exist_ok=True)

    # -- lexical ----------------------------------------------------------------------

    def container_only(self, raw: object) -> str | None:
        """`raw` as a path inside the member's container when it is absolute and outside
        every mount's container path (`skald.files.container`); None otherwise. Any
        character but NUL may be in it (it is only ever an argument, never shell text);
        `..` is refused, as everywhere."""
        if not isinstance(raw, str) or not raw.replace("\\", "/").startswith("/"):
            return None
        text = raw.replace("\\", "/")
        for mount in self._now().in_container:
            where = mount.container_path or ""
            if text == where or text.startswith(where + "/"):
                return None
        if len(text) > MAX_PATH_CHARS or "\0" in text:
            raise _invalid(raw, f"NUL or longer than {MAX_PATH_CHARS} characters")
        segments = [s for s in text.split("/") if s not in ("", ".")]
        if any(s == ".." for s in segments):
            raise _invalid(raw, "'..' is not allowed; write the whole path")
        return "/" + "/".join(segments)

    def parse(self, raw: object) -> tuple[Mount, list[str]] | Virtual:
        """Which place `raw` names and the components below its root (no I/O)."""
        if not isinstance(raw, str):
            raise InvalidInputError("a path must be text")
        if len(raw) > MAX_PATH_CHARS:
            raise _invalid(raw, f"longer than {MAX_PATH_CHARS} characters")
        if not raw:
            raise _invalid(raw, "empty; use ~ for your home")
        text = checked_name(raw).replace("\\", "/")
        table = self._now()
        direct: Mount | None = None  # an absolute path under a mount's container path
        if text.startswith("/"):
            for mount in table.in_container:
                where = mount.container_path or ""
                if text == where or text.startswith(where + "/"):
                    text = text[len(where) :]
                    direct = None if mount is table.home else mount
                    break
            else:
                raise _denied(raw, "absolute paths lead outside your places; write ~/… instead")
        elif text.startswith("~"):
            if text != "~" and not text.startswith("~/"):
                raise _denied(raw, "~ is your own home; other homes cannot be reached")
            text = text[1:]
        segments = [s for s in text.split("/") if s not in ("", ".")]
        if ".." in segments:
            raise _invalid(raw, "'..' is not allowed; write the path from ~ or docs/")
        if len(segments) > MAX_DEPTH + 1:
            raise _invalid(raw, f"more than {MAX_DEPTH} levels deep")
        for segment in segments:
            if len(segment.encode("utf-8")) > MAX_NAME_BYTES:
                raise _invalid(raw, f"a name is longer than {MAX_NAME_BYTES} bytes")
        if direct is not None:
            return direct, segments
        head = segments[0] if segments else ""
        if head in table.virtual:
            relative = "/".join(segments[1:])
            if relative and text.endswith("/"):
                relative += "/"
            return Virtual(head, f"{head}/{relative}", relative)
        # The longest prefix wins: `shared/photos/x` names the mount `shared/photos`.
        for depth in range(min(len(segments), table.deepest), 0, -1):
            named = table.named.get("/".join(segments[:depth]))
            if named is not None:
                return named, segments[depth:]
        if head == DOCS_MOUNT:
            raise _denied(raw, "the manual is not available here")
        if head in GROUPS:  # never the home's own folder (see skald.files.mounts)
            raise _ungranted(raw, head, segments[1:], table)
        return table.home, segments

    def is_virtual(self, raw: object) -> bool:
        try:
            return isinstance(self.parse(raw), Virtual)
        except SkaldError:
            return False

    # -- physical ---------------------------------------------------------------------

    def _root(self, mount: Mount) -> str:
        root = mount.root
        if mount.name == HOME_MOUNT and root.is_symlink():
            raise PathDeniedError("the home folder is a symbolic link; refusing to use it")
        return _realpath(str(root), mount.prefix)

    def resolve(self, raw: object, *, follow_final: bool = True) -> Resolved | Virtual:
        """Resolve `raw` (links followed) and check it stays inside its mount root.

        `follow_final=False` resolves only the parent and keeps the last component as
        written: what delete and rename must act on (the link, not its target).
        """
        parsed = self.parse(raw)
        if isinstance(parsed, Virtual):
            return parsed
        mount, segments = parsed
        assert isinstance(raw, str)
        root = self._root(mount)
        if follow_final or not segments:
            real = _realpath(os.path.join(root, *segments), raw)  # noqa: PTH118
        else:
            parent = _realpath(os.path.join(root, *segments[:-1]), raw)  # noqa: PTH118
            if not _inside(parent, root):
                raise _escape(raw, mount)
            real = os.path.join(parent, segments[-1])  # noqa: PTH118
        if not _inside(real, root):
            raise _escape(raw, mount)
        parts = tuple(Path(real).relative_to(root).parts) if real != root else ()
        if len(parts) > MAX_DEPTH:
            raise _invalid(raw, f"more than {MAX_DEPTH} levels deep")
        return Resolved(
            mount=mount.name,
            root=Path(root),
            path=Path(real),
            writable=mount.writable,
            agent_path=_agent_path(mount, parts),
            parts=parts,
            shadowed=self._table.shadowed if mount.name == HOME_MOUNT else frozenset(),
            quota_owner=mount.quota_owner,
        )

    def physical(self, raw: object, *, follow_final: bool = True) -> Resolved:
        """Like `resolve`, but a note path is an error (for callers that need a file)."""
        found = self.resolve(raw, follow_final=follow_final)
        if isinstance(found, Virtual):
            raise InvalidInputError(
                f"{found.agent_path} is in the note store, not a folder on disk; "
                "the memory tools (read_file, write_file, edit_file, list_files, "
                "memory_search) reach it"
            )
        return found

    def writable(self, raw: object, *, follow_final: bool = True) -> Resolved:
        found = self.physical(raw, follow_final=follow_final)
        require_writable(found)
        return found


def _realpath(path: str, raw: str) -> str:
    # Non-strict realpath still fails when a link it has just seen is gone or is a
    # folder again by the time it reads it (a folder swapped to and fro meanwhile).
    try:
        return os.path.realpath(path)
    except OSError:
        raise ConflictError(
            f"{_shown(raw)} changed while it was being looked up (a folder replaced by a "
            "link?); try again"
        ) from None


def _agent_path(mount: Mount, parts: tuple[str, ...]) -> str:
    if not parts:
        return mount.prefix
    return f"{mount.prefix}/{'/'.join(parts)}"


def _escape(raw: str, mount: Mount) -> PathDeniedError:
    where = "your home" if mount.name == HOME_MOUNT else f"the {mount.label.lower()}"
    return _denied(raw, f"it leads outside {where} (through a symbolic link)")


def require_writable(found: Resolved | Virtual) -> None:
    if isinstance(found, Virtual):
        raise ReadOnlyError(
            f"{found.agent_path} is a note; notes are changed by the assistant's note tools"
        )
    if not found.writable:
        raise ReadOnlyError(f"{found.agent_path} is in a read-only place; nothing was changed")


# -- errors from the file system -------------------------------------------------------


# What each errno means for the caller: the error type and its text ({where}: the path).
_OS_ERRORS: Final[dict[int, tuple[type[SkaldError], str]]] = {
    errno.ENOENT: (NotFoundError, "nothing at {where}"),
    errno.ELOOP: (
        PathDeniedError,
        "{where}: a symbolic link is in the way, and links are not followed here",
    ),
    errno.ESTALE: (ConflictError, "{where} changed while it was being used; try again"),
    errno.ENOTDIR: (InvalidInputError, "{where}: part of the path is a file, not a folder"),
    errno.EISDIR: (InvalidInputError, "{where} is a folder"),
    errno.EACCES: (PathDeniedError, "{where}: the file system refused access"),
    errno.EEXIST: (ConflictError, "{where} already exists"),
    errno.ENOTEMPTY: (ConflictError, "{where} is a folder that is not empty"),
    errno.ENAMETOOLONG: (InvalidInputError, "{where}: the path is too long"),
    errno.EXDEV: (InvalidInputError, "{where}: cannot move between different places"),
    errno.EINVAL: (
        InvalidInputError,
        "{where}: the file system refused this (a folder into itself?)",
    ),
    errno.ENOSPC: (DiskFullError, "{where}: the disk is full; nothing was written"),
}
_OS_ERRORS[errno.EMLINK] = _OS_ERRORS[errno.ELOOP]
_OS_ERRORS[errno.EPERM] = _OS_ERRORS[errno.EROFS] = _OS_ERRORS[errno.EACCES]
_OS_ERRORS[errno.EDQUOT] = _OS_ERRORS[errno.ENOSPC]


def os_error(exc: OSError, where: str) -> SkaldError:
    """A clear SkaldError for an OSError met while working on `where` (an agent path)."""
    known = _OS_ERRORS.get(exc.errno) if exc.errno is not None else None
    if known is None:
        return FileSystemError(f"{where}: {exc.strerror or 'file system error'}")
    kind, text = known
    return kind(text.format(where=where))


@contextlib.contextmanager
def _translated(where: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise os_error(exc, where) from None


# -- opening without following links ----------------------------------------------------


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")  # noqa: PTH115  (a magic link, as text)
    except OSError:
        return None


_open_dir_at = tree.open_dir_at
_lstat_at = tree.lstat_at


@contextlib.contextmanager
def _opendir(root: Path, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """The directory `root/parts`, reached component by component with `O_NOFOLLOW`.

    With `create`, missing directories are made (and then opened without following, so
    a link raced into their place fails with ELOOP). The result is checked once more
    against the root through /proc when that is available.
    """
    fd = os.open(root, tree.DIR_FLAGS)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, DIR_MODE, dir_fd=fd)
            child = _open_dir_at(fd, part)
            os.close(fd)
            fd = child
        where = _fd_path(fd)
        if where is not None and not _inside(where, str(root)):
            raise PermissionError(errno.EACCES, "left the root")
        yield fd
    finally:
        os.close(fd)


def _open_regular_at(fd: int, name: str, where: str) -> tuple[int, os.stat_result]:
    """Open a regular file in directory `fd` for reading; links and special files refused."""
    before = os.stat(name, dir_fd=fd, follow_symlinks=False)
    _check_regular(before, where, ", not a file", " (a pipe or a device?)")
    ffd = os.open(name, _READ_FLAGS, dir_fd=fd)
    after = os.fstat(ffd)
    if not stat.S_ISREG(after.st_mode) or not os.path.samestat(before, after):
        os.close(ffd)
        raise PathDeniedError(f"{where} changed while it was being opened")
    return ffd, after


def open_read(found: Resolved) -> tuple[io.FileIO, os.stat_result]:
    """A regular file opened for reading (closed on garbage collection if abandoned)."""
    if found.is_root:
        raise InvalidInputError(f"{found.agent_path} is a folder, not a file")
    with _translated(found.agent_path), _opendir(found.root, found.parts[:-1]) as parent:
        ffd, st = _open_regular_at(parent, found.parts[-1], found.agent_path)
    return io.FileIO(ffd, "rb", closefd=True), st


def read_head(found: Resolved, size: int = 8192) -> bytes:
    handle, _ = open_read(found)
    with handle:
        return handle.read(size) or b""


def is_binary(head: bytes) -> bool:
    """ripgrep's rule (a NUL byte), plus text that is not UTF-8."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A character cut at the end of the sample is still text.
        return exc.start < len(head) - 3
    return False


# -- types ------------------------------------------------------------------------------

_EXTRA_MIME = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".py": "text/x-python",
    ".ts": "text/x-typescript",
    ".toml": "text/x-toml",
    ".yaml": "text/x-yaml",
    ".yml": "text/x-yaml",
    ".log": "text/plain",
    ".ini": "text/plain",
    ".cfg": "text/plain",
    ".conf": "text/plain",
    ".sh": "text/x-shellscript",
    ".rs": "text/x-rust",
    ".go": "text/x-go",
    ".webp": "image/webp",
    ".heic": "image/heic",
    ".opus": "audio/ogg",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
}


@functools.cache
def _mime_table() -> mimetypes.MimeTypes:
    """Python's built-in table only (the same answer on every machine), built at the first
    guess: ~300 KiB a server that never guesses a file's type would hold for nothing."""
    return mimetypes.MimeTypes()


def guess_mime(name: str) -> str | None:
    suffix = Path(name).suffix.lower()
    if suffix in _EXTRA_MIME:
        return _EXTRA_MIME[suffix]
    return _mime_table().guess_type(name, strict=False)[0]


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(agent_path: str, name: str, st: os.stat_result) -> FileEntry:
    kind = tree.kind_of(st.st_mode)
    return FileEntry(
        name=name,
        path=agent_path,
        type=kind,
        size=st.st_size if kind != "dir" else 0,
        mtime=_iso(st.st_mtime),
        mime=guess_mime(name) if kind == "file" else None,
    )


def _displayable(name: str) -> bool:
    """Names the API and the tools can carry: those `checked_name` accepts (a name made
    in the sandbox with a direction override is left out, not shown spoofed)."""
    try:
        checked_name(name)
    except InvalidInputError:
        return False
    return True


def entry_for(found: Resolved) -> FileEntry:
    """What is at `found` (a link is described, not followed)."""
    with _translated(found.agent_path):
        if found.is_root:
            with _opendir(found.root, ()) as fd:
                st = os.fstat(fd)
            return _entry(found.agent_path, found.agent_path, st)
        with _opendir(found.root, found.parts[:-1]) as parent:
            st = os.stat(found.parts[-1], dir_fd=parent, follow_symlinks=False)
    return _entry(found.agent_path, found.parts[-1], st)


def _shown_name(name: str) -> bool:
    """Listed and walked: displayable, and not a write in progress (or one a killed
    server left behind: `skald serve` removes those when it starts)."""
    return _displayable(name) and not tree.is_temp_name(name)


def _hidden_at_root(found: Resolved, parts: tuple[str, ...], name: str) -> bool:
    # A mount inside the home (`docs`, `shared/photos`) hides the home's folder there.
    return found.mount == HOME_MOUNT and "/".join((*parts, name)) in found.shadowed


def list_dir(found: Resolved, limit: int = 10_000) -> tuple[list[FileEntry], bool]:
    """The entries of a folder (folders first, then by name); True when cut at `limit`."""
    entries: list[FileEntry] = []
    truncated = False
    with _translated(found.agent_path), _opendir(found.root, found.parts) as fd:
        names = sorted(os.listdir(fd))  # noqa: PTH208  (by descriptor)
        for name in names:
            if _hidden_at_root(found, found.parts, name) or not _shown_name(name):
                continue
            st = _lstat_at(fd, name)
            if st is None:
                continue  # removed meanwhile
            if len(entries) >= limit:
                truncated = True
                break
            path = f"{found.agent_path}/{name}"
            entries.append(_entry(path, name, st))
    entries.sort(key=lambda e: (e.type != "dir", e.name.lower(), e.name))
    return entries, truncated


# -- changing things ---------------------------------------------------------------------


def make_dir(found: Resolved) -> FileEntry:
    require_writable(found)
    with _translated(found.agent_path), _opendir(found.root, found.parts, create=True):
        pass
    return entry_for(found)


def write_bytes(found: Resolved, data: bytes) -> tuple[FileEntry, bool]:
    """Write a whole file atomically (temporary file, then rename); True if it was new.

    Parent folders are created. An existing file keeps its permission bits; a folder,
    a link or a special file in the way is refused.
    """
    require_writable(found)
    if found.is_root:
        raise InvalidInputError(f"{found.agent_path} is a folder, not a file")
    name = found.parts[-1]
    with (
        _translated(found.agent_path),
        _opendir(found.root, found.parts[:-1], create=True) as parent,
    ):
        existing = _lstat_at(parent, name)
        if existing is not None:
            _check_regular(existing, found.agent_path)
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else FILE_MODE
        tree.write_file_at(parent, name, data, mode)
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    return _entry(found.agent_path, name, st), existing is None


def _check_regular(st: os.stat_result, where: str, folder: str = "", other: str = "") -> None:
    """Refuse anything but a regular file at `where` (a folder, a link, a pipe): the one
    check of what stands there before a read opens it and before a write replaces it.
    `folder` and `other`: what the refusal of a folder or a special file adds."""
    if stat.S_ISDIR(st.st_mode):
        raise InvalidInputError(f"{where} is a folder{folder}")
    if stat.S_ISLNK(st.st_mode):
        raise PathDeniedError(f"{where}: a symbolic link is in the way")
    if not stat.S_ISREG(st.st_mode):
        raise PathDeniedError(f"{where} is not a regular file{other}")


def upload_name(raw: str) -> str:
    """A usable file name from what a browser sent: the last component, no leading or
    trailing spaces, at most 255 bytes (suffix kept); `checked_name` refuses control and
    format characters (InvalidInputError) and gives NFC."""
    base = checked_name(raw.replace("\\", "/").rsplit("/", 1)[-1].strip())
    if base in ("", ".", ".."):
        return "file"
    while len(base.encode("utf-8")) > MAX_NAME_BYTES:
        stem, dot, suffix = base.rpartition(".")
        keep_suffix = dot and stem and len(suffix) < 16
        base = f"{stem[:-1]}.{suffix}" if keep_suffix else base[:-1]
    return base


class NewFile:
    """A file written piece by piece (an upload) that appears only when complete.

    The data goes to a hidden temporary file in the target folder; `commit` gives it
    `name`, or `name (2)`, `name (3)`… if that exists (never overwriting), and
    `abort` removes it. Not thread-safe: one writer, calls in order.
    """

    def __init__(self, folder: Resolved, name: str) -> None:
        require_writable(folder)
        if name != upload_name(name):
            raise InvalidInputError(f"invalid file name {_shown(name)}")
        if _hidden_at_root(folder, folder.parts, name):
            raise InvalidInputError(
                f"{name!r} is reserved at the top of the home; pick another name"
            )
        self.folder = folder
        self.name = name
        self.size = 0
        self._where = f"{folder.agent_path}/{name}"
        self._temp = tree.temp_name()
        with _translated(self._where):
            self._stack = contextlib.ExitStack()
            try:
                self._dir = self._stack.enter_context(
                    _opendir(folder.root, folder.parts, create=True)
                )
                self._fd = os.open(
                    self._temp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    FILE_MODE,
                    dir_fd=self._dir,
                )
            except BaseException:
                self._stack.close()
                raise
        self._open = True

    def write(self, data: bytes) -> None:
        with _translated(self._where):
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        self.size += len(data)

    def commit(self) -> FileEntry:
        stem, dot, suffix = self.name.rpartition(".")
        if not stem:
            stem, dot, suffix = self.name, "", ""
        try:
            with _translated(self._where):
                os.close(self._fd)
                self._fd = -1
                for n in range(1, 1000):
                    candidate = self.name if n == 1 else f"{stem} ({n}){dot}{suffix}"
                    if len(candidate.encode("utf-8")) > MAX_NAME_BYTES:
                        raise InvalidInputError(f"{self._where}: the name is too long")
                    if _lstat_at(self._dir, candidate) is not None:
                        continue
                    try:
                        os.link(
                            self._temp,
                            candidate,
                            src_dir_fd=self._dir,
                            dst_dir_fd=self._dir,
                            follow_symlinks=False,
                        )
                    except FileExistsError:
                        continue  # taken meanwhile
                    except OSError as exc:
                        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
                            raise
                        # No hard links here (some network file systems): rename instead.
                        os.rename(self._temp, candidate, src_dir_fd=self._dir, dst_dir_fd=self._dir)
                    st = os.stat(candidate, dir_fd=self._dir, follow_symlinks=False)
                    path = f"{self.folder.agent_path}/{candidate}"
                    return _entry(path, candidate, st)
                raise ConflictError(f"{self._where}: too many files with that name")
        finally:
            self.abort()

    def abort(self) -> None:
        if not self._open:
            return
        self._open = False
        if self._fd >= 0:
            os.close(self._fd)
        with contextlib.suppress(OSError):
            os.unlink(self._temp, dir_fd=self._dir)
        self._stack.close()


def delete(found: Resolved, *, recursive: bool = False) -> None:
    """Remove a file, a link (never its target) or a folder (`recursive` if not empty).

    `found` must come from `resolve(..., follow_final=False)`.
    """
    require_writable(found)
    if found.is_root:
        raise InvalidInputError(f"{found.agent_path} is the place itself; it cannot be deleted")
    name = found.parts[-1]
    with _translated(found.agent_path), _opendir(found.root, found.parts[:-1]) as parent:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=parent)
            return
        if not recursive:
            os.rmdir(name, dir_fd=parent)
            return
        # By descriptor: never follows a link, never leaves `parent`, and carries on
        # past what it cannot remove (files root made in the sandbox) to say what is left.
        left = tree.remove_tree(parent, name)
    if left:
        base = found.agent_path.rsplit("/", 1)[0]
        shown = "; ".join(f"{base}/{item}" for item in left[:3])
        more = f" and {len(left) - 3} more" if len(left) > 3 else ""
        raise ConflictError(
            f"{found.agent_path} was only partly deleted: {len(left)} item(s) could not be "
            f"removed: {shown}{more}. Files made by root in the sandbox can be removed from "
            "there (sudo rm), or by the administrator"
        )


def rename(source: Resolved, target: Resolved) -> FileEntry:
    """Move `source` (the entry itself, a link stays a link) to `target`, never over
    an existing entry. Both must come from `resolve(..., follow_final=False)`."""
    require_writable(source)
    require_writable(target)
    if source.is_root or target.is_root:
        raise InvalidInputError("a place itself cannot be moved or replaced")
    if source.mount != target.mount:
        raise InvalidInputError("files can only be moved within one place")
    if target.parts[: len(source.parts)] == source.parts:
        raise InvalidInputError(f"{source.agent_path} cannot be moved into itself")
    with (
        _translated(source.agent_path),
        _opendir(source.root, source.parts[:-1]) as src_dir,
        _opendir(target.root, target.parts[:-1], create=True) as dst_dir,
    ):
        os.stat(source.parts[-1], dir_fd=src_dir, follow_symlinks=False)
        if _lstat_at(dst_dir, target.parts[-1]) is not None:
            raise ConflictError(f"{target.agent_path} already exists")
        os.rename(source.parts[-1], target.parts[-1], src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        st = os.stat(target.parts[-1], dir_fd=dst_dir, follow_symlinks=False)
    return _entry(target.agent_path, target.parts[-1], st)


# -- walking a tree (grep, glob, zip) -----------------------------------------------------


@dataclass(frozen=True)
class WalkItem:
    """A file or folder met by `walk`. `dir_fd` is its folder, valid until the next item."""

    rel: tuple[str, ...]  # below the walked folder, the item's own name last
    agent_path: str
    kind: Literal["file", "dir"]
    stat: os.stat_result
    dir_fd: int

    @property
    def name(self) -> str:
        return self.rel[-1]

    def open(self) -> io.FileIO:
        """The file, opened without following links (it may have changed meanwhile)."""
        with _translated(self.agent_path):
            ffd, _ = _open_regular_at(self.dir_fd, self.name, self.agent_path)
        return io.FileIO(ffd, "rb", closefd=True)


def walk(
    found: Resolved,
    *,
    hidden: bool = True,
    max_depth: int = MAX_DEPTH,
    stop: threading.Event | None = None,
) -> Generator[WalkItem, None, None]:
    """Every folder and regular file below `found`, depth first, sorted by name.

    By descriptor (`skald.walk`): links are never followed (nor reported), nor
    are special files; a folder swapped for a link meanwhile is skipped. `stop` ends the
    walk early. Callers count and cap what they take.
    """

    def skip(rel: tuple[str, ...], name: str) -> bool:
        if not hidden and name.startswith("."):
            return True
        return _hidden_at_root(found, found.parts + rel, name) or not _shown_name(name)

    depth = min(max_depth, MAX_DEPTH - len(found.parts) + 1)
    with _translated(found.agent_path), _opendir(found.root, found.parts) as top:
        for entry in tree.walk(top, skip=skip, max_depth=depth, stop=stop):
            if entry.kind == "dir" or entry.kind == "file":
                agent_path = f"{found.agent_path}/{entry.path}"
                yield WalkItem(entry.rel, agent_path, entry.kind, entry.stat, entry.dir_fd)


# -- a folder as a ZIP stream -----------------------------------------------------------


class _Sink(io.RawIOBase):
    """A write-only, non-seekable stream that collects bytes until they are taken."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []
        self.pending = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = bytes(data)
        self._parts.append(chunk)
        self.pending += len(chunk)
        return len(chunk)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        self.pending = 0
        return out


# Already compressed: deflating them again costs CPU (a Pi!) for nothing.
_STORED_SUFFIXES = frozenset(
    {
        *(".jpg", ".jpeg", ".png", ".gif", ".webp", ".heic"),
        *(".mp3", ".mp4", ".m4a", ".mkv", ".mov", ".webm", ".ogg", ".opus"),
        *(".zip", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar"),
        *(".pdf", ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".epub"),
    }
)


def _zip_time(mtime: float) -> tuple[int, int, int, int, int, int]:
    moment = time.localtime(max(mtime, 315532800.0))  # ZIP cannot say before 1980
    return moment[:6]


def zip_stream(
    found: Resolved, *, chunk_size: int = CHUNK, stop: threading.Event | None = None
) -> Generator[bytes, None, None]:
    """The folder as ZIP bytes, chunk by chunk, without a temporary file.

    `zipfile` writes to a non-seekable sink, so each member gets a data descriptor
    instead of a patched header; memory stays at about one chunk plus the compressor
    whatever the size of the folder. Entries are named below the folder's own name.
    Links and special files are left out. Blocking: run each `next()` in a thread.
    """
    if found.is_root:
        top = "home" if found.mount == HOME_MOUNT else found.mount
    else:
        top = found.parts[-1]
    sink = _Sink()
    with contextlib.closing(walk(found, stop=stop)) as walking:
        # The first step opens the folder (a missing or swapped one fails here) and
        # yields nothing: a caller can take it before the response starts.
        first = next(walking, None)
        yield b""
        items = itertools.chain(() if first is None else (first,), walking)
        yield from _zip_items(items, top, sink, chunk_size, stop)


def _zip_items(
    items: Iterator[WalkItem],
    top: str,
    sink: _Sink,
    chunk_size: int,
    stop: threading.Event | None,
) -> Generator[bytes, None, None]:
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for item in items:
            name = f"{top}/{'/'.join(item.rel)}"
            info = zipfile.ZipInfo(name + ("/" if item.kind == "dir" else ""))
            info.date_time = _zip_time(item.stat.st_mtime)
            if item.kind == "dir":
                info.external_attr = (0o40755 << 16) | 0x10
                archive.writestr(info, b"")
            else:
                try:
                    source = item.open()
                except SkaldError:
                    continue  # replaced by something else since it was listed
                info.external_attr = 0o644 << 16
                stored = Path(item.name).suffix.lower() in _STORED_SUFFIXES
                info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                # The size seen now decides ZIP64 and how much is read: a file that
                # grows meanwhile is cut there, one that shrinks just ends early.
                left = info.file_size = os.fstat(source.fileno()).st_size
                with source, archive.open(info, "w") as member:
                    while left > 0 and (block := source.read(min(chunk_size, left))):
                        left -= len(block)
                        member.write(block)
                        if sink.pending >= chunk_size:
                            yield sink.take()
                        if stop is not None and stop.is_set():
                            return
            if sink.pending >= chunk_size:
                yield sink.take()
    yield sink.take()
