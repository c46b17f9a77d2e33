"""One Telegram message as one turn of the member's conversation, and its answer.

Rules:
- The answer streams into one Telegram message, edited at most once per
  `edit_interval_s` (the last edit waits for the interval too); the last edit carries
  the exact final text, rendered (render.py), and what passes Telegram's limit follows
  as further messages.
- An approval the turn asks for arrives as a message with Approve / Reject buttons (and
  "See details" to the web Inbox when the web address is set); the bridge answers a
  press with the same `decide` the web uses.
- Photos, documents and voice notes land in the member's uploads of the conversation
  before the turn (a voice note is transcribed first, when a transcription model exists).

Trap: a reply must never name another member's conversation: the conversation id comes
from the (chat, Telegram user) row only, and every call passes the member's user id,
so a stale or foreign id is "not found" in their own database.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import mimetypes
from typing import TYPE_CHECKING, Any

from skald.agent.events import ApprovalRequested, ModelSwitched, TokenDelta, ToolCallUpdate
from skald.core.conversations import CommandResult, ConversationService, Sent
from skald.core.events import ChatEvent
from skald.errors import DiskFullError, QuotaExceededError, SkaldError
from skald.features.telegram.botapi import BotApi, TelegramError
from skald.features.telegram.render import LIMIT, split, to_html, utf16_len
from skald.features.telegram.store import Pending, TelegramStore
from skald.features.telegram.texts import say
from skald.files.router import NewFile, upload_name
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.core.conversations import Subscription
    from skald.features.telegram.bridge import Bridge

__all__ = ["DOWNLOAD_MAX", "Messages", "Replier"]

log = get_logger("skald.telegram")

DOWNLOAD_MAX = 20 * 1024 * 1024  # what the Bot API lets a bot download


@dataclasses.dataclass(eq=False)
class Replier:
    """Sends into one chat, replying to the message being answered."""

    api: BotApi
    chat_id: int
    reply_to: int | None
    bridge: Bridge
    lang: str = "en"  # the member's, once known (texts.py)

    def _base(self) -> dict[str, Any]:
        base: dict[str, Any] = {"chat_id": self.chat_id}
        if self.reply_to is not None:
            base["reply_parameters"] = {
                "message_id": self.reply_to,
                "allow_sending_without_reply": True,
            }
        return base

    async def plain(self, text: str, **extra: Any) -> dict[str, Any]:
        sent: dict[str, Any] = await self.api.call(
            "sendMessage", {**self._base(), "text": text or "…", **extra}
        )
        return sent

    async def rich(self, text: str, message_id: int | None = None) -> None:
        """`text` (at most LIMIT) as formatted text, plain when Telegram refuses the HTML."""
        method = "sendMessage" if message_id is None else "editMessageText"
        params: dict[str, Any] = (
            self._base()
            if message_id is None
            else {"chat_id": self.chat_id, "message_id": message_id}
        )
        rendered = to_html(text)
        if utf16_len(rendered) <= LIMIT:
            try:
                await self.api.call(method, {**params, "text": rendered, "parse_mode": "HTML"})
                return
            except TelegramError as exc:
                if exc.code != 400 or "not modified" in exc.description:
                    if "not modified" in exc.description:
                        return
                    raise
        try:
            await self.api.call(method, {**params, "text": text or "…"})
        except TelegramError as exc:
            if "not modified" not in exc.description:
                raise

    async def answer(self, text: str, message_id: int | None = None) -> None:
        pieces = split(text)
        await self.rich(pieces[0], message_id)
        for piece in pieces[1:]:
            await self.rich(piece)


class Stream:
    """The answer as it is written: one message, edited at most once per interval."""

    def __init__(self, replier: Replier, update_id: int | None = None) -> None:
        self.replier = replier
        self.bridge = replier.bridge
        self.update_id = update_id
        # Held while a message goes out: the turn's end waits for it rather than cancel a
        # send Telegram may already have taken (its id would be lost: a second message).
        self.sending = asyncio.Lock()
        self.message_id: int | None = None
        self.text = ""
        self.shown = ""
        self.last = float("-inf")

    async def add(self, text: str) -> None:
        self.text += text
        if self.bridge.clock() - self.last >= self.bridge.edit_interval_s:
            await self._show()

    def restart(self) -> None:
        self.text = ""  # a new round, or another model starts the answer over

    async def _show(self) -> None:
        async with self.sending:
            await self._show_now()

    async def _show_now(self) -> None:
        piece = split(self.text)[0]
        if not piece.strip() or piece == self.shown:
            return
        if self.message_id is None:
            sent = await self.replier.plain(piece)
            self.message_id = int(sent["message_id"])
            if self.update_id is not None:
                # A restart answers in this message instead of a second one (bridge.py).
                await self.bridge.store.replying_in(self.update_id, self.message_id)
        else:
            with contextlib.suppress(TelegramError):
                await self.replier.api.call(
                    "editMessageText",
                    {"chat_id": self.replier.chat_id, "message_id": self.message_id, "text": piece},
                )
        self.shown = piece
        self.last = self.bridge.clock()

    async def finish(self, text: str) -> None:
        if self.message_id is not None and self.shown == text and to_html(text) == text:
            return  # already shown exactly, nothing to format: no edit needed
        if self.message_id is not None:
            wait = self.last + self.bridge.edit_interval_s - self.bridge.clock()
            if wait > 0:
                await asyncio.sleep(wait)
        await self.replier.answer(text, self.message_id)


@dataclasses.dataclass(eq=False)
class Messages:
    """What a paired member's message does: a bridge command, a chat command, or a turn."""

    bridge: Bridge
    api: BotApi
    replier: Replier
    user_id: str
    chat_id: int
    tg: int
    chats: ConversationService = dataclasses.field(init=False)
    store: TelegramStore = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.chats = self.bridge.server.conversations
        self.store = self.bridge.store

    async def conversation(self) -> str:
        found = await self.store.conversation(self.chat_id, self.tg)
        if found is not None:
            with contextlib.suppress(SkaldError):
                await self.chats.get(self.user_id, found)
                return found
        created = await self.chats.create(self.user_id, "Telegram")
        await self.store.set_conversation(self.chat_id, self.tg, created.id)
        return created.id

    async def handle(
        self, row: Pending, message: dict[str, Any], text: str, *, media_ok: bool
    ) -> None:
        if row.state == "sent" and row.conversation_id is not None:
            await self._recover(row)
            return
        command = text.strip().split(" ", 1)[0]
        name = command[1:].split("@", 1)[0].lower() if command.startswith("/") else ""
        lang = self.replier.lang
        if name in ("start", "help"):
            await self.replier.plain(say(lang, "help"))
            return
        if name == "unpair":
            await self.store.unlink(tg_user_id=self.tg)
            await self.replier.plain(say(lang, "unpaired"))
            return
        if name == "sethome":
            await self.store.set_home(self.tg, self.chat_id)
            await self.replier.plain(say(lang, "sethome"))
            return
        cid = await self.conversation()
        if name == "stop":
            await self.chats.stop(self.user_id, cid)
            await self.replier.plain(say(lang, "stopped"))
            return
        attachments, heard = await self._media(message, cid) if media_ok else ([], "")
        if _has_media(message) and not media_ok and not text.strip():
            await self.replier.plain(say(lang, "no_media"))
            return
        if heard:
            await self.replier.plain(f"🎤 {heard}")
            text = f"{text}\n{heard}".strip()
        if not text.strip() and not attachments:
            return
        history = await self.chats.history(self.user_id, cid)
        base = history[-1].seq if history else 0
        if not self.chats.is_command(text):
            await self.store.mark_sent(row.update_id, cid, base)
        async with self.chats.subscribe(self.user_id) as events:
            sent = await self.chats.send(self.user_id, cid, text, attachments)
            if isinstance(sent, CommandResult):
                if sent.conversation_id:
                    await self.store.set_conversation(self.chat_id, self.tg, sent.conversation_id)
                await self.replier.plain(sent.result)
                return
            await self._follow(sent, events, row.update_id)

    async def _follow(self, sent: Sent, events: Subscription, update_id: int) -> None:
        stream = Stream(self.replier, update_id)
        pump = asyncio.ensure_future(self._pump(sent.conversation_id, events, stream))
        try:
            await asyncio.shield(sent.done)
        finally:
            async with stream.sending:
                pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        reply = await self.chats.wait(self.user_id, sent)
        if reply.status == "failed":
            text = reply.reply or reply.error or say(self.replier.lang, "failed")
        elif reply.status == "awaiting_approval":
            text = reply.reply or say(self.replier.lang, "waiting")
        else:
            text = reply.reply or say(self.replier.lang, "no_answer")
        await stream.finish(text)

    async def _pump(self, cid: str, events: Subscription, stream: Stream) -> None:
        async for event in events:
            if not isinstance(event, ChatEvent):
                continue
            inner = event.event
            if inner.conversation_id != cid and not inner.conversation_id.startswith(f"{cid}/"):
                continue
            if isinstance(inner, ApprovalRequested):
                await self._ask(inner)
            elif inner.depth == 0 and isinstance(inner, TokenDelta):
                await stream.add(inner.text)
            elif inner.depth == 0 and isinstance(inner, ToolCallUpdate | ModelSwitched):
                stream.restart()

    async def _ask(self, request: ApprovalRequested) -> None:
        lang = self.replier.lang
        token = self.bridge.approval_token(self.tg, self.user_id, request.call_id, lang)
        keyboard: list[list[dict[str, str]]] = [
            [
                {"text": say(lang, "approve"), "callback_data": f"y:{token}"},
                {"text": say(lang, "reject"), "callback_data": f"n:{token}"},
            ]
        ]
        if self.bridge.web_url:
            keyboard.append(
                [
                    {
                        "text": say(lang, "details"),
                        "url": f"{self.bridge.web_url.rstrip('/')}/#/inbox",
                    }
                ]
            )
        why = f"\n{request.reason}" if request.reason else ""
        await self.replier.plain(
            say(lang, "ask", name=request.name) + why, reply_markup={"inline_keyboard": keyboard}
        )

    async def _recover(self, row: Pending) -> None:
        """A message handed over before a restart: answer it once (module docstring)."""
        cid = row.conversation_id
        assert cid is not None
        history = await self.chats.history(self.user_id, cid)
        mine = [i for i in history if i.role == "user" and i.seq > (row.base_seq or 0)]
        if not mine:
            message = row.payload["message"]
            text = str(message.get("text") or message.get("caption") or "")
            if not text.strip():
                return
            async with self.chats.subscribe(self.user_id) as events:
                sent = await self.chats.send(self.user_id, cid, text)
                if isinstance(sent, Sent):
                    await self._follow(sent, events, row.update_id)
            return
        async with self.chats.subscribe(self.user_id) as events:
            if (await self.chats.get(self.user_id, cid)).status != "idle":
                async for event in events:
                    found = getattr(event, "conversation", None)
                    if found is not None and found.id == cid and found.status == "idle":
                        break
        history = await self.chats.history(self.user_id, cid)
        after = [i for i in history if i.seq > mine[0].seq]
        nxt = next((i.seq for i in after if i.role == "user"), None)
        answers = [
            i.text
            for i in after
            if i.role == "assistant" and i.text and (nxt is None or i.seq < nxt)
        ]
        fallback = say(self.replier.lang, "no_answer")
        await self.replier.answer(answers[-1] if answers else fallback, row.reply_message_id)

    async def _media(self, message: dict[str, Any], cid: str) -> tuple[list[str], str]:
        """The message's file in the member's uploads (path list), and a voice note's words."""
        found = _file_of(message)
        if found is None:
            return [], ""
        file_id, name, mime, voice = found
        info = await self.api.call("getFile", {"file_id": file_id})
        if int(info.get("file_size") or 0) > DOWNLOAD_MAX:
            await self.replier.plain(say(self.replier.lang, "too_large"))
            return [], ""
        data = await self.api.download(str(info["file_path"]), DOWNLOAD_MAX)
        # A write into the member's home like any upload: within their quota and the
        # disk's reserve, or not kept (the turn goes on with the text).
        budget = await self.bridge.server.budget(self.user_id)
        try:
            await budget.recheck(len(data))
        except (QuotaExceededError, DiskFullError) as exc:
            full = "quota_full" if isinstance(exc, QuotaExceededError) else "disk_full"
            await self.replier.plain(say(self.replier.lang, full))
            return [], ""
        folder = await self.chats.attachment_folder(self.user_id, cid)
        stored = await asyncio.to_thread(_write, folder, name, data)
        budget.wrote(len(data))
        heard = ""
        if voice:
            try:
                heard = (
                    await self.bridge.server.llm.transcribe(self.user_id, data, name, mime)
                ).text
            except SkaldError as exc:
                log.info("voice note not transcribed", error=str(exc))
        return [f"uploads/{cid}/{stored}"], heard.strip()


