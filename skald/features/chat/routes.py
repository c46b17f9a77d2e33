"""Conversations, messages, slash commands, approvals and uploads (capability `chat`).

Thin: parse, authorise (the `chat` guard), call the conversation service
(`skald/core/conversations.py`) with the caller's user id, serialise. Everything
resolves in the caller's own runtime and owner database: another member's
conversation or call id is simply not found. The handlers see the facade only
(`Server`: `conversations`, `budget`, `config`, `fetch`/`open_member`); the upload reader
is the API's (`skald.api.multipart.receive_upload`, shared with the Files API).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import Response, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.response import Stream

from skald.api.deps import AuthRequest, group, requires
from skald.api.multipart import receive_upload
from skald.api.openapi import errors
from skald.core.conversations import (
    VIEW_INPUT_CHARS,
    VIEW_INPUT_ITEMS,
    VIEW_INPUT_LABEL,
    ChatReply,
    CommandInfo,
    CommandResult,
    SecurityGroupView,
)
from skald.core.turn_stream import begin_turn, chat_events
from skald.errors import InvalidInputError, NotFoundError
from skald.features.chat.form import ChatIn, Receiver, read_body
from skald.features.chat.openapi import ChatOperation
from skald.permissions import CHAT as CHAT_USE
from skald.plugins.facade import Server  # Litestar reads the annotations
from skald.store.conversations import Attachment, Conversation, HistoryItem, SearchHit, ViewItem

CHAT_CAP = CHAT_USE
# Every route's guard: the group in ROUTES gives it.
CHAT = [requires(CHAT_CAP)]
Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Title = Annotated[str, msgspec.Meta(max_length=200)]
CallId = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]

# The largest sequence number SQLite stores (a signed 64-bit integer).
MAX_SEQ = 2**63 - 1


class ConversationIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: Title = ""


class ConversationPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: Title | None = None
    open: bool | None = None
    # Absent: unchanged; null: AUTO; an id: that model.
    model_id: Annotated[str, msgspec.Meta(max_length=64)] | msgspec.UnsetType | None = msgspec.UNSET
    # Absent: unchanged; null: the role's default; a name: that group (the role must allow it).
    security_group: Annotated[str, msgspec.Meta(max_length=32)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )


class ViewItemIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    # Generous: the service trims to its bounds with a note (never a refusal for length).
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=VIEW_INPUT_LABEL)]
    value: Annotated[str, msgspec.Meta(max_length=VIEW_INPUT_CHARS)]


class MessageIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: Text
    attachments: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=400)]], msgspec.Meta(max_length=20)
    ] = []
    # Label/value items (shown as chips); a bare string is one "page" item (older clients).
    view_context: (
        Annotated[list[ViewItemIn], msgspec.Meta(max_length=VIEW_INPUT_ITEMS)]
        | Annotated[str, msgspec.Meta(max_length=VIEW_INPUT_CHARS)]
        | None
    ) = None


class ResendIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Absent: the message as it was (retry, regenerate); a text: edited and sent again.
    text: Text | None = None


class Accepted(msgspec.Struct, frozen=True, kw_only=True):
    accepted: bool = True
    # A picture went with the message but no model in use can see it: only the text did.
    images_not_seen: bool = False
    # A video went with it but the model in use cannot watch videos: only its name did.
    videos_not_seen: bool = False


class ApprovalIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    decision: Literal["approve", "reject"]


class MySecurityGroups(msgspec.Struct, frozen=True, kw_only=True):
    allowed: list[SecurityGroupView]
    default: str


def _me(request: AuthRequest) -> str:
    """The caller's user id: the `me` dependency of every chat route."""
    return request.user.user.id


@get("/api/conversations")
async def list_conversations(
    me: NamedDependency[str], server: NamedDependency[Server]
) -> list[Conversation]:
    return await server.conversations.all(me)


@post("/api/conversations", status_code=201)
async def create_conversation(
    data: JSONBody[ConversationIn], me: NamedDependency[str], server: NamedDependency[Server]
) -> Conversation:
    return await server.conversations.create(me, data.title)


