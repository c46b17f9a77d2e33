"""The Telegram bridge: long polling, the inbox of updates, and who each chat reaches.

Rules:
- One service (`telegram`) polls `getUpdates` while the bridge is on and has a token;
  switched off, it waits for the settings to change. Each batch is written to the inbox
  with the new offset in one transaction (store.py); only then is it handled, and a row
  leaves the inbox once its answer went out. A restart finds what was not answered yet.
- A Telegram user reaches exactly the member their pairing names, re-checked per
  message (active, `telegram.use`); everything then goes through the conversation
  service, so the member's agent, tools and approval rules apply as on the web.
- One worker per chat takes its messages in order, one turn at a time (so each message
  gets one answer); button presses and `/stop` do not queue behind a running turn.
- Network failures back off (doubling, capped); a 429's `retry_after` is waited in
  `BotApi.call`; a refused token stops polling until the settings change.

Trap: a turn is handed over and then the server dies. The inbox row says `sent` with
the conversation's last message number before it: after the restart, a member message
after that number means the turn was taken (the hub's recovery finishes it) and only
its answer is sent; none means it was lost in the queue and is sent again. So each
message is answered once (a crash between Telegram accepting the answer and the row's
deletion is the one window left: the answer would go out twice).

Loads at first use: every server holds a `Bridge` (its state slot; the routes, the
notification channel and the tool hook read it), but only a bridge with a bot token
polls. The Bot API client, the turns, the rendering and the bot's texts (`botapi`,
`turns`, `render`, `texts`) are imported inside the methods that poll and answer, so a
household without a bot never loads them (docs/dev/telegram.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skald.errors import DatabaseClosedError, NotFoundError, SkaldError
from skald.features.telegram.store import Pending, TelegramStore, normal_code
from skald.log import get_logger
from skald.permissions import TELEGRAM_USE, can

if TYPE_CHECKING:
    from skald.features.telegram.botapi import BotApi
    from skald.features.telegram.turns import Replier
    from skald.plugins.facade import Server

__all__ = ["PURPOSE", "Bridge"]

log = get_logger("skald.telegram")

PURPOSE = "telegram-bot-token"  # the sealing purpose: a provider key never opens as this
_STORE_BROKEN = "the pairing store cannot be read"


@dataclass(frozen=True)
class _Approval:
    tg_user_id: int
    user_id: str
    call_id: str
    lang: str


class Bridge:
    """The bridge's state for the server's life (a `skald_server_state` slot)."""

    def __init__(
        self,
        server: Server,
        *,
        edit_interval_s: float = 1.0,
        backoff_max_s: float = 60.0,
        poll_timeout_s: int = 25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.store = TelegramStore(server.db)
        self.changed = asyncio.Event()
        self.edit_interval_s = edit_interval_s
        self.backoff_max_s = backoff_max_s
        self.poll_timeout_s = poll_timeout_s
        self.idle_pause_s = 0.2
        self.clock = clock
        self.api: BotApi | None = None
        self.connected = asyncio.Event()  # set while polling works with a token
        self.connection_problem: str | None = None  # shown to administrators
        self.store_problem: str | None = None
        self.web_url = ""
        self.bot_username = ""
        self._queues: dict[int, asyncio.Queue[Pending]] = {}
        self._seen: set[int] = set()
        self._approvals: dict[str, _Approval] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- settings -----------------------------------------------------------------------

    def seal(self, token: str) -> str:
        return self.server.llm.key.seal(token, PURPOSE)

    def reload(self) -> None:
        """The settings changed: the service reconnects with the new ones."""
        self.changed.set()

    @property
    def running(self) -> bool:
        return self.api is not None

    # -- the service --------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            self.changed.clear()
            settings = await self.store.settings()
            if not (settings.enabled and settings.token_sealed):
                self.connection_problem = None
                await self.changed.wait()
                continue
            from skald.features.telegram.botapi import BotApi  # a token: at first use

            token = self.server.llm.key.open(settings.token_sealed, PURPOSE)
            api = BotApi(settings.base_url, token, poll_timeout_s=self.poll_timeout_s)
            self.web_url = settings.web_url
            try:
                await self._serve(api, settings.update_offset)
            finally:
                await self._stop_tasks()
                self.api = None
                self.connected.clear()
                await api.aclose()

    async def _stop_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._queues.clear()
        self._seen.clear()

    async def _serve(self, api: BotApi, offset: int) -> None:
        from skald.features.telegram.botapi import NetworkDown, TelegramError

        backoff = 1.0
        while not self.changed.is_set():
            try:
                if self.api is None:
                    me = await self._until_changed(api.call("getMe"))
                    if me is None:
                        return
                    self.bot_username = str(me.get("username", ""))
                    self.api = api
                    self.connection_problem = None
                    self.connected.set()
                    await self._dispatch(api)  # what a restart left unanswered
                updates = await self._until_changed(
                    api.call(
                        "getUpdates",
                        {
                            "offset": offset,
                            "timeout": api.poll_timeout_s,
                            "allowed_updates": ["message", "callback_query"],
                        },
                    )
                )
            except NetworkDown as exc:
                self.connection_problem = f"Telegram cannot be reached ({exc})"
                log.warning("telegram unreachable", error=str(exc), retry_s=backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max_s)
                continue
            except TelegramError as exc:
                if exc.code in (401, 404):
                    self.connection_problem = "Telegram refused the bot token"
                    log.warning("telegram token refused", code=exc.code)
                    await self.changed.wait()
                    return
                self.connection_problem = str(exc)
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max_s)
                continue
            if updates is None:
                return
            backoff = 1.0
            self.connection_problem = None
            if updates:
                await self.store.take_updates(updates)
                offset = max(int(u["update_id"]) for u in updates) + 1
                await self._dispatch(api)
            else:
                # Telegram answers an empty poll only after `timeout`; a server that
                # answers at once (an emulator, a proxy) is not asked in a tight loop.
                await self._sleep(self.idle_pause_s)

    async def _until_changed(self, work: Awaitable[Any]) -> Any:
        """`work`'s answer, or None when the settings change first (it is cancelled)."""
        from skald.features.telegram.botapi import NetworkDown, TelegramError

        task = asyncio.ensure_future(work)
        changed = asyncio.ensure_future(self.changed.wait())
        try:
            await asyncio.wait([task, changed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            if not task.done():
                task.cancel()
                # Retrieved, so a poll cut short never logs "exception never retrieved".
                with contextlib.suppress(asyncio.CancelledError, NetworkDown, TelegramError):
                    await task
                task = None  # type: ignore[assignment]
        return None if task is None else task.result()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), seconds)

    # -- dispatching --------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        # Tasks of this polling session: cancelled with it (`_stop_tasks`), never orphaned.
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, api: BotApi) -> None:
        for row in await self.store.pending():
            if row.update_id in self._seen:
                continue
            self._seen.add(row.update_id)
            message = row.payload.get("message")
            if row.payload.get("callback_query") is not None:
                self._spawn(self._settle(api, row, self._button))
            elif message is None:
                await self.store.done(row.update_id)
            elif _command_of(message, self.bot_username)[0] == "stop":
                self._spawn(self._settle(api, row, self._message))
            else:
                chat_id = int(message["chat"]["id"])
                queue = self._queues.get(chat_id)
                if queue is None:
                    queue = self._queues[chat_id] = asyncio.Queue()
                    self._spawn(self._worker(api, queue))
                queue.put_nowait(row)

    async def _worker(self, api: BotApi, queue: asyncio.Queue[Pending]) -> None:
        while True:
            row = await queue.get()
            await self._settle(api, row, self._message)

    async def _settle(
        self, api: BotApi, row: Pending, handle: Callable[[BotApi, Pending], Awaitable[None]]
    ) -> None:
        """Handle one update, then take it out of the inbox (also when handling failed:
        the member got the failure; a retry loop on a poisoned update helps nobody)."""
        try:
            await handle(api, row)
        except asyncio.CancelledError:
            raise  # a reload or shutdown: the row stays, the next start takes it up
        except Exception:
            log.exception("telegram update failed", update_id=row.update_id)
        await self.store.done(row.update_id)

    # -- messages -----------------------------------------------------------------------

    async def _message(self, api: BotApi, row: Pending) -> None:
        from skald.features.telegram.texts import lang_of, say
        from skald.features.telegram.turns import Messages, Replier

        message = row.payload["message"]
        chat = message.get("chat") or {}
        chat_id = int(chat["id"])
        private = chat.get("type") == "private"
        sender = (message.get("from") or {}).get("id")
        if sender is None or (message.get("from") or {}).get("is_bot"):
            return
        sender_lang = lang_of((message.get("from") or {}).get("language_code"))
        replier = Replier(api, chat_id, message.get("message_id"), self, sender_lang)
        text = str(message.get("text") or message.get("caption") or "")
        media_ok = True
        if not private:
            prefix, media_ok = await self.store.group(chat_id, str(chat.get("title") or ""))
            addressed, text = _addressed(message, text, prefix, self.bot_username)
            if not addressed:
                return
        try:
            link = await self.store.link(int(sender))
        except Exception:
            self._store_broken()
            await replier.plain(say(replier.lang, "unavailable"))
            return
        if link is None:
            if private:
                await self._pair(replier, int(sender), text)
            else:
                await replier.plain(say(replier.lang, "private_first"))
            return
        user_id = link.user_id
        try:
            user, role = await self.server.fetch(user_id)
        except NotFoundError:
            await self.store.unlink(tg_user_id=int(sender))
            await replier.plain(say(replier.lang, "gone"))
            return
        replier.lang = lang_of(user.locale)
        if not user.active or not can(role, TELEGRAM_USE):
            await replier.plain(say(replier.lang, "not_allowed"))
            return
        turns = Messages(self, api, replier, user_id, chat_id, int(sender))
        try:
            await turns.handle(row, message, text, media_ok=media_ok or private)
        except DatabaseClosedError:
            await replier.plain(say(replier.lang, "locked"))
        except SkaldError as exc:
            await replier.plain(str(exc))

    async def _pair(self, replier: Replier, tg_user_id: int, text: str) -> None:
        from skald.features.telegram.texts import say

        candidate = normal_code(text)
        if text and not text.startswith("/") and len(candidate) == 8 and candidate.isalnum():
            try:
                member = await self.store.redeem_member_code(candidate, tg_user_id)
            except Exception:
                self._store_broken()
                await replier.plain(say(replier.lang, "unavailable"))
                return
            if member is not None:
                await replier.plain(say(replier.lang, "paired"))
                return
            await replier.plain(say(replier.lang, "bad_code"))
        try:
            code = await self.store.code_for_chat(tg_user_id)
        except Exception:
            # Never hand out a code that was not stored: the member could not use it.
            self._store_broken()
            await replier.plain(say(replier.lang, "unavailable"))
            return
        self.store_problem = None
        await replier.plain(say(replier.lang, "code", code=code))

    def _store_broken(self) -> None:
        self.store_problem = _STORE_BROKEN
        log.exception("telegram pairing store unreadable")

    async def notify_paired(self, tg_user_id: int, lang: str) -> None:
        """Tell the chat the web page paired it (best effort: the link stands anyway)."""
        if self.api is None:
            return
        from skald.features.telegram.botapi import NetworkDown, TelegramError
        from skald.features.telegram.texts import say

        with contextlib.suppress(TelegramError, NetworkDown):
            await self.api.call(
                "sendMessage",
                {"chat_id": tg_user_id, "text": say(lang, "paired")},
            )

    # -- approvals ----------------------------------------------------------------------

    def approval_token(self, tg_user_id: int, user_id: str, call_id: str, lang: str) -> str:
        """A short id for a button (Telegram allows 64 bytes of callback data)."""
        token = secrets.token_urlsafe(9)
        self._approvals[token] = _Approval(tg_user_id, user_id, call_id, lang)
        return token

    async def _button(self, api: BotApi, row: Pending) -> None:
        from skald.features.telegram.botapi import TelegramError
        from skald.features.telegram.texts import say

        query = row.payload["callback_query"]
        answer, _, token = str(query.get("data", "")).partition(":")
        sender = int((query.get("from") or {}).get("id", 0))
        approval = self._approvals.get(token)
        lang = "en" if approval is None else approval.lang
        note = say(lang, "not_waiting")
        if approval is not None and approval.tg_user_id == sender and answer in ("y", "n"):
            link = await self.store.link(sender)
            if link is not None and link.user_id == approval.user_id:
                try:
                    await self.server.conversations.decide(
                        approval.user_id, approval.call_id, approved=answer == "y"
                    )
                    note = say(lang, "approved" if answer == "y" else "rejected")
                except NotFoundError:
                    pass
                self._approvals.pop(token, None)
        await api.call("answerCallbackQuery", {"callback_query_id": query["id"], "text": note})
        shown = query.get("message")
        if shown is not None:
            with contextlib.suppress(TelegramError):
                await api.call(
                    "editMessageText",
                    {
                        "chat_id": shown["chat"]["id"],
                        "message_id": shown["message_id"],
                        "text": f"{shown.get('text', '')}\n\n{note}",
                    },
                )


