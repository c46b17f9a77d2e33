"""The conversation service: everything any channel does with a member's conversations.

Channel-neutral: every method takes the member's user id, never an HTTP request or a
session, so the web routes, `POST /api/chat` (and `skald chat` through it), and later
Telegram, the scheduler and system agents all make the same calls: create and list
conversations, send a message (attachments, view context), run a slash command, stop,
decide an approval, wait for a turn or an approval, and follow the member's events.

Rule: authorising is the caller's job (a route's `requires("chat")` guard, or the
channel's own `can(role, capability)`); this service only makes sure everything
resolves in that member's own runtime and owner database, so another member's
conversation or call id is simply "not found".

Trap: a member's runtime exists only while their data is unlocked. An encrypted member
with no session is locked: `member()` raises `DatabaseClosedError` ("sign in again"),
so a background caller must expect it rather than hold a key of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from skald.agent import ToolCallUpdate, TurnDone, TurnResult
from skald.agent.prompts import defuse_harness_tags
from skald.core.events import Connection, ServerEvent
from skald.core.prompt_blocks import view_context_block
from skald.core.uploads import VIDEO_TYPES, content_for, conversation_folder, resolve_attachment
from skald.errors import InvalidInputError, NotFoundError
from skald.files.router import Resolved
from skald.llm.types import TextPart
from skald.permissions import CapabilityHolder, can
from skald.store.conversations import (
    Attachment,
    Conversation,
    HistoryItem,
    SearchHit,
    ViewItem,
    display_text,
    view_items,
)

if TYPE_CHECKING:
    from skald.core.events import EventHub
    from skald.core.llm_service import LlmService
    from skald.core.user_runtime import UserRuntime
    from skald.paths import DataLayout
    from skald.plugins.manager import Plugins
    from skald.store.registry import Registry
    from skald.store.rows import User

__all__ = [
    "COMMANDS",
    "ChatReply",
    "CommandInfo",
    "CommandResult",
    "ConversationService",
    "SecurityGroupView",
    "Sent",
    "Subscription",
    "ViewContext",
    "is_command",
]

# What "share what I'm looking at" may carry: label/value facts (a page, a folder, a
# highlighted passage with its line numbers), bounded here, the one limit (issue 31).
# Over-long input is trimmed with a note saying how much was left out, never refused;
# the route's schema only stops what no client would send (`VIEW_INPUT_*`).
VIEW_MAX_ITEMS = 12
VIEW_LABEL_MAX = 120
VIEW_VALUE_MAX = 4096
VIEW_TOTAL_MAX = 16_384
VIEW_INPUT_ITEMS = 64
VIEW_INPUT_LABEL = 1000
VIEW_INPUT_CHARS = 262_144
ViewContext = Sequence[ViewItem]


class CommandInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A slash command, as the composer offers it (`GET /api/chat/commands`)."""

    name: str
    usage: str
    description: str


# The one list of slash commands: the web client fetches it, it does not keep a copy.
COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo(name="stop", usage="/stop", description="stop the running turn"),
    CommandInfo(
        name="compact", usage="/compact", description="summarise older messages to save room"
    ),
    CommandInfo(
        name="model",
        usage="/model [name|auto]",
        description="show the model in use, or choose one for this conversation",
    ),
    CommandInfo(name="cost", usage="/cost", description="tokens and cost of this conversation"),
    CommandInfo(name="new", usage="/new", description="start a new conversation"),
)
_COMMAND_NAMES = frozenset(c.name for c in COMMANDS)


def is_command(text: str) -> bool:
    """`/stop`, `/model x`...: a known word right after the slash. "/etc/hosts?" is a message."""
    head = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return head.startswith("/") and head[1:] in _COMMAND_NAMES


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    command: str
    result: str
    conversation_id: str | None = None  # the new conversation, for /new


class ChatReply(msgspec.Struct, frozen=True, kw_only=True):
    """One turn's outcome, for a caller that waits (`POST /api/chat`, a bot, a schedule)."""

    conversation_id: str
    reply: str
    status: Literal["done", "awaiting_approval", "failed"]
    error: str | None = None  # failed: a plain sentence for the member
    error_code: str | None = None  # failed: what kind of failure (see plain_errors)
    # failed: the technical text, for members who manage models only
    error_detail: str | None = None
    # Files the turn wrote (agent paths), for a script to fetch (`skald chat --out`).
    files: list[str] = []


class SecurityGroupView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    display_name: str


