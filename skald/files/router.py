"""The path router: which place an agent path names, and safe operations on it.

Places a member can reach (DESIGN.md C4):
- their home `data/homes/<user_id>/` (read-write): `~`, `~/…`, relative paths,
  `uploads/…`, and `/home/skald/…` (the same folder as the sandbox sees it);
- the manual (read-only): `docs/…`, also `~/docs/…` (the sandbox mounts it there);
- the two virtual note stores `user-memory/…` and `shared-memory/…`: not folders at all.
  The router only reports them (`Virtual`); the note tools and the note stores own them.

Rules (rules and traps in `docs/dev/files.md`):
- Parsing is lexical and strict: text only, no NUL or control characters, bounded length,
  no `..` anywhere, no absolute host path, no `~other` home.
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
import io
import mimetypes
import os
import secrets
import shutil
import stat
import threading
import time
import unicodedata
import zipfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import msgspec

from skald.agent.note_paths import SHARED_MEMORY, USER_MEMORY, NoteStoreName
from skald.assets import asset_dir
from skald.errors import (
    ConflictError,
    DiskFullError,
    InvalidInputError,
    NotFoundError,
    SkaldError,
)
from skald.paths import DataLayout

__all__ = [
    "CONTAINER_HOME",
    "DOCS_MOUNT",
    "HOME_MOUNT",
    "FileEntry",
    "FileSystemError",
    "NewFile",
    "PathDeniedError",
    "PathRouter",
    "Place",
    "ReadOnlyError",
    "Resolved",
    "Virtual",
    "WalkItem",
    "delete",
    "entry_for",
    "guess_mime",
    "is_binary",
    "list_dir",
    "make_dir",
    "open_read",
    "rename",
    "upload_name",
    "walk",
    "write_bytes",
    "zip_stream",
]

HOME_MOUNT: Final = "home"
DOCS_MOUNT: Final = "docs"
CONTAINER_HOME: Final = "/home/skald"  # where the sandbox mounts the home
VIRTUAL_STORES: Final[tuple[NoteStoreName, ...]] = (USER_MEMORY, SHARED_MEMORY)
# Names at the top of the home that route elsewhere; the sandbox mounts over them, so
# the real folders of that name in the home are invisible there, and here too.
SHADOWED: Final = frozenset({DOCS_MOUNT, USER_MEMORY, SHARED_MEMORY})

MAX_PATH_CHARS: Final = 4096  # PATH_MAX
MAX_NAME_BYTES: Final = 255  # NAME_MAX
MAX_DEPTH: Final = 64  # components below a mount root
DIR_MODE: Final = 0o755
FILE_MODE: Final = 0o644
CHUNK: Final = 64 * 1024

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

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

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else self.agent_path

    @property
    def is_root(self) -> bool:
        return not self.parts


@dataclass(frozen=True)
class Virtual:
    """A path into a note store: `agent_path` is canonical (`user-memory/people/ada.md`)."""

    store: NoteStoreName
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


def _invalid(raw: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"invalid path {_shown(raw)}: {why}")


def _shown(raw: str) -> str:
    text = raw if len(raw) <= 80 else raw[:77] + "..."
    return repr(text)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class PathRouter:
    """One member's view: their home, the manual, and where the note stores are.

    Parsing (`parse`) is pure; `resolve` also asks the file system where links lead.
    """

    def __init__(self, home: Path, docs: Path | None = None) -> None:
        self.home = Mount(HOME_MOUNT, "~", Path(home), True, "Home")
        self.docs = (
            Mount(DOCS_MOUNT, DOCS_MOUNT, Path(docs), False, "Manual") if docs is not None else None
        )

    @classmethod
    def for_member(cls, layout: DataLayout, user_id: str) -> PathRouter:
        return cls(layout.home(user_id), asset_dir("docs"))

    @property
    def mounts(self) -> list[Mount]:
        return [m for m in (self.home, self.docs) if m is not None]

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

    def parse(self, raw: object) -> tuple[Mount, list[str]] | Virtual:
        """Which place `raw` names and the components below its root (no I/O)."""
        if not isinstance(raw, str):
            raise InvalidInputError("a path must be text")
        if len(raw) > MAX_PATH_CHARS:
            raise _invalid(raw, f"longer than {MAX_PATH_CHARS} characters")
        if not raw:
            raise _invalid(raw, "empty; use ~ for your home")
        if "\x00" in raw or any(unicodedata.category(ch) == "Cc" for ch in raw):
            raise _invalid(raw, "control characters (NUL included) are not allowed")
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            raise _invalid(raw, "not valid Unicode text") from None
        text = raw.replace("\\", "/")
        if text.startswith("/"):
            if text == CONTAINER_HOME or text.startswith(CONTAINER_HOME + "/"):
                text = text[len(CONTAINER_HOME) :]
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
        head = segments[0] if segments else ""
        for store in VIRTUAL_STORES:
            if head == store:
                relative = "/".join(segments[1:])
                if relative and text.endswith("/"):
                    relative += "/"
                return Virtual(store, f"{store}/{relative}", relative)
        if head == DOCS_MOUNT and self.docs is not None:
            return self.docs, segments[1:]
        if head == DOCS_MOUNT:
            raise _denied(raw, "the manual is not available here")
        return self.home, segments

    def is_virtual(self, raw: object) -> bool:
        try:
            return isinstance(self.parse(raw), Virtual)
        except SkaldError:
            return False

    # -- physical ---------------------------------------------------------------------

    def _root(self, mount: Mount) -> str:
        root = mount.root
        if mount is self.home and root.is_symlink():
            raise PathDeniedError("the home folder is a symbolic link; refusing to use it")
        return os.path.realpath(root)

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
            real = os.path.realpath(os.path.join(root, *segments))  # noqa: PTH118
        else:
            parent = os.path.realpath(os.path.join(root, *segments[:-1]))  # noqa: PTH118
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


def os_error(exc: OSError, where: str) -> SkaldError:
    """A clear SkaldError for an OSError met while working on `where` (an agent path)."""
    code = exc.errno
    if code == errno.ENOENT:
        return NotFoundError(f"nothing at {where}")
    if code == errno.ELOOP or code == errno.EMLINK:
        return PathDeniedError(
            f"{where}: a symbolic link is in the way, and links are not followed here"
        )
    if code == errno.ENOTDIR:
        return InvalidInputError(f"{where}: part of the path is a file, not a folder")
    if code == errno.EISDIR:
        return InvalidInputError(f"{where} is a folder")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PathDeniedError(f"{where}: the file system refused access")
    if code == errno.EEXIST:
        return ConflictError(f"{where} already exists")
    if code == errno.ENOTEMPTY:
        return ConflictError(f"{where} is a folder that is not empty")
    if code == errno.ENAMETOOLONG:
        return InvalidInputError(f"{where}: the path is too long")
    if code == errno.EXDEV:
        return InvalidInputError(f"{where}: cannot move between different places")
    if code == errno.EINVAL:
        return InvalidInputError(f"{where}: the file system refused this (a folder into itself?)")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(f"{where}: the disk is full; nothing was written")
    return FileSystemError(f"{where}: {exc.strerror or 'file system error'}")


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


def _open_dir_at(fd: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:
        # O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR: tell a link from a file.
        st = _lstat_at(fd, name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link is in the way") from None
        raise


@contextlib.contextmanager
def _opendir(root: Path, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """The directory `root/parts`, reached component by component with `O_NOFOLLOW`.

    With `create`, missing directories are made (and then opened without following, so
    a link raced into their place fails with ELOOP). The result is checked once more
    against the root through /proc when that is available.
    """
    fd = os.open(root, _DIR_FLAGS)
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


def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _open_regular_at(fd: int, name: str, where: str) -> tuple[int, os.stat_result]:
    """Open a regular file in directory `fd` for reading; links and special files refused."""
    before = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISDIR(before.st_mode):
        raise InvalidInputError(f"{where} is a folder, not a file")
    if stat.S_ISLNK(before.st_mode):
        raise PathDeniedError(f"{where}: a symbolic link is in the way")
    if not stat.S_ISREG(before.st_mode):
        raise PathDeniedError(f"{where} is not a regular file (a pipe or a device?)")
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

_MIME = mimetypes.MimeTypes()  # built-in table only: the same answer on every machine
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


def guess_mime(name: str) -> str | None:
    suffix = Path(name).suffix.lower()
    if suffix in _EXTRA_MIME:
        return _EXTRA_MIME[suffix]
    return _MIME.guess_type(name, strict=False)[0]


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kind(mode: int) -> Literal["file", "dir", "symlink", "other"]:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _entry(agent_path: str, name: str, st: os.stat_result) -> FileEntry:
    kind = _kind(st.st_mode)
    return FileEntry(
        name=name,
        path=agent_path,
        type=kind,
        size=st.st_size if kind != "dir" else 0,
        mtime=_iso(st.st_mtime),
        mime=guess_mime(name) if kind == "file" else None,
    )


def _displayable(name: str) -> bool:
    """Names the API and the tools can carry: valid UTF-8 without control characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(ch) == "Cc" for ch in name)


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


