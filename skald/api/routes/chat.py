"""Conversations, messages, slash commands, approvals and uploads (capability `chat`).

Everything here resolves in the caller's own runtime and owner database: another
member's conversation or call id is simply not found.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import msgspec
from litestar import Response, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from skald.agent import TurnResult
from skald.agent.prompts import defuse_harness_tags, view_context_block
from skald.api.deps import AnyRequest, requires
from skald.api.openapi import errors
from skald.api.routes.files import receive_upload
from skald.api.security import principal_of
from skald.core.runtime import Runtime
from skald.core.uploads import content_for, conversation_folder, resolve_attachment
from skald.core.user_runtime import UserRuntime
from skald.errors import InvalidInputError
from skald.store.conversations import Attachment, Conversation, HistoryItem

CHAT = [requires("chat")]
Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Title = Annotated[str, msgspec.Meta(max_length=200)]
CallId = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


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


class MessageIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: Text
    attachments: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=400)]], msgspec.Meta(max_length=20)
    ] = []
    view_context: Annotated[str, msgspec.Meta(max_length=2000)] | None = None


class Accepted(msgspec.Struct, frozen=True):
    accepted: bool = True


class CommandOut(msgspec.Struct, frozen=True, kw_only=True):
    command: str
    result: str
    conversation_id: str | None = None


class ApprovalIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    decision: Literal["approve", "reject"]


class ChatIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: Text
    conversation_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class ChatOut(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    reply: str
    status: Literal["done", "awaiting_approval", "failed"]
    error: str | None = None


async def _mine(request: AnyRequest, rt: Runtime) -> UserRuntime:
    return await rt.user_runtime(principal_of(request).user)


@get("/api/conversations", guards=CHAT)
async def list_conversations(
    request: AnyRequest, rt: NamedDependency[Runtime]
) -> list[Conversation]:
    return await (await _mine(request, rt)).hub.store.all()


@post("/api/conversations", guards=CHAT, status_code=201)
async def create_conversation(
    data: JSONBody[ConversationIn], request: AnyRequest, rt: NamedDependency[Runtime]
) -> Conversation:
    return await (await _mine(request, rt)).hub.new_conversation(data.title)


@patch("/api/conversations/{conversation_id:str}", guards=CHAT)
async def patch_conversation(
    conversation_id: FromPath[str],
    data: JSONBody[ConversationPatch],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
) -> Conversation:
    mine = await _mine(request, rt)
    await mine.hub.store.get(conversation_id)
    fields: dict[str, Any] = {
        k: v for k, v in (("title", data.title), ("open", data.open)) if v is not None
    }
    if data.model_id is not msgspec.UNSET:
        if data.model_id is not None:
            await _check_model(rt, data.model_id)
        fields["model_id"] = data.model_id
    if data.security_group is not msgspec.UNSET:
        if data.security_group is not None:
            await _check_group(rt, mine, data.security_group)
        fields["security_group"] = data.security_group
    return await mine.hub.update(conversation_id, **fields)


async def _check_group(rt: Runtime, mine: UserRuntime, name: str) -> None:
    if name not in {g.name for g in await my_groups(rt, mine)}:
        raise InvalidInputError("your role does not allow that security group")


class SecurityGroupView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    display_name: str


class MySecurityGroups(msgspec.Struct, frozen=True, kw_only=True):
    allowed: list[SecurityGroupView]
    default: str


async def my_groups(rt: Runtime, mine: UserRuntime) -> list[SecurityGroupView]:
    """The existing groups the member's role allows (its default always among them)."""
    attrs = (await mine.current_role()).attributes
    names = [*attrs.allowed_security_groups]
    if attrs.default_security_group not in names:
        names.insert(0, attrs.default_security_group)
    known = {g.name: g for g in await rt.core.registry.security_groups()}
    return [
        SecurityGroupView(name=n, display_name=known[n].display_name) for n in names if n in known
    ]