@dataclass(frozen=True)
class Sent:
    """A queued message: `done` resolves with the turn's result when it ends.
    `images_not_seen`: a picture was attached but no model in use can look at it, so
    only the text (and a note about the picture) went to the model."""

    conversation_id: str
    done: asyncio.Future[TurnResult]
    images_not_seen: bool = False
    videos_not_seen: bool = False  # the same for a video and a model not marked `video`
    # The top-level calls that finished `done` while the turn ran, filled as it runs
    # (the hub's job keeps the same list): what `files` reads, with no database trip.
    finished: list[ToolCallUpdate] = field(default_factory=list)

    def files(self) -> list[str]:
        """The paths the file tools wrote in this turn so far (each once, in order)."""
        return written_files(self.finished)


WRITERS = frozenset({"write_file", "edit_file"})


def written_files(calls: Sequence[ToolCallUpdate]) -> list[str]:
    """The paths of the file-writing calls among `calls` (each once, in order)."""
    paths = [
        str(call.arguments["path"])
        for call in calls
        if call.name in WRITERS and call.status == "done" and "path" in call.arguments
    ]
    return list(dict.fromkeys(paths))


def _view(view: str | ViewContext | None) -> list[ViewItem]:
    """The view context as items, checked against the bounds (a bare string is one
    "page" item, as older clients send it)."""
    if view is None:
        return []
    items = [ViewItem("page", view)] if isinstance(view, str) else list(view)
    out: list[ViewItem] = []
    used = 0
    for item in items[:VIEW_MAX_ITEMS]:
        label = " ".join(item.label.split())[:VIEW_LABEL_MAX].strip()
        if not label or ":" in label:
            raise InvalidInputError("a view context label is 1 or more characters without a colon")
        value = _view_value(item.value)
        room = max(0, min(VIEW_VALUE_MAX, VIEW_TOTAL_MAX - used))
        if len(value) > room:
            left = len(value) - room
            kept = value[:room].rstrip()
            value = (f"{kept}\n" if kept else "") + f"[… {left:,} characters left out]"
        if value.strip():
            out.append(ViewItem(label, value))
            used += len(value)
    if len(items) > VIEW_MAX_ITEMS:
        more = len(items) - VIEW_MAX_ITEMS
        out.append(ViewItem("left out", f"{more} more item{'s' if more > 1 else ''}"))
    return out


def _view_value(raw: str) -> str:
    """Lines kept (a passage keeps its line numbers), tabs kept, other control
    characters and trailing spaces dropped."""
    lines = [
        "".join(ch for ch in line if ch == "\t" or ch >= " ").rstrip()
        for line in raw.replace("\r\n", "\n").split("\n")
    ]
    return "\n".join(lines).strip("\n")


