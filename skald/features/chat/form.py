"""The body of `POST /api/chat` and `/api/chat/stream`: JSON, or multipart/form-data
with the message's fields and its files in the same request (issue 28, scripts).

Multipart: fields `text` (required), `conversation_id`, `attachments` (repeatable: paths
uploaded before) and any number of file parts named `file`. Files are streamed to disk
as they arrive (never whole in memory), into the conversation's uploads folder, with
the limits, checks and errors of `POST /api/uploads` (`upload_max_mb` for the whole
body, the storage budget, the same file names). A file part with no conversation yet
makes one (a `conversation_id` must therefore come before the files).

All or nothing: when the body is refused (too big, malformed, an unknown field, a bad
name), or the message then cannot be sent, the files this request stored are removed,
so a retry finds the folder as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Annotated, Final

import msgspec
from multipart import MultipartSegment

from skald.api.deps import AuthRequest
from skald.api.errors import ApiError
from skald.api.invalid_input import sentence
from skald.api.multipart import Part, read_multipart
from skald.core.conversations import ConversationService
from skald.errors import InvalidInputError, SkaldError
from skald.files import router as fs
from skald.files.router import FileEntry, Resolved
from skald.quota import Budget

FIELDS: Final = ("text", "conversation_id", "attachments")
# `text` is at most 100,000 characters: at most 4 bytes each in UTF-8.
FIELD_BYTES: Final = 400_000
# A JSON body: the text, escaped (\uXXXX: 6 bytes a character), and 20 paths.
JSON_BYTES: Final = 1024 * 1024
MAX_ATTACHMENTS: Final = 20
Text = Annotated[str, msgspec.Meta(max_length=100_000)]


class ChatIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: Text
    conversation_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    # Files of this conversation: uploaded before (`POST /api/uploads`), by their path,
    # and, in a multipart request, the `file` parts (added here once stored).
    attachments: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=400)]],
        msgspec.Meta(max_length=MAX_ATTACHMENTS),
    ] = []


@dataclasses.dataclass
class ChatBody:
    """The parsed request and the files it stored (removed by `discard`).

    `budget` is set once the stored files are counted in it (at the body's end, as the
    uploads do): the reader's per-chunk check already counts them among the bytes
    received, so counting each file as it is stored would count it twice."""

    data: ChatIn
    folder: Resolved | None = None
    stored: list[FileEntry] = dataclasses.field(default_factory=list)
    budget: Budget | None = None

    async def discard(self) -> None:
        await _remove(self.folder, self.stored, self.budget)
        self.stored = []


def is_form(request: AuthRequest) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


@dataclasses.dataclass(frozen=True)
class Receiver:
    """What a form's files need: the caller, their conversations, the upload size (MiB)
    and their storage budget (asked only when files come)."""

    me: str
    conversations: ConversationService
    limit_mb: int
    budget: Callable[[], Awaitable[Budget]]


async def read_body(request: AuthRequest, rt: Receiver) -> ChatBody:
    """The request as a `ChatIn`, its files stored: refusals are 4xx, with nothing kept."""
    if is_form(request):
        return await _form(request, rt)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > JSON_BYTES:
            raise ApiError(413, "too_large", "a chat request's JSON is at most 1 MiB")
    return ChatBody(_convert(bytes(body)))


def _convert(body: bytes | dict[str, object]) -> ChatIn:
    try:
        if isinstance(body, bytes):
            return msgspec.json.decode(body, type=ChatIn)
        return msgspec.convert(body, ChatIn)
    except msgspec.ValidationError as exc:
        # In words, as Litestar's own validation answers (no decoder jargon on a page).
        where = re.search(r"- at `\$\.?([^`]*)`$", str(exc))
        raise InvalidInputError(sentence(where.group(1) if where else "", str(exc))) from None
    except msgspec.DecodeError:
        raise InvalidInputError(sentence("", "JSON is malformed")) from None


async def _form(request: AuthRequest, rt: Receiver) -> ChatBody:
    budget = await rt.budget()
    out = ChatBody(data=ChatIn(text=""))
    fields: dict[str, list[str]] = {}
    field: str | None = None
    value = bytearray()
    conversation_id: str | None = None
    try:
        async with aclosing(read_multipart(request, rt.limit_mb, budget)) as events:
            async for event in events:
                if isinstance(event, Part):
                    segment = event.segment
                    if segment.filename is not None:
                        _file_part(segment, out, fields)
                        if not segment.filename:
                            continue  # a file input left empty: nothing to store
                        if out.folder is None:
                            conversation_id = await _conversation(rt, fields)
                            out.folder = await rt.conversations.attachment_folder(
                                rt.me, conversation_id
                            )
                        await event.save(out.folder, segment.filename)
                    else:
                        field = _field_part(segment, out, fields)
                        value = bytearray()
                elif isinstance(event, FileEntry):
                    out.stored.append(event)
                elif event is None:
                    if field is not None:
                        fields.setdefault(field, []).append(_text(field, value))
                        field = None
                elif field is not None:
                    value += event
                    if len(value) > FIELD_BYTES:
                        raise InvalidInputError(f"the field {field!r} is too long")
        budget.wrote(sum(entry.size for entry in out.stored))
        out.budget = budget  # counted: `discard` now gives the room back
        if "text" not in fields:
            raise InvalidInputError("the field 'text' is required")
        body: dict[str, object] = {
            "text": fields["text"][0],
            "attachments": fields.get("attachments", [])
            + [f"uploads/{conversation_id}/{e.name}" for e in out.stored],
        }
        if conversation_id is not None or "conversation_id" in fields:
            body["conversation_id"] = conversation_id or fields["conversation_id"][0]
        out.data = _convert(body)
    except BaseException:
        await out.discard()
        raise
    return out


def _file_part(event: MultipartSegment, out: ChatBody, fields: dict[str, list[str]]) -> None:
    if event.name != "file":
        raise InvalidInputError(f"files go in parts named 'file', not {event.name!r}")
    if len(out.stored) + len(fields.get("attachments", [])) >= MAX_ATTACHMENTS:
        raise InvalidInputError(f"at most {MAX_ATTACHMENTS} attachments go with one message")


def _field_part(event: MultipartSegment, out: ChatBody, fields: dict[str, list[str]]) -> str:
    name = event.name or ""
    if name not in FIELDS:
        raise InvalidInputError(
            f"unknown field {name!r}: send text, conversation_id, attachments and 'file' parts"
        )
    if name != "attachments" and name in fields:
        raise InvalidInputError(f"the field {name!r} is given twice")
    if name == "conversation_id" and out.folder is not None:
        raise InvalidInputError("send conversation_id before the files")
    return name


def _text(name: str, value: bytearray) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"the field {name!r} is not UTF-8 text") from None


async def _conversation(rt: Receiver, fields: dict[str, list[str]]) -> str:
    """The conversation the files go to: the one named, or a new one."""
    given = fields.get("conversation_id")
    if given is None:
        return (await rt.conversations.create(rt.me)).id
    if len(given[0]) > 64:
        raise InvalidInputError("conversation_id is at most 64 characters")
    return given[0]


async def _remove(folder: Resolved | None, stored: list[FileEntry], budget: Budget | None) -> None:
    if folder is None or not stored:
        return

    def remove() -> int:
        freed = 0
        for entry in stored:
            found = dataclasses.replace(
                folder,
                path=folder.path / entry.name,
                agent_path=f"{folder.agent_path}/{entry.name}",
                parts=(*folder.parts, entry.name),
            )
            try:
                fs.delete(found)
            except (SkaldError, OSError):  # gone already: nothing to undo
                continue
            freed += entry.size
        return freed

    freed = await asyncio.to_thread(remove)
    if budget is not None:
        budget.wrote(-freed)