@patch("/api/conversations/{conversation_id:str}")
async def patch_conversation(
    conversation_id: FromPath[str],
    data: JSONBody[ConversationPatch],
    me: NamedDependency[str],
    server: NamedDependency[Server],
) -> Conversation:
    return await server.conversations.update(
        me,
        conversation_id,
        title=data.title,
        open=data.open,
        model_id=data.model_id,
        security_group=data.security_group,
    )


@get("/api/my/security-groups")
async def my_security_groups(
    me: NamedDependency[str], server: NamedDependency[Server]
) -> MySecurityGroups:
    return MySecurityGroups(
        allowed=await server.conversations.security_groups(me),
        default=await server.conversations.default_security_group(me),
    )


@get("/api/chat/commands")
async def chat_commands(request: AuthRequest, server: NamedDependency[Server]) -> list[CommandInfo]:
    """The slash commands the composer recognises (the one list, kept on the server):
    the built-in ones and the features' ones the caller may run."""
    return server.conversations.commands(request.user.role)


@get("/api/conversations/{conversation_id:str}/messages")
async def list_messages(
    conversation_id: FromPath[str], me: NamedDependency[str], server: NamedDependency[Server]
) -> list[HistoryItem]:
    return await server.conversations.history(me, conversation_id)


@post("/api/conversations/{conversation_id:str}/messages", status_code=202)
async def send_message(
    conversation_id: FromPath[str],
    data: JSONBody[MessageIn],
    me: NamedDependency[str],
    server: NamedDependency[Server],
) -> Response[Accepted | CommandResult]:
    view = data.view_context
    out = await server.conversations.send(
        me,
        conversation_id,
        data.text,
        data.attachments,
        view
        if view is None or isinstance(view, str)
        else [ViewItem(i.label, i.value) for i in view],
    )
    if isinstance(out, CommandResult):
        return Response(out, status_code=200)
    seen = Accepted(images_not_seen=out.images_not_seen, videos_not_seen=out.videos_not_seen)
    return Response(seen, status_code=202)


@post(
    "/api/conversations/{conversation_id:str}/messages/{seq:int}/resend",
    status_code=202,
    responses=errors(404, 409),
)
async def resend_message(
    conversation_id: FromPath[str],
    seq: FromPath[int],
    data: JSONBody[ResendIn],
    me: NamedDependency[str],
    server: NamedDependency[Server],
) -> Accepted:
    """Retry, regenerate or edit: the member's message `seq` is sent again (with `text`,
    edited), and it and everything after it leave the history first."""
    if not 0 <= seq <= MAX_SEQ:
        # No message has it, and SQLite cannot even bind it (an overflow was a 500).
        raise NotFoundError("no such message of yours in this conversation")
    out = await server.conversations.resend(me, conversation_id, seq, data.text)
    return Accepted(images_not_seen=out.images_not_seen, videos_not_seen=out.videos_not_seen)


@get("/api/chat/search")
async def search_conversations(
    me: NamedDependency[str],
    server: NamedDependency[Server],
    q: FromQuery[str] = "",
) -> list[SearchHit]:
    """The caller's own conversations whose title or message text has every word of `q`."""
    return await server.conversations.search(me, q)


@post("/api/conversations/{conversation_id:str}/stop", status_code=204)
async def stop(
    conversation_id: FromPath[str], me: NamedDependency[str], server: NamedDependency[Server]
) -> None:
    await server.conversations.stop(me, conversation_id)


@post("/api/approvals/{call_id:str}", status_code=204)
async def decide(
    call_id: FromPath[str],
    data: JSONBody[ApprovalIn],
    me: NamedDependency[str],
    server: NamedDependency[Server],
) -> None:
    await server.conversations.decide(me, call_id, data.decision == "approve")