class Subscription:
    """A member's live events without a web session: iterate, then `close()` (or use
    `async with`). Lossy like a WebSocket (a reader 512 events behind is dropped and the
    iteration ends); the owner database stays the authority. Deactivating or deleting the
    member ends it too."""

    def __init__(self, service: ConversationService, conn: Connection) -> None:
        self._service = service
        self._conn = conn

    def __aiter__(self) -> AsyncIterator[ServerEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[ServerEvent]:
        while True:
            event = await self._conn.queue.get()
            if event is None:
                return
            yield event

    def close(self) -> None:
        self._conn.close()
        self._service.events.disconnect(self._conn)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LiveMembers(Protocol):
    """The unlocked members' runtimes (`Runtime` is one)."""

    user_runtimes: dict[str, UserRuntime]

    async def user_runtime(self, user: User) -> UserRuntime: ...


@dataclass(eq=False, kw_only=True)
class ConversationService:
    layout: DataLayout
    registry: Registry
    llm: LlmService
    events: EventHub
    plugins: Plugins  # the features' chat commands
    members: LiveMembers

    async def member(self, user_id: str) -> UserRuntime:
        """The member's live runtime (DatabaseClosedError while their data is locked)."""
        mine = self.members.user_runtimes.get(user_id)  # the hot path: no database trip
        if mine is not None:
            return mine
        user = await self.registry.get_user(user_id)
        if user is None or not user.active:
            raise NotFoundError("no such user")
        return await self.members.user_runtime(user)

    # -- conversations ----------------------------------------------------------------

    async def all(self, user_id: str) -> list[Conversation]:
        """Every conversation of the member, open or closed."""
        return await (await self.member(user_id)).hub.store.all()

    async def create(self, user_id: str, title: str = "") -> Conversation:
        return await (await self.member(user_id)).hub.new_conversation(title)

    async def get(self, user_id: str, conversation_id: str) -> Conversation:
        return await (await self.member(user_id)).hub.store.get(conversation_id)

    async def history(self, user_id: str, conversation_id: str) -> list[HistoryItem]:
        return await (await self.member(user_id)).hub.store.items(conversation_id)

    async def update(
        self,
        user_id: str,
        conversation_id: str,
        *,
        title: str | None = None,
        open: bool | None = None,
        model_id: str | msgspec.UnsetType | None = msgspec.UNSET,
        security_group: str | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> Conversation:
        """Change a conversation. For `model_id` and `security_group`: UNSET leaves it,
        None goes back to AUTO / the role's default, a value must be allowed."""
        mine = await self.member(user_id)
        await mine.hub.store.get(conversation_id)
        fields: dict[str, Any] = {
            k: v for k, v in (("title", title), ("open", open)) if v is not None
        }
        if model_id is not msgspec.UNSET:
            if model_id is not None:
                await self._check_model(model_id)
            fields["model_id"] = model_id
        if security_group is not msgspec.UNSET:
            if security_group is not None and security_group not in {
                g.name for g in await self.security_groups(user_id)
            }:
                raise InvalidInputError("your role does not allow that security group")
            fields["security_group"] = security_group
        return await mine.hub.update(conversation_id, **fields)

    async def _check_model(self, model_id: str) -> None:
        if not any(
            m.id == model_id and m.enabled and m.kind == "chat"
            for m in await self.llm.store.models()
        ):
            raise InvalidInputError("no such model, or it is switched off")

    async def security_groups(self, user_id: str) -> list[SecurityGroupView]:
        """The existing groups the member's role allows (its default always among them)."""
        attrs = (await (await self.member(user_id)).current_role()).attributes
        names = [*attrs.allowed_security_groups]
        if attrs.default_security_group not in names:
            names.insert(0, attrs.default_security_group)
        known = {g.name: g for g in await self.registry.security_groups()}
        return [
            SecurityGroupView(name=n, display_name=known[n].display_name)
            for n in names
            if n in known
        ]

    async def default_security_group(self, user_id: str) -> str:
        return (await (await self.member(user_id)).current_role()).attributes.default_security_group

    # -- messages and commands --------------------------------------------------------

    async def send(
        self,
        user_id: str,
        conversation_id: str,
        text: str,
        attachments: list[str] | tuple[str, ...] = (),
        view_context: str | ViewContext | None = None,
    ) -> Sent | CommandResult:
        """A message from the member: a known slash command (with no attachments) runs at
        once and is never stored; anything else is queued as a turn."""
        mine = await self.member(user_id)
        if not attachments and self.is_command(text):
            await mine.hub.store.get(conversation_id)  # theirs
            return await self._command(mine, conversation_id, text)
        view = _view(view_context)
        paths = [
            resolve_attachment(self.layout, mine.user.id, conversation_id, p)
            for p in dict.fromkeys(attachments)
        ]
        return await self._enqueue(mine, conversation_id, text, paths, view)

    async def resend(
        self, user_id: str, conversation_id: str, seq: int, text: str | None = None
    ) -> Sent:
        """Send one of the member's messages again, dropping it and everything after it
        from the history: retry after a failure and regenerate (text None: as it was,
        with its attachments and view context), or edit and resend (the new text).
        Refused (409) while a turn runs or waits for an approval."""
        mine = await self.member(user_id)
        # Answer again (no new text) keeps the answers it replaces; an edit does not.
        message, attachments = await mine.hub.store.rewind(
            conversation_id, seq, keep_answers=text is None
        )
        await mine.hub.update(conversation_id)  # every tab re-reads the conversation
        typed = display_text(message) if text is None else text
        return await self._enqueue(mine, conversation_id, typed, attachments, view_items(message))

    async def search(self, user_id: str, query: str) -> list[SearchHit]:
        """The member's own conversations whose title or messages have the words."""
        if len(query) > 200:
            raise InvalidInputError("search for at most 200 characters")
        return await (await self.member(user_id)).hub.store.search(query)

    def commands(self, role: CapabilityHolder) -> list[CommandInfo]:
        """The built-in slash commands, then the features' ones this role may run."""
        extra = [
            CommandInfo(name=c.name, usage=c.usage, description=c.description)
            for c in self.plugins.chat_commands()
            if c.name not in _COMMAND_NAMES and (c.capability is None or can(role, c.capability))
        ]
        return [*COMMANDS, *extra]

    def is_command(self, text: str) -> bool:
        """`is_command`, with the features' commands (whoever may run them: a member
        without the capability gets "not allowed", not a model turn)."""
        if is_command(text):
            return True
        head = text.strip().split(maxsplit=1)[0] if text.strip() else ""
        names = {c.name for c in self.plugins.chat_commands()}
        return head.startswith("/") and head[1:] in names

    async def command(self, user_id: str, conversation_id: str, text: str) -> CommandResult:
        """Run a slash command (`/stop`, `/model gpt`...); an unknown one is InvalidInput."""
        mine = await self.member(user_id)
        await mine.hub.store.get(conversation_id)
        return await self._command(mine, conversation_id, text)

    async def _enqueue(
        self,
        mine: UserRuntime,
        conversation_id: str,
        text: str,
        attachments: list[Attachment],
        view: list[ViewItem],
    ) -> Sent:
        """Queue the message. Its conversation is read (and proved theirs) as the hub
        claims it; with attachments it is read first, for its model."""
        layout = self.layout
        body = defuse_harness_tags(text)
        see = watch = True
        videos = False
        if attachments:
            model_id = (await mine.hub.store.get(conversation_id)).model_id
            # A picture for a model that cannot see it: send the text, tell the model (and,
            # through `images_not_seen`, the member) instead of failing the whole message.
            if any(a.mime.startswith("image/") for a in attachments):
                see = await self.llm.can_see_images(model_id)
            videos = any(a.mime in VIDEO_TYPES for a in attachments)
            watch = videos and await self.llm.can_watch_videos(model_id)
            content = await asyncio.to_thread(
                content_for, layout, mine.user.id, body, attachments, see, watch
            )
        else:
            # Text only: nothing to read from disk, so no thread hop on the turn's path.
            content = content_for(layout, mine.user.id, body, attachments)
        if view:
            # Its own part, never mixed into what was typed (the UI shows it as chips).
            block = view_context_block([(i.label, i.value) for i in view])
            content = [TextPart(block), *content]
        job = await mine.hub.queue_message(conversation_id, content, attachments, typed=text)
        return Sent(
            conversation_id=conversation_id,
            done=job.done,
            images_not_seen=not see,
            videos_not_seen=videos and not watch,
            finished=job.finished,
        )

    async def _command(self, mine: UserRuntime, conversation_id: str, text: str) -> CommandResult:
        name, _, arg = text.strip()[1:].partition(" ")
        arg = arg.strip()
        hub = mine.hub
        if name == "stop":
            await hub.stop(conversation_id)
            return CommandResult(command="stop", result="stopped")
        if name == "compact":
            await hub.compact(conversation_id)
            return CommandResult(command="compact", result="compacting the conversation")
        if name == "new":
            conversation = await hub.new_conversation()
            return CommandResult(
                command="new", result="new conversation", conversation_id=conversation.id
            )
        if name == "cost":
            usage = (await hub.store.get(conversation_id)).usage
            cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
            return CommandResult(
                command="cost",
                result=f"{usage.input_tokens} tokens in, {usage.output_tokens} tokens out, "
                f"cost {cost}",
            )
        if name == "model":
            return await self._model_command(mine, conversation_id, arg)
        feature = next((c for c in self.plugins.chat_commands() if c.name == name), None)
        if feature is not None and name not in _COMMAND_NAMES:
            if feature.capability is not None and not can(mine.role, feature.capability):
                raise InvalidInputError(f"/{name} is not available to you")
            return CommandResult(
                command=name, result=await feature.run(mine.facade, conversation_id, arg)
            )
        known = ", ".join(f"/{c.name}" for c in self.commands(mine.role))
        raise InvalidInputError(f"unknown command /{name} (known: {known})")

    async def _model_command(
        self, mine: UserRuntime, conversation_id: str, arg: str
    ) -> CommandResult:
        models = [m for m in await self.llm.store.models() if m.enabled and m.kind == "chat"]
        if not arg:
            current = (await mine.hub.store.get(conversation_id)).model_id
            names = ", ".join(m.name for m in models) or "none set up"
            chosen = next((m.name for m in models if m.id == current), "AUTO")
            return CommandResult(
                command="model", result=f"using {chosen}; available: AUTO, {names}"
            )
        if arg.lower() == "auto":
            await mine.hub.update(conversation_id, model_id=None)
            return CommandResult(command="model", result="using AUTO")
        match = next((m for m in models if m.name.lower() == arg.lower()), None)
        if match is None:
            raise InvalidInputError(f"no model named {arg!r}")
        await mine.hub.update(conversation_id, model_id=match.id)
        return CommandResult(command="model", result=f"using {match.name}")

    async def stop(self, user_id: str, conversation_id: str) -> None:
        """Drop what is queued and stop what runs (an idle conversation: nothing)."""
        await (await self.member(user_id)).hub.stop(conversation_id)

    async def decide(
        self,
        user_id: str,
        call_id: str,
        approved: bool,
        bypass: Literal["15m", "conversation"] | None = None,
    ) -> None:
        """A person's answer to a pending approval (NotFoundError when there is none)."""
        await (await self.member(user_id)).decide(call_id, approved, bypass)

    # -- waiting ----------------------------------------------------------------------

    async def wait(self, user_id: str, sent: Sent) -> ChatReply:
        """Wait for the turn's end or for it to ask for an approval, whichever is first.

        On an approval the answer is `awaiting_approval` with an empty reply while the
        turn keeps waiting in the gate: a decision from any client continues it, and its
        answer lands in the history only. Only the top-level agent's request counts: a
        helper's keeps this waiting (see docs/dev/chat.md)."""
        mine = await self.member(user_id)
        waiting: asyncio.Future[bool] = asyncio.ensure_future(
            mine.hub.awaiting_approval(sent.conversation_id).wait()
        )
        try:
            await asyncio.wait([sent.done, waiting], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        finally:
            waiting.cancel()
        if not sent.done.done():
            return ChatReply(
                conversation_id=sent.conversation_id,
                reply="",
                status="awaiting_approval",
                files=sent.files(),
            )
        result = sent.done.result()
        status: Literal["done", "awaiting_approval", "failed"] = (
            "done"
            if result.status in ("done", "stopped")
            else "awaiting_approval"
            if result.status == "awaiting_approval"
            else "failed"
        )
        if status != "failed":
            return ChatReply(
                conversation_id=sent.conversation_id,
                reply=result.text,
                status=status,
                files=sent.files(),
            )
        failure = mine.hub.plain_failure(
            TurnDone(
                conversation_id=sent.conversation_id,
                status="failed",
                error=result.error,
                error_code=result.error_code,
            )
        )
        return ChatReply(
            conversation_id=sent.conversation_id,
            reply=result.text,
            status=status,
            error=failure.error,
            error_code=failure.error_code,
            error_detail=failure.error_detail,
            files=sent.files(),
        )

    async def chat(
        self,
        user_id: str,
        text: str,
        conversation_id: str | None = None,
        attachments: list[str] | tuple[str, ...] = (),
    ) -> ChatReply:
        """One message in, one answer out: a new conversation when none is given; a
        slash command answers `done` with its result. `attachments`: files uploaded to
        this conversation before (`uploads/<conversation>/<name>`)."""
        mine = await self.member(user_id)
        if conversation_id is None:
            conversation_id = (await mine.hub.new_conversation()).id
        if is_command(text) and not attachments:
            await mine.hub.store.get(conversation_id)  # theirs
            out = await self._command(mine, conversation_id, text)
            return ChatReply(
                conversation_id=out.conversation_id or conversation_id,
                reply=out.result,
                status="done",
            )
        paths = [
            resolve_attachment(self.layout, mine.user.id, conversation_id, p)
            for p in dict.fromkeys(attachments)
        ]
        sent = await self._enqueue(mine, conversation_id, text, paths, [])
        return await self.wait(user_id, sent)

    # -- attachments and events -------------------------------------------------------

    async def attachment_folder(self, user_id: str, conversation_id: str) -> Resolved:
        """Where a file attached to this conversation is stored (made if missing)."""
        mine = await self.member(user_id)
        await mine.hub.store.get(conversation_id)
        return await asyncio.to_thread(
            conversation_folder, self.layout, mine.user.id, conversation_id
        )

    async def attachment(self, user_id: str, conversation_id: str, path: str) -> Attachment:
        """A stored attachment (`uploads/<conversation>/<name>`), checked through the router."""
        return await asyncio.to_thread(
            resolve_attachment, self.layout, user_id, conversation_id, path
        )

    def subscribe(self, user_id: str) -> Subscription:
        """Every event of the member from now on (chat, conversations, Inbox...)."""
        return Subscription(self, self.events.connect(user_id, token_hash=""))
