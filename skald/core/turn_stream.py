"""One turn as a streaming client sees it (`/v1/chat/completions`, `POST /api/chat`
with `stream`): pieces of text while it runs, progress notes (a tool running), then how
it ended.

Rule: subscribe to the member's events before sending, so no delta is missed; the
turn's result (`Sent.done`) is the authority for the end, the events only decorate.
A top-level approval request ends the wait with `awaiting_approval` (the turn goes on
waiting in the gate; a decision in the Inbox continues it, its answer lands in the
history; `/v1` hands it over at the next request: `features/tokens/openai/routes.py`).

Revocation: a stream opened with credentials that can be withdrawn (an API token)
goes through `while_alive`, the one place both streams ask whether they still hold:
the next request is refused by the authenticator, an open stream ends here.

Trap: the subscription is lossy (a reader 512 events behind is dropped): when it ends,
the wait goes on on the result alone, and the text still arrives, whole, at the end
(`Ended.text`, of which the caller sends what the deltas did not).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from skald.agent.events import TokenDelta, ToolCallUpdate, TurnDone
from skald.agent.loop import TurnResult
from skald.core.conversations import (
    ChatReply,
    CommandResult,
    Sent,
    Subscription,
)
from skald.core.events import ChatEvent
from skald.errors import SkaldError
from skald.plugins.facade import Member

ALIVE_CHECK_S = 1.0  # how often an open stream asks whether its credentials still hold
# What a stream says when its token was revoked (or expired) while it was open.
WITHDRAWN = "this API token was revoked or has expired: the stream ends (the turn goes on)"


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Progress:
    note: str


@dataclass(frozen=True)
class Ended:
    status: str  # done, awaiting_approval, failed
    text: str  # the final answer (done), or what the failure says
    # failed: the kind of failure (a `skald.errors` code or a model failure's kind, as
    # `POST /api/chat` answers it), and the technical text for those who manage models.
    code: str | None = None
    detail: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


Piece = Delta | Progress | Ended


@dataclass(frozen=True)
class Begun:
    """A message sent, with the subscription opened before it (`begin_turn`)."""

    subscription: Subscription
    sent: Sent | CommandResult


async def begin_turn(
    member: Member, conversation_id: str, text: str, attachments: list[str]
) -> Begun:
    """Subscribe, then send: what the service refuses (an empty message, an attachment
    not found) is raised here, before a streamed response has started."""
    service = member.server.conversations
    subscription = service.subscribe(member.id)
    try:
        sent = await service.send(member.id, conversation_id, text, attachments)
    except BaseException:
        subscription.close()
        raise
    return Begun(subscription=subscription, sent=sent)


async def run_turn(
    member: Member,
    conversation_id: str,
    text: str,
    attachments: list[str],
    begun: Begun | None = None,
) -> AsyncIterator[Piece]:
    begun = begun or await begin_turn(member, conversation_id, text, attachments)
    subscription, sent = begun.subscription, begun.sent
    events = aiter(subscription)
    pending: set[asyncio.Future[Any]] = set()
    try:
        if isinstance(sent, CommandResult):
            yield Ended(status="done", text=sent.result)
            return
        waiting = asyncio.ensure_future(
            member.conversations.awaiting_approval(conversation_id).wait()
        )
        first: asyncio.Future[Any] = asyncio.ensure_future(anext(events))
        reading: asyncio.Future[Any] | None = first
        pending = {waiting, first}
        while True:
            watched: list[asyncio.Future[Any]] = [sent.done, waiting]
            if reading is not None:
                watched.append(reading)
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if reading is not None and reading.done():
                pending.discard(reading)
                try:
                    event = reading.result()
                except StopAsyncIteration:
                    reading = None  # dropped: the result alone ends the wait
                else:
                    piece = _piece(event, conversation_id)
                    if piece is not None:
                        yield piece
                    reading = asyncio.ensure_future(anext(events))
                    pending.add(reading)
                continue
            if sent.done.done():
                yield _ended(member, sent.done.result())
                return
            if waiting.done():
                yield Ended(status="awaiting_approval", text="")
                return
    finally:
        for future in pending:
            future.cancel()
        for future in pending:
            with contextlib.suppress(BaseException):
                await future
        subscription.close()


def _piece(event: object, conversation_id: str) -> Piece | None:
    if not isinstance(event, ChatEvent):
        return None
    inner = event.event
    if inner.conversation_id != conversation_id or inner.depth != 0:
        return None
    if isinstance(inner, TokenDelta):
        return Delta(inner.text)
    if isinstance(inner, ToolCallUpdate):
        return Progress(f"skald tool {inner.name}: {inner.status}")
    return None


def _ended(member: Member, result: TurnResult) -> Ended:
    usage = result.usage
    if result.status == "failed":
        failure = member.conversations.plain_failure(
            TurnDone(
                conversation_id="",
                status="failed",
                error=result.error,
                error_code=result.error_code,
            )
        )
        return Ended(
            status="failed",
            text=failure.error or "the turn failed",
            code=failure.error_code or "internal",
            detail=failure.error_detail,
        )
    status = "awaiting_approval" if result.status == "awaiting_approval" else "done"
    return Ended(
        status=status,
        text=result.text,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )


def _event(name: str, body: object) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(body) + b"\n\n"


def chat_events(
    member: Member,
    conversation_id: str,
    begun: Begun,
    alive: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[bytes]:
    """`POST /api/chat/stream`: `delta` and `progress` events, then `done` with the
    reply (status, text, files written), as `POST /api/chat` answers it. The files come
    from the turn's own finished calls (`Sent.files`), not from reading the history.
    `alive`: the caller's credentials (`Principal.alive`); withdrawn, the stream ends
    with a failed `done` (`unauthenticated`), as `skald chat --stream` reads it."""
    gone = ChatReply(
        conversation_id=conversation_id,
        reply="",
        status="failed",
        error=WITHDRAWN,
        error_code="unauthenticated",
    )
    return while_alive(_chat_events(member, conversation_id, begun), alive, _event("done", gone))


async def _chat_events(member: Member, conversation_id: str, begun: Begun) -> AsyncIterator[bytes]:
    try:
        async for piece in run_turn(member, conversation_id, "", [], begun):
            if isinstance(piece, Delta):
                yield _event("delta", {"text": piece.text})
            elif isinstance(piece, Progress):
                yield _event("progress", {"note": piece.note})
            else:
                sent = begun.sent
                files = sent.files() if isinstance(sent, Sent) else []
                failed = piece.status == "failed"
                reply = ChatReply(
                    conversation_id=conversation_id,
                    reply="" if failed else piece.text,
                    status=piece.status,  # type: ignore[arg-type]
                    error=piece.text if failed else None,
                    error_code=piece.code if failed else None,
                    error_detail=piece.detail if failed else None,
                    files=files,
                )
                yield _event("done", reply)
    except SkaldError as exc:
        # The response has begun, so no 4xx can be sent any more: the failure is the
        # `done` event, with the code of the one error tree (`skald/errors.py`).
        yield _event("done", _failed(conversation_id, exc))


def _failed(conversation_id: str, exc: SkaldError) -> ChatReply:
    return ChatReply(
        conversation_id=conversation_id,
        reply="",
        status="failed",
        error=str(exc) or "the turn failed",
        error_code=exc.code,
    )


async def while_alive(
    events: AsyncIterator[bytes],
    alive: Callable[[], Awaitable[bool]] | None,
    farewell: bytes,
    every: float = ALIVE_CHECK_S,
) -> AsyncIterator[bytes]:
    """`events` for as long as the credentials that opened the stream hold: `alive` is
    asked every `every` seconds, while events flow and while the turn is silent (a
    model thinking, a tool running, an approval waiting); when it answers False,
    `farewell` is the last thing sent and the stream ends. The turn itself goes on (its
    answer lands in the history). Both token streams end this way: `/v1` and
    `POST /api/chat/stream`.

    Trap: `events` runs one step ahead in a task, so a silent turn cannot hold the
    check back; closing this generator cancels that step and closes `events` (their
    `finally` blocks release the subscription and the member's turn slot)."""
    if alive is None:
        async for event in events:
            yield event
        return
    source = aiter(events)
    step: asyncio.Future[bytes] = asyncio.ensure_future(anext(source))
    checked = time.monotonic()
    try:
        while True:
            left = every - (time.monotonic() - checked)
            done, _ = await asyncio.wait([step], timeout=max(0.0, left))
            if time.monotonic() - checked >= every:
                checked = time.monotonic()
                if not await alive():
                    yield farewell
                    return
            if not done:
                continue
            try:
                event = step.result()
            except StopAsyncIteration:
                return
            step = asyncio.ensure_future(anext(source))
            yield event
    finally:
        step.cancel()
        with contextlib.suppress(BaseException):
            await step
        with contextlib.suppress(BaseException):
            await source.aclose()  # type: ignore[attr-defined]