def _command_of(message: dict[str, Any], bot: str) -> tuple[str, str]:
    """(`stop`, argument) for "/stop@bot arg"; ("", "") when it is not a command."""
    text = str(message.get("text") or "").strip()
    if not text.startswith("/"):
        return "", ""
    head, _, rest = text[1:].partition(" ")
    name, _, target = head.partition("@")
    if target and bot and target.lower() != bot.lower():
        return "", ""
    return name.lower(), rest.strip()


def _addressed(message: dict[str, Any], text: str, prefix: str, bot: str) -> tuple[bool, str]:
    """Whether a group message is for the bot, and its text without the address: a
    mention of the bot, a reply to one of its messages, the group's prefix, or a
    command aimed at it."""
    mention = f"@{bot}".lower() if bot else ""
    if mention and mention in text.lower():
        start = text.lower().index(mention)
        return True, (text[:start] + text[start + len(mention) :]).strip()
    replied = (message.get("reply_to_message") or {}).get("from") or {}
    if replied.get("is_bot") and (not bot or replied.get("username", "").lower() == bot.lower()):
        return True, text
    if prefix and text.lower().startswith(prefix.lower()):
        return True, text[len(prefix) :].lstrip(" ,:").strip()
    if text.startswith("/") and bot and f"@{bot.lower()}" in text.split(" ", 1)[0].lower():
        return True, text
    return False, text
