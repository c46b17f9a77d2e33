"""The Files API (capability `files`): browse, view, upload, rename, delete, ZIP a folder.

Every path goes through the caller's own `PathRouter` (`skald/files/router.py`): their
home (read-write), the manual (read-only) and, for reading only, their note stores.
A path that leaves those places is 403, a missing one 404, a malformed one 400.

Downloads and ZIPs are streamed: blocking reads and compression run one chunk at a time
in a worker thread, so the event loop never waits on the disk and memory stays flat.
Uploads are parsed from the request stream as they arrive and written to a hidden
temporary file, so their size is capped by `assistant.upload_max_mb`, not by memory.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from typing import Annotated, Any, Final, Literal
from urllib.parse import quote

import msgspec
from litestar import Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromQuery, JSONBody, Parameter
from litestar.response import Stream

from skald.api.deps import AnyRequest, AuthRequest, requires
from skald.api.errors import ApiError, error_response
from skald.api.multipart import receive_upload
from skald.api.openapi import errors
from skald.api.streaming import BlockingStream
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.files import router as fs
from skald.files.changes import FileChange
from skald.files.mime import sniff
from skald.files.router import (
    MAX_PATH_CHARS,
    FileEntry,
    PathDeniedError,
    PathRouter,
    Place,
    Resolved,
    Virtual,
)
from skald.files.tools import FILES as FILES_CAP
from skald.files.tools import write_within as _write_within
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.note_paths import SHARED_MEMORY, USER_MEMORY, parse_note_folder, parse_note_path
from skald.store.notes import NoteInfo
from skald.store.owner import OwnerStore
from skald.store.shared_memory import SharedMemoryStore
from skald.tools.memory import MEMORY_SHARED

FILES = [requires(FILES_CAP)]
PathParam = Annotated[str, Parameter(max_length=MAX_PATH_CHARS)]
AgentPath = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS)]
TextContent = Annotated[str, msgspec.Meta(max_length=9_000_000)]

CHUNK: Final = 64 * 1024
LIST_LIMIT: Final = 10_000
NOTE_MIME: Final = "text/markdown"

# Types a browser may render from our own origin. Anything that can run script (HTML,
# SVG, XML, JavaScript) is served as plain text: a file written by a prompt-injected
# model must never become a page of ours.
_INLINE_PREFIXES: Final = ("image/", "audio/", "video/")
_ACTIVE: Final = frozenset(
    {
        "image/svg+xml",
        "text/html",
        "text/xml",
        "text/xsl",
        "text/css",
        "text/javascript",
        "text/ecmascript",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/xhtml+xml",
        "application/xml",
    }
)


def _denied(_: AnyRequest, exc: PathDeniedError) -> Response[Any]:
    return error_response(403, exc.code, str(exc))


HANDLERS: Final[dict[Any, Any]] = {PathDeniedError: _denied}


# -- wire types ---------------------------------------------------------------------------


class DirListing(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    place: str
    writable: bool
    virtual: bool = False
    entries: list[FileEntry]
    truncated: bool = False


class FileWrite(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    path: AgentPath
    content: TextContent | None = None
    mkdir: bool = False


class FileMove(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    source: AgentPath = msgspec.field(name="from")
    target: AgentPath = msgspec.field(name="to")


class Uploaded(msgspec.Struct, frozen=True, kw_only=True):
    files: list[FileEntry]


# -- helpers ------------------------------------------------------------------------------


async def _router(request: AuthRequest, server: Server) -> PathRouter:
    principal = request.user
    router = server.router(principal.user, principal.role)
    await asyncio.to_thread(router.ensure_home)
    return router


async def _resolve(
    router: PathRouter, path: str, *, follow_final: bool = True
) -> Resolved | Virtual:
    return await asyncio.to_thread(router.resolve, path, follow_final=follow_final)


async def _lookup(request: AuthRequest, server: Server, path: str) -> Resolved | Virtual:
    """`path` as the caller's own router names it: a file or folder, or notes."""
    return await _resolve(await _router(request, server), path)


