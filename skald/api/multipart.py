"""Multipart bodies read as they stream: the one reader of `POST /api/file/upload` and
the chat's `POST /api/uploads` (both through `receive_upload`, here so that neither
feature imports the other's routes) and of the chat's form (`POST /api/chat` with files).

Rule: `read_multipart` owns what every multipart route must do the same way: the byte
cap (413 `too_large` past `limit_mb` MiB, plus room for boundaries and part headers),
the storage budget asked at every chunk (bytes received so far), the parser's refusals
in words (400), the closing boundary required, and a file part streamed to disk in a
worker thread once its caller says where (`Part.save`), its temporary file aborted on any
failure. The caller decides what the parts mean (which are files, where they go, what a
field may hold) and counts what was stored against the budget (`Budget.wrote`).

`multipart.PushMultipartParser` is push-style: it holds back only what may be the start
of a boundary, so each piece of a part goes on (to disk, or to the caller) as it arrives.

Trap: an async generator is not closed when the loop reading it stops (an exception in
the caller's loop, a `break`): its `finally`, which aborts a half-written file, would
wait for the garbage collector. Read it inside `contextlib.aclosing(...)`. And only the
parser's errors are translated here: an exception raised in the caller's loop body never
passes through the reader, so it reaches the client as the caller raised it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Final

from multipart import (
    MultipartError,
    MultipartSegment,
    ParserLimitReached,
    PushMultipartParser,
    parse_options_header,
)

from skald.api.deps import AnyRequest
from skald.api.errors import ApiError
from skald.errors import InvalidInputError
from skald.files.router import FileEntry, NewFile, Resolved, upload_name
from skald.quota import Budget

MAX_PARTS: Final = 1000  # files and fields in one upload
MULTIPART_OVERHEAD: Final = 64 * 1024  # boundaries and part headers on top of the data


class Part:
    """A part's start (its headers in `segment`). Unless `save` is called now, its data
    comes to the caller as `bytes` events, then `None`."""

    def __init__(self, segment: MultipartSegment) -> None:
        self.segment = segment
        self.file: NewFile | None = None

    async def save(self, folder: Resolved, filename: str) -> None:
        """Stream this part into `folder` under `filename` made safe (`upload_name`; a
        free name is found as `NewFile` does); its end then comes as the stored
        `FileEntry`. The name's checks run in the thread too: the first name with an
        emoji loads the look-alike tables (`files/lookalike.py`)."""
        if self.file is not None:
            raise RuntimeError("a part is saved once")
        self.file = await asyncio.to_thread(lambda: NewFile(folder, upload_name(filename)))


# What the caller sees, in order for each part: a `Part`, then the data of a part not
# saved (`bytes`), then its end: `None`, or the `FileEntry` of a saved part.
Event = Part | bytes | FileEntry | None


def boundary_of(content_type: str) -> str:
    kind, options = parse_options_header(content_type)
    if kind != "multipart/form-data":
        raise InvalidInputError("send the files as multipart/form-data (field 'file')")
    boundary = options.get("boundary")
    if not isinstance(boundary, str) or not 0 < len(boundary) <= 200 or "\n" in boundary:
        raise InvalidInputError("the multipart body has no valid boundary")
    return boundary


async def read_multipart(
    request: AnyRequest, limit_mb: int, budget: Budget | None = None
) -> AsyncGenerator[Event, None]:
    """The request's multipart body as events (see `Event`), read as it streams.

    `budget`: the member's storage budget, asked about every chunk: over quota is 413
    `quota_exceeded`, a nearly full disk 507 `disk_full`. Read inside `aclosing`.
    """
    boundary = boundary_of(request.headers.get("content-type", ""))
    limit = limit_mb * 1024 * 1024
    parser = PushMultipartParser(boundary, max_segment_count=MAX_PARTS)
    part: Part | None = None
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit + MULTIPART_OVERHEAD:
                raise ApiError(413, "too_large", f"uploads up to {limit_mb} MiB are accepted")
            if not chunk:
                continue  # an empty chunk would tell the parser the body has ended
            if budget is not None:
                budget.check(received)
            for event in parser.parse(chunk):
                if isinstance(event, MultipartSegment):
                    part = Part(event)
                    yield part
                elif event is None:
                    if part is not None and part.file is not None:
                        entry = await asyncio.to_thread(part.file.commit)
                        part.file = None
                        yield entry
                    else:
                        yield None
                elif part is not None and part.file is not None:
                    await asyncio.to_thread(part.file.write, event)
                else:
                    yield event
        try:
            parser.close()  # raises unless the closing boundary came
        except MultipartError:
            raise InvalidInputError("the multipart body ended early") from None
    except ParserLimitReached as exc:
        raise InvalidInputError(f"the multipart body is out of bounds: {exc}") from None
    except MultipartError as exc:
        raise InvalidInputError(f"malformed multipart body: {exc}") from None
    finally:
        if part is not None and part.file is not None:
            await asyncio.to_thread(part.file.abort)


async def receive_upload(
    request: AnyRequest, folder: Resolved, limit_mb: int, budget: Budget | None = None
) -> list[FileEntry]:
    """Stream a multipart body's `file` parts into `folder`, capped at `limit_mb` MiB,
    never holding a whole file in memory (the Files API's uploads and the chat's
    attachments); other parts are read and dropped. The reading, its limits and errors
    are `read_multipart`'s.

    `budget`: the member's storage budget, asked about every chunk (bytes received so
    far): over quota is 413 `quota_exceeded`, a nearly full disk 507 `disk_full`. What
    was stored counts against it once the body is read (or refused).
    """
    written: list[FileEntry] = []
    try:
        async with aclosing(read_multipart(request, limit_mb, budget)) as events:
            async for event in events:
                if isinstance(event, Part):
                    segment = event.segment
                    # A file input left empty sends `filename=""`: nothing to store.
                    if segment.name == "file" and segment.filename:
                        await event.save(folder, segment.filename)
                elif isinstance(event, FileEntry):
                    written.append(event)
    finally:
        if budget is not None:
            budget.wrote(sum(entry.size for entry in written))
    if not written:
        raise InvalidInputError("no file in the upload (send the multipart field 'file')")
    return written