def _write(folder: Any, name: str, data: bytes) -> str:
    new = NewFile(folder, upload_name(name))
    try:
        new.write(data)
        return new.commit().name
    except BaseException:
        new.abort()
        raise


def _has_media(message: dict[str, Any]) -> bool:
    return _file_of(message) is not None


def _file_of(message: dict[str, Any]) -> tuple[str, str, str, bool] | None:
    """(file id, a file name, its type, whether it is a voice note) of what is attached."""
    if message.get("photo"):
        best = max(
            message["photo"], key=lambda p: int(p.get("file_size") or 0) or p.get("width", 0)
        )
        return (
            str(best["file_id"]),
            f"photo-{message.get('message_id', 0)}.jpg",
            "image/jpeg",
            False,
        )
    if message.get("voice"):
        voice = message["voice"]
        mime = str(voice.get("mime_type") or "audio/ogg")
        ext = mimetypes.guess_extension(mime) or ".ogg"
        return str(voice["file_id"]), f"voice-{message.get('message_id', 0)}{ext}", mime, True
    for kind in ("document", "audio", "video"):
        item = message.get(kind)
        if item:
            mime = str(item.get("mime_type") or "application/octet-stream")
            name = str(item.get("file_name") or f"{kind}-{message.get('message_id', 0)}")
            return str(item["file_id"]), name, mime, False
    return None