async def _physical_for_write(
    router: PathRouter, path: str, *, follow_final: bool = True
) -> Resolved:
    found = await _resolve(router, path, follow_final=follow_final)
    fs.require_writable(found)  # notes and the manual: 403
    assert isinstance(found, Resolved)
    return found


async def _store(
    request: AuthRequest, server: Server, note: Virtual
) -> OwnerStore | SharedMemoryStore:
    principal = request.user
    if note.store == SHARED_MEMORY:
        if not principal.can(MEMORY_SHARED):
            raise ApiError(403, "forbidden", "your role cannot read the household's notes")
        return server.shared_memory
    return OwnerStore((await server.open_member(principal.user)).db)


def _note_listing(note: Virtual, infos: list[NoteInfo]) -> DirListing:
    folder = parse_note_folder(note.agent_path)
    base = f"{folder.store}/{folder.prefix}"
    entries: dict[str, FileEntry] = {}
    for info in infos:
        rest = info.path[len(folder.prefix) :]
        head, slash, _ = rest.partition("/")
        if slash:
            entries.setdefault(
                head, FileEntry(name=head, path=f"{base}{head}", type="dir", size=0, mtime=None)
            )
        else:
            entries[rest] = FileEntry(
                name=rest,
                path=f"{base}{rest}",
                type="file",
                size=info.size,
                mtime=info.updated_at,
                mime=NOTE_MIME,
            )
    if folder.prefix and not entries:
        raise NotFoundError(f"no notes in {note.agent_path}")
    ordered = sorted(entries.values(), key=lambda e: (e.type != "dir", e.name.lower(), e.name))
    return DirListing(
        path=base.rstrip("/"), place=folder.store, writable=False, virtual=True, entries=ordered
    )


def _served_type(mime: str | None, head: bytes) -> str:
    """The Content-Type to serve: real for media and plain text, never an active type."""
    if mime is None:
        mime = sniff(head[:512])
    # Litestar adds "; charset=utf-8" to every text/* type.
    if mime in _ACTIVE:
        return "text/plain"
    if mime.startswith("text/"):
        return mime
    if mime.startswith(_INLINE_PREFIXES) or mime in ("application/pdf", "application/json"):
        return mime
    return "application/octet-stream"


def _disposition(kind: Literal["inline", "attachment"], name: str) -> str:
    fallback = (
        "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\;' else "_" for ch in name) or "file"
    )
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _file_headers(name: str, download: bool, size: int | None) -> dict[str, str]:
    headers = {
        "content-disposition": _disposition("attachment" if download else "inline", name),
        "cache-control": "private, no-cache",
        # Also set at the edge for every response; a file response must never lack it.
        "x-content-type-options": "nosniff",
    }
    if size is not None:
        headers["content-length"] = str(size)
    return headers


def _require_folder(found: Resolved) -> None:
    kind = fs.entry_for(found).type
    if kind == "symlink":
        # `resolve` followed every link that stays inside: one here was swapped in since.
        raise ConflictError(f"{found.agent_path} changed meanwhile (replaced by a link?)")
    if kind != "dir":
        raise InvalidInputError(f"{found.agent_path} is a file, not a folder")


def _file_chunks(handle: Any, size: int, stop: threading.Event) -> Generator[bytes, None, None]:
    with handle:
        left = size
        while left > 0 and not stop.is_set():
            block = handle.read(min(CHUNK, left))
            if not block:
                return
            left -= len(block)
            yield block


# -- routes -------------------------------------------------------------------------------


@get("/api/files/places", guards=FILES)
async def places(request: AuthRequest, server: NamedDependency[Server]) -> list[Place]:
    """The places the caller can reach: home (read-write), the manual (read-only), and
    their note stores (read-only here: the assistant edits notes)."""
    router = await _router(request, server)
    out = router.places()
    out.append(
        Place(name=USER_MEMORY, path=USER_MEMORY, label="My notes", writable=False, virtual=True)
    )
    if request.user.can(MEMORY_SHARED):
        out.append(
            Place(
                name=SHARED_MEMORY,
                path=SHARED_MEMORY,
                label="Household notes",
                writable=False,
                virtual=True,
            )
        )
    return out