@post(
    "/api/chat",
    status_code=200,
    responses=errors(400, 404, 413, 507),
    request_max_body_size=None,  # capped while streaming (JSON 1 MiB, files the upload size)
    operation_class=ChatOperation,
)
async def chat(
    request: AuthRequest, me: NamedDependency[str], server: NamedDependency[Server]
) -> ChatReply:
    """One turn, synchronously: for scripts and `skald chat`. The body is JSON, or
    multipart/form-data with the files in the same request (`file` parts, the limits
    of `POST /api/uploads`). The reply names the files the turn wrote (`files`, fetched
    with `GET /api/file`), from the turn's own finished calls."""
    service = server.conversations
    body = await read_body(request, _receiver(me, server))
    data = body.data
    try:
        _attachments_need_a_conversation(data)
        cid = data.conversation_id
        if cid is None:
            cid = (await service.create(me)).id
        # Another member's conversation, an attachment not found: refused before anything
        # is sent, and the files this request stored are removed again.
        sent = await service.send(me, cid, data.text, data.attachments)
    except BaseException:
        await body.discard()
        raise
    if isinstance(sent, CommandResult):
        cid = sent.conversation_id or cid
        return ChatReply(conversation_id=cid, reply=sent.result, status="done")
    return await service.wait(me, sent)


@post(
    "/api/chat/stream",
    status_code=200,
    responses={
        200: ResponseSpec(
            data_container=None,
            media_type="text/event-stream",
            description="Server-sent events: `delta` ({text}), `progress` ({note}), then "
            "`done` with the reply `POST /api/chat` would answer.",
        ),
        **errors(400, 404, 413, 507),
    },
    request_max_body_size=None,
    operation_class=ChatOperation,
)
async def chat_stream(
    request: AuthRequest, me: NamedDependency[str], server: NamedDependency[Server]
) -> Stream:
    """One turn, streamed (`skald chat --stream`): a conversation is made when none is
    given. The body as `POST /api/chat` takes it (JSON, or multipart with files)."""
    service = server.conversations
    body = await read_body(request, _receiver(me, server))
    data = body.data
    try:
        _attachments_need_a_conversation(data)
        cid = data.conversation_id or (await service.create(me)).id
        member = await server.open_member((await server.fetch(me))[0])
        # Sent before the response starts: a refusal is still a clean 4xx.
        begun = await begin_turn(member, cid, data.text, list(data.attachments))
    except BaseException:
        await body.discard()
        raise
    return Stream(
        chat_events(member, cid, begun, request.user.alive),  # ends when a token is revoked
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


def _receiver(me: str, server: Server) -> Receiver:
    limit_mb = server.config.assistant.upload_max_mb
    return Receiver(
        me=me,
        conversations=server.conversations,
        limit_mb=limit_mb,
        budget=lambda: server.budget(me),
    )


def _attachments_need_a_conversation(data: ChatIn) -> None:
    if data.conversation_id is None and data.attachments:
        raise InvalidInputError("attachments belong to a conversation: give its conversation_id")


@post(
    "/api/uploads",
    status_code=201,
    responses=errors(404, 413, 507),
    request_max_body_size=None,  # capped while streaming, by the configured size
)
async def upload(
    conversation_id: FromQuery[str],
    request: AuthRequest,
    me: NamedDependency[str],
    server: NamedDependency[Server],
) -> Attachment:
    """Attach a file to a conversation (multipart field `file`): it lands in the member's
    home under uploads/<conversation>/, through the path router."""
    folder = await server.conversations.attachment_folder(me, conversation_id)
    limit_mb = server.config.assistant.upload_max_mb
    entries = await receive_upload(request, folder, limit_mb, await server.budget(me))
    path = f"uploads/{conversation_id}/{entries[0].name}"
    return await server.conversations.attachment(me, conversation_id, path)


ROUTES = [
    group(
        list_conversations,
        create_conversation,
        patch_conversation,
        my_security_groups,
        chat_commands,
        list_messages,
        send_message,
        resend_message,
        search_conversations,
        stop,
        decide,
        chat,
        chat_stream,
        upload,
        guards=CHAT,
        dependencies={"me": Provide(_me, sync_to_thread=False)},
    )
]
