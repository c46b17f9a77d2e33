"""`GET /v1/models` and `POST /v1/chat/completions`: Skald as an OpenAI-compatible
server for Home Assistant, phone apps, desktop clients and scripts.

Rule: a request is one turn of the member's conversation service, with their agent,
memory, tools, permissions and approval rules; the client's `messages` are reconciled
with Skald's own history (`threads.py`): only the user's messages after the last
assistant message are sent. Client `tools` are refused (tools run inside Skald). An
approval request answers at once with a plain note pointing to the Inbox; the next
request in that conversation hands over the result that arrived meanwhile.

Trap: only API tokens (scope `openai`) reach `/v1` (`tokens/auth.py`): a browser
session here would have no thread of its own and no CSRF protection to lean on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.response import Stream

from skald.agent.prompts import default_chat_agent
from skald.api.deps import AuthRequest, group, requires
from skald.api.errors import EXCEPTION_HANDLERS
from skald.api.openapi import errors
from skald.api.schemas import ErrorBody
from skald.core.turn_stream import WITHDRAWN, Delta, Ended, Progress, run_turn, while_alive
from skald.errors import InvalidInputError
from skald.features.tokens.auth import token_id_of
from skald.features.tokens.openai.threads import Threads, fingerprint
from skald.features.tokens.openai.wire import (
    DONE,
    FAILURES,
    ChatRequest,
    OpenAIError,
    chunk,
    comment,
    completion,
    completion_id,
    error_body,
    error_type,
    retry_headers,
    turn_failure,
    usage_of,
)
from skald.features.tokens.routes import CHAT_CAP
from skald.features.tokens.service import TokenService
from skald.files.router import NewFile, upload_name
from skald.plugins.facade import Member, Server

DEFAULT_MODEL = "skald"
CONVERSATION_HEADER = "x-skald-conversation"
MAX_IMAGES = 8
MAX_KEY = 200
_IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


# -- the client's messages ----------------------------------------------------------------


@dataclass
class Incoming:
    """The client's messages, reconciled: what came before (for the fingerprint and, in
    a new conversation, as context) and the user's new text and pictures."""

    prior: list[tuple[str, str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (mime, bytes)


def _text_and_images(content: Any, images: list[tuple[str, bytes]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise OpenAIError(
            400, "a message's content is a string or a list of parts", param="messages"
        )
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if images is not None:
                images.append(_data_url(str(url or "")))
            texts.append("[image]" if images is None else "")
        else:
            raise OpenAIError(
                400, f"message parts of type {kind!r} are not supported", param="messages"
            )
    return "\n".join(t for t in texts if t)


def _data_url(url: str) -> tuple[str, bytes]:
    head, _, data = url.partition(",")
    mime = head.removeprefix("data:").removesuffix(";base64")
    if not head.startswith("data:") or not head.endswith(";base64") or mime not in _IMAGE_TYPES:
        raise OpenAIError(
            400,
            "images must be data: URLs (base64 PNG, JPEG, WebP or GIF); Skald fetches no links",
            param="messages",
        )
    try:
        return mime, base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise OpenAIError(400, "an image's base64 data is damaged", param="messages") from None


def reconcile(messages: list[dict[str, Any]]) -> Incoming:
    """Split the messages at the last assistant message; refuse what Skald cannot take."""
    if not messages:
        raise OpenAIError(400, "messages must not be empty", param="messages")
    turns: list[tuple[str, Any]] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("system", "developer"):
            continue  # Skald's agent has its own instructions
        if role == "tool" or (role == "assistant" and message.get("tool_calls")):
            raise OpenAIError(
                400,
                "tool messages are not accepted: tools run inside Skald",
                param="messages",
            )
        if role not in ("user", "assistant"):
            raise OpenAIError(400, f"unknown message role {role!r}", param="messages")
        turns.append((role, message.get("content")))
    last = max((i for i, (r, _) in enumerate(turns) if r == "assistant"), default=-1)
    new = turns[last + 1 :]
    if not new:
        raise OpenAIError(400, "the last message must be the user's", param="messages")
    out = Incoming(prior=[(r, _text_and_images(c, None)) for r, c in turns[: last + 1]])
    for _, content in new:
        out.texts.append(_text_and_images(content, out.images))
    if len(out.images) > MAX_IMAGES:
        raise OpenAIError(400, f"at most {MAX_IMAGES} images per request", param="messages")
    return out


def _new_turns(incoming: Incoming) -> list[tuple[str, str]]:
    return [("user", t) for t in incoming.texts]


def _transcript(prior: list[tuple[str, str]]) -> str:
    lines = [f"{'User' if r == 'user' else 'Assistant'}: {t}" for r, t in prior]
    return "Earlier in this conversation (from the app):\n" + "\n".join(lines) + "\n\n"


# -- models ---------------------------------------------------------------------------------


def _models(member: Member) -> dict[str, str]:
    """The names a client may ask for: `skald` and the member's own chat agent's id."""
    agent = default_chat_agent(member.role.attributes.default_chat_agent, member.agents)
    return {DEFAULT_MODEL: agent.id, agent.id: agent.id}


@get("/v1/models", guards=[requires(CHAT_CAP)])
async def list_models(request: AuthRequest, server: NamedDependency[Server]) -> dict[str, Any]:
    member = await server.open_member(request.user.user)
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "skald"}
            for name in _models(member)
        ],
    }


# -- chat completions --------------------------------------------------------------------


@dataclass
class Plan:
    """One request's conversation and what the answer starts with."""

    member: Member
    token_id: str
    conversation_id: str
    message: str
    attachments: list[str]
    keys: list[str]  # thread keys to point at the conversation afterwards
    prior: list[tuple[str, str]]
    new: list[tuple[str, str]]
    prefix: str = ""  # a result that arrived since the client's last request
    waiting: bool = False  # an approval still waits: answer with the note, send nothing


def _decode(body: bytes) -> ChatRequest:
    try:
        return msgspec.json.decode(body, type=ChatRequest)
    except msgspec.ValidationError as exc:
        raise OpenAIError(400, f"invalid request: {exc}") from None
    except msgspec.DecodeError:
        raise OpenAIError(400, "the request body is not valid JSON") from None


async def _plan(request: AuthRequest, server: Server, req: ChatRequest) -> Plan:
    token_id = token_id_of(request.user)
    if token_id is None:
        raise OpenAIError(401, "use an API token (Authorization: Bearer) for /v1")
    if req.tools or req.functions:
        raise OpenAIError(
            400,
            "client tools are not supported: Skald runs its own tools (and asks you in the "
            "Inbox before anything that needs it)",
            param="tools" if req.tools else "functions",
        )
    if req.n not in (None, 1):
        raise OpenAIError(400, "only n=1 is supported", param="n")
    member = await server.open_member(request.user.user)
    if req.model not in _models(member):
        raise OpenAIError(
            404,
            f"the model {req.model!r} does not exist or you may not use it; see GET /v1/models",
            param="model",
            code="model_not_found",
        )
    incoming = reconcile(req.messages)
    name = request.headers.get(CONVERSATION_HEADER) or req.user
    if name is not None and not 1 <= len(name) <= MAX_KEY:
        raise OpenAIError(400, f"a conversation name is 1 to {MAX_KEY} characters", param="user")
    keys = [f"key:{token_id}:{name}"] if name else []
    lookup = keys[0] if keys else f"hist:{token_id}:{fingerprint(incoming.prior)}"
    threads = Threads(member.db)
    thread = await threads.find(lookup) if (keys or incoming.prior) else None
    service = server.conversations
    message = "\n\n".join(t for t in incoming.texts if t)
    plan = Plan(
        member=member,
        token_id=token_id,
        conversation_id="",
        message=message,
        attachments=[],
        keys=keys,
        prior=incoming.prior,
        new=_new_turns(incoming),
    )
    if thread is not None:
        try:
            conversation = await service.get(member.id, thread.conversation_id)
        except Exception:  # gone (deleted in the web app): start afresh below
            thread = None
    if thread is None:
        conversation = await service.create(member.id, "")
        if incoming.prior:
            plan.message = _transcript(incoming.prior) + message
    plan.conversation_id = conversation.id
    if thread is not None:
        if conversation.status == "awaiting_approval":
            plan.waiting = True
            return plan
        history = await service.history(member.id, conversation.id)
        plan.prefix = "\n\n".join(
            i.text for i in history if i.seq > thread.seen_seq and i.role == "assistant" and i.text
        )
    plan.attachments = await _save_images(server, member, conversation.id, incoming.images)
    if not plan.message and not plan.attachments:
        raise OpenAIError(400, "the user's message is empty", param="messages")
    return plan


async def _save_images(
    server: Server, member: Member, conversation_id: str, images: list[tuple[str, bytes]]
) -> list[str]:
    if not images:
        return []
    limit = server.config.assistant.upload_max_mb * 1024 * 1024
    folder = await server.conversations.attachment_folder(member.id, conversation_id)
    budget = None if member.budget is None else await member.budget()
    if any(len(data) > limit for _, data in images):
        raise OpenAIError(413, "an image is larger than the upload limit", param="messages")
    if budget is not None:  # all of them, before any is written: over quota 413, disk 507
        await budget.recheck(sum(len(data) for _, data in images))
    paths = []
    for n, (mime, data) in enumerate(images, 1):

        def write(name: str, data: bytes = data) -> str:
            new = NewFile(folder, upload_name(name))
            new.write(data)
            return new.commit().name

        stored = await asyncio.to_thread(write, f"image-{n}.{_IMAGE_TYPES[mime]}")
        if budget is not None:
            budget.wrote(len(data))  # the next request sees it, not the guard's next walk
        paths.append(f"uploads/{conversation_id}/{stored}")
    return paths


def _inbox_note(request: Request[Any, Any, Any]) -> str:
    link = str(request.base_url).rstrip("/") + "/#/inbox"
    return (
        f"This needs your approval first: it waits in your Inbox ({link}). "
        "Decide there, then ask me again and I'll give you the result."
    )


async def _remember(plan: Plan, content: str) -> None:
    history = await plan.member.server.conversations.history(plan.member.id, plan.conversation_id)
    seen = max((i.seq for i in history), default=0)
    exchange = [*plan.prior, *plan.new, ("assistant", content)]
    keys = [*plan.keys, f"hist:{plan.token_id}:{fingerprint(exchange)}"]
    await Threads(plan.member.db).keep(keys, plan.conversation_id, seen)


async def _pieces(
    plan: Plan, tokens: TokenService
) -> AsyncGenerator[Delta | Progress | Ended, None]:
    if plan.waiting:
        yield Ended(status="awaiting_approval", text="")
        return
    async with tokens.turn_slot(plan.member.id):
        async for piece in run_turn(
            plan.member, plan.conversation_id, plan.message, plan.attachments
        ):
            yield piece


def _closing(ended: Ended, note: str) -> str:
    if ended.status == "awaiting_approval":
        return note
    return ended.text


@post(
    "/v1/chat/completions",
    guards=[requires(CHAT_CAP)],
    status_code=200,
    request_max_body_size=64 * 1024 * 1024,
    responses=errors(400),  # the body is read here (`_decode`), not by Litestar
)
async def chat_completions(request: AuthRequest, server: NamedDependency[Server]) -> Response[Any]:
    req = _decode(await request.body())
    plan = await _plan(request, server, req)
    note = _inbox_note(request)
    if req.stream:
        include_usage = bool((req.stream_options or {}).get("include_usage"))
        tokens = server.state(TokenService)
        # The shared end of a token's stream (`while_alive`): revoked, it closes.
        revoked = _error_line(WITHDRAWN, "authentication_error", "unauthenticated")
        return Stream(
            while_alive(
                _stream(plan, req.model, note, include_usage, tokens), request.user.alive, revoked
            ),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Skald-Conversation-Id": plan.conversation_id},
        )
    ended = Ended(status="failed", text="")
    async for piece in _pieces(plan, server.state(TokenService)):
        if isinstance(piece, Ended):
            ended = piece
    content = plan.prefix + ("\n\n" if plan.prefix else "") + _closing(ended, note)
    await _remember(plan, content)
    if ended.status == "failed":
        status, kind = turn_failure(ended.code)
        raise OpenAIError(
            status,
            content,
            kind=kind,
            code=ended.code or "turn_failed",
            headers=retry_headers(kind),
        )
    return Response(
        completion(
            completion_id(),
            req.model,
            content,
            "stop",
            usage_of(ended.input_tokens, ended.output_tokens),
        ),
        headers={"X-Skald-Conversation-Id": plan.conversation_id},
    )


async def _stream(
    plan: Plan, model: str, note: str, include_usage: bool, tokens: TokenService
) -> AsyncIterator[bytes]:
    cid, created = completion_id(), int(time.time())
    yield chunk(cid, model, created, {"role": "assistant", "content": ""})
    sent = ""
    if plan.prefix:
        sent = plan.prefix + "\n\n"
        yield chunk(cid, model, created, {"content": sent})
    round_text = ""
    ended = Ended(status="failed", text="the turn ended without an answer")
    # Closed at once when this stream is (revoked, the client gone): the turn slot is freed.
    async with contextlib.aclosing(_pieces(plan, tokens)) as pieces:
        async for piece in pieces:
            if isinstance(piece, Ended):
                ended = piece
                break
            if isinstance(piece, Delta):
                round_text += piece.text
                sent += piece.text
                yield chunk(cid, model, created, {"content": piece.text})
            else:
                round_text = ""  # a tool round: the final answer starts afresh
                yield comment(piece.note)  # Skald's tool calls: progress clients skip
    closing = _closing(ended, note)
    if ended.status == "done" and closing.startswith(round_text):
        rest = closing[len(round_text) :]
    else:
        rest = ("\n\n" if sent else "") + closing
    if rest:
        sent += rest
        yield chunk(cid, model, created, {"content": rest})
    await _remember(plan, sent)
    if ended.status == "failed":
        _, kind = turn_failure(ended.code)
        yield _error_line(ended.text, kind, ended.code)
        return
    yield chunk(cid, model, created, {}, finish="stop")
    if include_usage:
        usage = usage_of(ended.input_tokens, ended.output_tokens)
        yield chunk(cid, model, created, {}, usage=usage, choices=False)
    yield DONE


# -- errors in OpenAI's shape ------------------------------------------------------------


def _error_line(message: str, kind: str, code: str | None = None) -> bytes:
    """An error inside a stream that has begun (the official client raises on it);
    `code`: the failed turn's Skald code."""
    return b"data: " + msgspec.json.encode(error_body(message, kind, code=code)) + b"\n\n"


def _openai_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if isinstance(exc, OpenAIError):
        return Response(
            error_body(exc.message, exc.kind, exc.param, exc.code),
            status_code=exc.status,
            headers=exc.headers,
        )
    if isinstance(exc, InvalidInputError):
        return Response(error_body(str(exc), "invalid_request_error"), status_code=400)
    handler = next(h for kind, h in EXCEPTION_HANDLERS.items() if isinstance(exc, kind))
    answer = handler(request, exc)
    body = answer.content
    message, code = (
        (body.error.message, body.error.code) if isinstance(body, ErrorBody) else (str(exc), None)
    )
    status, kind = FAILURES.get(code or "", (answer.status_code, error_type(answer.status_code)))
    headers = {k: v for k, v in answer.headers.items() if k.lower() == "retry-after"}
    return Response(
        error_body(message, kind, code=code),
        status_code=status,
        headers={**headers, **(retry_headers(kind) or {})} or None,
    )


ROUTES = [
    group(
        list_models,
        chat_completions,
        # Every kind the app's own handlers name, not only `Exception`: Litestar picks the
        # handler of the first class in the exception's MRO, so the app's `HTTPException`
        # handler would otherwise answer the auth middleware's refusals (401, 403, 423,
        # 429) in Skald's shape.
        exception_handlers={kind: _openai_error for kind in (*EXCEPTION_HANDLERS, Exception)},
    )
]