@get("/api/files/dir", guards=FILES, exception_handlers=HANDLERS, responses=errors(404))
async def list_folder(
    request: AnyRequest, server: NamedDependency[Server], path: PathParam = "~"
) -> DirListing:
    found = await _lookup(request, server, path)
    if isinstance(found, Virtual):
        note_folder = parse_note_folder(found.agent_path)
        store = await _store(request, server, found)
        return _note_listing(found, await store.note_list(note_folder.prefix))

    def listing() -> DirListing:
        assert isinstance(found, Resolved)
        _require_folder(found)
        entries, truncated = fs.list_dir(found, LIST_LIMIT)
        return DirListing(
            path=found.agent_path,
            place=found.mount,
            writable=found.writable,
            entries=entries,
            truncated=truncated,
        )

    return await asyncio.to_thread(listing)


@get(
    "/api/file",
    guards=FILES,
    exception_handlers=HANDLERS,
    # No handler-level media_type: it would override the file's own (`_served_type`).
    responses={
        # Any bytes: no schema, so no client (or fuzzer) expects JSON.
        200: ResponseSpec(
            data_container=None,
            media_type="*/*",
            description="The file's content, with its type (text, image, PDF, …).",
        ),
        **errors(404),
    },
)
async def read_file(
    request: AnyRequest,
    server: NamedDependency[Server],
    path: PathParam,
    download: FromQuery[bool] = False,
) -> Response[Any]:
    """The file's content with its type (`download=1`: as an attachment)."""
    found = await _lookup(request, server, path)
    if isinstance(found, Virtual):
        note = parse_note_path(found.agent_path)
        content = (await (await _store(request, server, found)).note_get(note.path)).encode()
        name = note.path.rsplit("/", 1)[-1]
        return Response(
            content,
            media_type=_served_type(NOTE_MIME, b""),
            headers=_file_headers(name, download, None),
        )

    def open_file() -> tuple[Any, int, str]:
        assert isinstance(found, Resolved)
        handle, st = fs.open_read(found)
        head = handle.read(512) or b""
        handle.seek(0)
        return handle, st.st_size, _served_type(fs.guess_mime(found.name), head)

    handle, size, media_type = await asyncio.to_thread(open_file)
    stop = threading.Event()
    return Stream(
        BlockingStream(_file_chunks(handle, size, stop), stop, what="file"),
        media_type=media_type,
        headers=_file_headers(found.name, download, size),
    )


@post(
    "/api/file",
    guards=FILES,
    exception_handlers=HANDLERS,
    status_code=201,
    responses={
        200: ResponseSpec(
            data_container=FileEntry,
            description="An existing file was replaced, or the folder already existed.",
        ),
        **errors(404, 409, 413, 507),
    },
)
async def write_file(
    data: JSONBody[FileWrite], request: AuthRequest, server: NamedDependency[Server]
) -> Response[FileEntry]:
    """Write a text file (`content`, replacing it) or create a folder (`mkdir`)."""
    if data.mkdir and data.content is not None:
        raise InvalidInputError("send either content (a file) or mkdir (a folder), not both")
    router = await _router(request, server)
    found = await _physical_for_write(router, data.path)
    if data.mkdir:
        existed = await asyncio.to_thread(_exists, found)
        entry = await asyncio.to_thread(fs.make_dir, found)
        return Response(entry, status_code=200 if existed else 201)
    try:
        content = (data.content or "").encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("the content is not valid Unicode text") from None
    budget = await server.budget(found.quota_owner or request.user.user.id)
    entry, created = await asyncio.to_thread(_write_within, budget, found, content)
    await _changed(server, request, "write", found)
    return Response(entry, status_code=201 if created else 200)