@get("/api/my/security-groups", guards=CHAT)
async def my_security_groups(request: AnyRequest, rt: NamedDependency[Runtime]) -> MySecurityGroups:
    mine = await _mine(request, rt)
    allowed = await my_groups(rt, mine)
    return MySecurityGroups(
        allowed=allowed, default=(await mine.current_role()).attributes.default_security_group
    )


async def _check_model(rt: Runtime, model_id: str) -> None:
    if not any(m.id == model_id and m.enabled for m in await rt.llm.store.models()):
        raise InvalidInputError("no such model, or it is switched off")


@get("/api/conversations/{conversation_id:str}/messages", guards=CHAT)
async def list_messages(
    conversation_id: FromPath[str], request: AnyRequest, rt: NamedDependency[Runtime]
) -> list[HistoryItem]:
    return await (await _mine(request, rt)).hub.store.items(conversation_id)


@post("/api/conversations/{conversation_id:str}/messages", guards=CHAT, status_code=202)
async def send_message(
    conversation_id: FromPath[str],
    data: JSONBody[MessageIn],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
) -> Response[Accepted | CommandOut]:
    mine = await _mine(request, rt)
    conversation = await mine.hub.store.get(conversation_id)
    if _is_command(data.text) and not data.attachments:
        return Response(await _command(mine, rt, conversation_id, data.text), status_code=200)
    await _enqueue(mine, rt, conversation, data.text, data.attachments, data.view_context)
    return Response(Accepted(), status_code=202)


async def _enqueue(
    mine: UserRuntime,
    rt: Runtime,
    conversation: Conversation,
    text: str,
    paths: list[str],
    view: str | None,
) -> asyncio.Future[TurnResult]:
    layout = rt.core.layout
    conversation_id = conversation.id
    attachments: list[Attachment] = [
        resolve_attachment(layout, mine.user.id, conversation_id, p) for p in dict.fromkeys(paths)
    ]
    body = defuse_harness_tags(text)
    if view:
        body = f"{view_context_block({'page': view})}\n\n{body}"
    content = await asyncio.to_thread(content_for, layout, mine.user.id, body, attachments)
    return await mine.hub.send(
        conversation_id, content, attachments, typed=text, conversation=conversation
    )


COMMANDS = ("stop", "compact", "new", "cost", "model")


def _is_command(text: str) -> bool:
    """`/stop`, `/model x`...: a known word right after the slash. "/etc/hosts?" is a message."""
    head = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return head.startswith("/") and head[1:] in COMMANDS


async def _command(mine: UserRuntime, rt: Runtime, conversation_id: str, text: str) -> CommandOut:
    name, _, arg = text[1:].strip().partition(" ")
    arg = arg.strip()
    if name == "stop":
        await mine.hub.stop(conversation_id)
        return CommandOut(command="stop", result="stopped")
    if name == "compact":
        await mine.hub.compact(conversation_id)
        return CommandOut(command="compact", result="compacting the conversation")
    if name == "new":
        conversation = await mine.hub.new_conversation()
        return CommandOut(command="new", result="new conversation", conversation_id=conversation.id)
    if name == "cost":
        usage = (await mine.hub.store.get(conversation_id)).usage
        cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
        return CommandOut(
            command="cost",
            result=f"{usage.input_tokens} tokens in, {usage.output_tokens} tokens out, cost {cost}",
        )
    if name == "model":
        return await _model_command(mine, rt, conversation_id, arg)
    raise InvalidInputError(f"unknown command /{name}")