def _hidden_at_root(found: Resolved, parts: tuple[str, ...], name: str) -> bool:
    return found.mount == HOME_MOUNT and not parts and name in SHADOWED


def list_dir(found: Resolved, limit: int = 10_000) -> tuple[list[FileEntry], bool]:
    """The entries of a folder (folders first, then by name); True when cut at `limit`."""
    entries: list[FileEntry] = []
    truncated = False
    with _translated(found.agent_path), _opendir(found.root, found.parts) as fd:
        names = sorted(os.listdir(fd))  # noqa: PTH208  (by descriptor)
        for name in names:
            if _hidden_at_root(found, found.parts, name) or not _displayable(name):
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


def _temp_name() -> str:
    return f".skald-{secrets.token_hex(8)}.tmp"


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
            _check_replaceable(existing, found.agent_path)
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else FILE_MODE
        temp = _temp_name()
        tfd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=parent,
        )
        try:
            view = memoryview(data)
            while view:
                written = os.write(tfd, view[:CHUNK])
                view = view[written:]
            os.fchmod(tfd, mode)
            os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise
        finally:
            os.close(tfd)
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    return _entry(found.agent_path, name, st), existing is None


def _check_replaceable(existing: os.stat_result, where: str) -> None:
    if stat.S_ISDIR(existing.st_mode):
        raise InvalidInputError(f"{where} is a folder")
    if stat.S_ISLNK(existing.st_mode):
        raise PathDeniedError(f"{where}: a symbolic link is in the way")
    if not stat.S_ISREG(existing.st_mode):
        raise PathDeniedError(f"{where} is not a regular file")