async def _changed(server: Server, request: AnyRequest, action: str, *found: Resolved) -> None:
    """Tell the features what the caller's write changed (`skald_files_changed`)."""
    paths = tuple("/".join(f.parts) for f in found)
    change = FileChange(mount=found[0].mount, paths=paths, action=action)
    await server.files_changed(request.user.user.id, change)


def _exists(found: Resolved) -> bool:
    try:
        fs.entry_for(found)
    except NotFoundError:
        return False
    return True


@post(
    "/api/file/upload",
    guards=FILES,
    exception_handlers=HANDLERS,
    status_code=201,
    request_max_body_size=None,  # capped while streaming, by the configured size
    responses=errors(404, 413, 507),
)
async def upload(
    request: AuthRequest, server: NamedDependency[Server], path: PathParam = "~/uploads"
) -> Uploaded:
    """Upload files (multipart field `file`, one or more) into the folder `path`.

    A name already taken gets ` (2)`, ` (3)`… before its extension; nothing is overwritten.
    """
    router = await _router(request, server)
    folder = await _physical_for_write(router, path)
    budget = await server.budget(folder.quota_owner or request.user.user.id)
    limit_mb = server.config.assistant.upload_max_mb
    files = await receive_upload(request, folder, limit_mb, budget)
    names = tuple("/".join((*folder.parts, f.name)) for f in files)
    change = FileChange(mount=folder.mount, paths=names, action="upload")
    await server.files_changed(request.user.user.id, change)
    return Uploaded(files=files)


@patch("/api/file", guards=FILES, exception_handlers=HANDLERS, responses=errors(404, 409))
async def move(
    data: JSONBody[FileMove], request: AnyRequest, server: NamedDependency[Server]
) -> FileEntry:
    """Rename or move a file or folder within a writable place (never over another)."""
    router = await _router(request, server)
    source = await _physical_for_write(router, data.source, follow_final=False)
    target = await _physical_for_write(router, data.target, follow_final=False)
    moved = await asyncio.to_thread(fs.rename, source, target)
    await _changed(server, request, "rename", source, target)
    return moved


@delete("/api/file", guards=FILES, exception_handlers=HANDLERS, responses=errors(404, 409))
async def remove(
    request: AuthRequest,
    server: NamedDependency[Server],
    path: PathParam,
    recursive: FromQuery[bool] = False,
) -> None:
    """Delete a file, a link (not what it points to) or a folder (`recursive=1` if not
    empty)."""
    router = await _router(request, server)
    found = await _physical_for_write(router, path, follow_final=False)
    await asyncio.to_thread(fs.delete, found, recursive=recursive)
    await _changed(server, request, "delete", found)
    # What was freed counts at once (a member at their quota deletes to make room).
    await asyncio.to_thread(server.storage.scan, request.user.user.id)


@get(
    "/api/files/zip",
    guards=FILES,
    exception_handlers=HANDLERS,
    media_type="application/zip",
    responses={
        200: ResponseSpec(
            data_container=None, media_type="application/zip", description="The folder as a ZIP."
        ),
        **errors(404),
    },
)
async def download_zip(
    request: AnyRequest, server: NamedDependency[Server], path: PathParam = "~"
) -> Stream:
    """The folder as a ZIP, streamed as it is built (links and special files left out)."""
    found = await _lookup(request, server, path)
    if isinstance(found, Virtual):
        raise InvalidInputError("notes cannot be downloaded as a ZIP; open them one by one")

    await asyncio.to_thread(_require_folder, found)
    if found.parts:
        name = found.parts[-1]
    else:
        name = "home" if found.mount == fs.HOME_MOUNT else found.mount
    stop = threading.Event()
    body = BlockingStream(fs.zip_stream(found, stop=stop), stop, what="zip")
    # Opens the folder now: a missing or swapped one is a clean 4xx, not a broken stream.
    await body.prime()
    return Stream(
        body,
        media_type="application/zip",
        headers=_file_headers(f"{name}.zip", True, None),
    )


ROUTES = [
    places,
    list_folder,
    read_file,
    write_file,
    upload,
    move,
    remove,
    download_zip,
]