async def _model_command(
    mine: UserRuntime, rt: Runtime, conversation_id: str, arg: str
) -> CommandOut:
    models = [m for m in await rt.llm.store.models() if m.enabled]
    if not arg:
        current = (await mine.hub.store.get(conversation_id)).model_id
        names = ", ".join(m.name for m in models) or "none set up"
        chosen = next((m.name for m in models if m.id == current), "AUTO")
        return CommandOut(command="model", result=f"using {chosen}; available: AUTO, {names}")
    if arg.lower() == "auto":
        await mine.hub.update(conversation_id, model_id=None)
        return CommandOut(command="model", result="using AUTO")
    match = next((m for m in models if m.name.lower() == arg.lower()), None)
    if match is None:
        raise InvalidInputError(f"no model named {arg!r}")
    await mine.hub.update(conversation_id, model_id=match.id)
    return CommandOut(command="model", result=f"using {match.name}")


@post("/api/conversations/{conversation_id:str}/stop", guards=CHAT, status_code=204)
async def stop(
    conversation_id: FromPath[str], request: AnyRequest, rt: NamedDependency[Runtime]
) -> None:
    await (await _mine(request, rt)).hub.stop(conversation_id)


@post("/api/approvals/{call_id:str}", guards=CHAT, status_code=204)
async def decide(
    call_id: FromPath[str],
    data: JSONBody[ApprovalIn],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
) -> None:
    await (await _mine(request, rt)).decide(call_id, data.decision == "approve")


@post("/api/chat", guards=CHAT, status_code=200, responses=errors(404))
async def chat(
    data: JSONBody[ChatIn], request: AnyRequest, rt: NamedDependency[Runtime]
) -> ChatOut:
    """One turn, synchronously: for scripts and `skald chat`."""
    mine = await _mine(request, rt)
    if data.conversation_id is None:
        conversation = await mine.hub.new_conversation()
    else:
        conversation = await mine.hub.store.get(data.conversation_id)
    conversation_id = conversation.id
    if _is_command(data.text):
        out = await _command(mine, rt, conversation_id, data.text)
        return ChatOut(
            conversation_id=out.conversation_id or conversation_id, reply=out.result, status="done"
        )
    done = await _enqueue(mine, rt, conversation, data.text, [], None)
    waiting: asyncio.Future[bool] = asyncio.ensure_future(
        mine.hub.awaiting_approval(conversation_id).wait()
    )
    try:
        await asyncio.wait([done, waiting], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
    finally:
        waiting.cancel()
    if not done.done():
        # The turn goes on once someone approves or rejects (from any client).
        return ChatOut(conversation_id=conversation_id, reply="", status="awaiting_approval")
    result = done.result()
    status: Literal["done", "awaiting_approval", "failed"] = (
        "done"
        if result.status in ("done", "stopped")
        else "awaiting_approval"
        if result.status == "awaiting_approval"
        else "failed"
    )
    return ChatOut(
        conversation_id=conversation_id, reply=result.text, status=status, error=result.error
    )


@post(
    "/api/uploads",
    guards=CHAT,
    status_code=201,
    responses=errors(404, 413, 507),
    request_max_body_size=None,  # capped while streaming, by the configured size
)
async def upload(
    conversation_id: FromQuery[str], request: AnyRequest, rt: NamedDependency[Runtime]
) -> Attachment:
    """Attach a file to a conversation (multipart field `file`): it lands in the member's
    home under uploads/<conversation>/, through the path router."""
    mine = await _mine(request, rt)
    await mine.hub.store.get(conversation_id)
    folder = await asyncio.to_thread(
        conversation_folder, rt.core.layout, mine.user.id, conversation_id
    )
    limit_mb = rt.config.assistant.upload_max_mb
    entries = await receive_upload(request, folder, limit_mb, await rt.budget(mine.user.id))
    path = f"uploads/{conversation_id}/{entries[0].name}"
    return await asyncio.to_thread(
        resolve_attachment, rt.core.layout, mine.user.id, conversation_id, path
    )


ROUTES = [
    list_conversations,
    create_conversation,
    patch_conversation,
    my_security_groups,
    list_messages,
    send_message,
    stop,
    decide,
    chat,
    upload,
]