def upload_name(raw: str) -> str:
    """A usable file name from what a browser sent: the last component, no control
    characters, no leading or trailing spaces, at most 255 bytes (suffix kept)."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch) != "Cc").strip()
    base = base.encode("utf-8", "replace").decode("utf-8")
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
        self._temp = _temp_name()
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
        if stat.S_ISDIR(st.st_mode):
            if recursive:
                # The fd-based rmtree: never follows a link, never leaves `parent`.
                if not shutil.rmtree.avoids_symlink_attacks:
                    raise FileSystemError("safe recursive delete is not available here")
                shutil.rmtree(name, dir_fd=parent)
            else:
                os.rmdir(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)


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

    Links are never followed (nor reported), nor are special files. Each folder is
    opened from its parent with `O_NOFOLLOW` and checked to be the one just listed, so a
    link swapped in meanwhile is skipped. `stop` ends the walk early. Callers count
    and cap what they take.
    """
    with _translated(found.agent_path), _opendir(found.root, found.parts) as top:
        listing = sorted(os.listdir(top))  # noqa: PTH208
        stack: list[tuple[int, tuple[str, ...], Iterator[str]]] = []
        stack.append((os.dup(top), (), iter(listing)))
        try:
            while stack:
                if stop is not None and stop.is_set():
                    return
                fd, rel, names = stack[-1]
                name = next(names, None)
                if name is None:
                    os.close(fd)
                    stack.pop()
                    continue
                if not hidden and name.startswith("."):
                    continue
                if _hidden_at_root(found, found.parts + rel, name) or not _displayable(name):
                    continue
                st = _lstat_at(fd, name)
                if st is None:
                    continue
                item_rel = (*rel, name)
                agent_path = f"{found.agent_path}/{'/'.join(item_rel)}"
                if stat.S_ISDIR(st.st_mode):
                    yield WalkItem(item_rel, agent_path, "dir", st, fd)
                    if len(item_rel) >= max_depth or len(found.parts) + len(item_rel) > MAX_DEPTH:
                        continue
                    try:
                        child = _open_dir_at(fd, name)
                    except OSError:
                        continue  # gone, or a link raced into its place
                    if not os.path.samestat(st, os.fstat(child)):
                        os.close(child)
                        continue
                    try:
                        listing = sorted(os.listdir(child))  # noqa: PTH208
                    except OSError:
                        os.close(child)
                        continue
                    stack.append((child, item_rel, iter(listing)))
                elif stat.S_ISREG(st.st_mode):
                    yield WalkItem(item_rel, agent_path, "file", st, fd)
        finally:
            for fd, _, _ in stack:
                os.close(fd)


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
    with (
        contextlib.closing(walk(found, stop=stop)) as items,
        zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive,
    ):
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
