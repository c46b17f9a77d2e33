"""The notification service (`runtime.notifications`): any feature tells a member
something without HTTP, and it arrives where the member chose.

    await rt.notifications.notify(user_id, title="Bins out", body="It is Monday",
                                  link="/tasks", source="job", urgency="normal")

What happens: the notification is written to the member's own database at once (the
bell's list always has it, and the badge updates live), then it joins the member's open
batch; when the batch window (`notifications.batch_ms`, 200 ms) closes, the batch is
delivered once to the channels the member chose (web by default; the web is the
fallback when none of theirs took it). During the member's quiet hours the batch is
held, not dropped: the rows stay undelivered and the held-delivery loop sends them in
one batch when the quiet time is over (urgency `high` goes through).

Rules:
- Channel-neutral and authorisation-free like `ConversationService`: callers decide who
  may notify whom; everything here happens in the named member's own database.
- A locked member (encrypted, signed out) cannot be written to: `notify` raises
  `DatabaseClosedError`, which a background caller must expect.
- Deliveries of one member run one at a time (a lock), and each re-reads which rows are
  still undelivered, so the loop and a batch never send a row twice.

Trap: the batcher and the loop share the rows, not memory: a crash between the write and
the delivery leaves the rows held, and the loop delivers them after the restart (a row
younger than `HELD_GRACE_S` is left to its batch).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import httpx

from skald.core.events import EventHub
from skald.errors import DatabaseClosedError, InvalidInputError
from skald.features.notifications.batch import Batcher
from skald.features.notifications.channels import Delivery, NotificationChannel
from skald.features.notifications.config import NotificationsConfig
from skald.features.notifications.events import NotificationsChanged, Notified
from skald.features.notifications.payload import push_payload
from skald.features.notifications.pinned import Resolver, is_public
from skald.features.notifications.quiet import check_quiet, default_zone, is_quiet
from skald.features.notifications.store import (
    Notification,
    NotificationPrefs,
    NotificationStore,
    PushDevice,
    Urgency,
)
from skald.features.notifications.tool import MAX_BODY, MAX_TITLE
from skald.features.notifications.webpush import (
    PushOutcome,
    PushTarget,
    VapidKey,
    check_endpoint,
    check_keys,
    send,
)
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.plugins.facade import Server
    from skald.plugins.manager import Plugins

__all__ = ["HELD_GRACE_S", "NotificationService", "WebChannel", "check_link"]

log = get_logger("skald.notifications")

HELD_GRACE_S = 5.0
_SOURCE = re.compile(r"[a-z][a-z0-9_.-]{0,39}")
# An in-app path ("/tasks", "/chat/abc?x=1"): never another site, never a scheme.
_LINK = re.compile(r"/(?!/)[A-Za-z0-9/_\-.~?=&%#:+]{0,499}")
_URGENCY_RANK = {"low": 0, "normal": 1, "high": 2}
MAX_DEVICES = 20
MAX_CHANNELS = 8


def check_link(link: str | None) -> str | None:
    if link is None:
        return None
    if _LINK.fullmatch(link) is None:
        raise InvalidInputError(
            "a notification's link must be a page of the app, such as /tasks (no other sites)"
        )
    return link


def _now() -> datetime:
    return datetime.now(UTC)


class NotificationService:
    def __init__(
        self,
        server: Server,
        plugins: Plugins,
        *,
        clock: Callable[[], datetime] = _now,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        config: NotificationsConfig | None = None,
        resolve: Resolver | None = None,
    ) -> None:
        self._server = server
        self._plugins = plugins  # the features' channels, collected at first use
        # How push hosts are looked up (tests answer for a name); None: the system's.
        self._resolve = resolve
        self.config = config or server.section("notifications", NotificationsConfig)
        self.clock = clock
        # One sleep for the batch windows and the held-delivery loop (tests move both).
        self._sleep: Callable[[float], Awaitable[object]] = sleep or asyncio.sleep
        self._batcher: Batcher[str, str] = Batcher(
            self._deliver, self.config.batch_ms / 1000, sleep=self._sleep
        )
        self._locks: dict[str, asyncio.Lock] = {}
        self._channels: dict[str, NotificationChannel] | None = None
        self._vapid: VapidKey | None = None
        self._http: httpx.AsyncClient | None = None
        self.deliveries = 0  # batches delivered since start (status, tests)

    # -- channels ------------------------------------------------------------------------

    @property
    def channels(self) -> dict[str, NotificationChannel]:
        """The registry: the hook's answers, the notifications feature's web channel first
        (collected on first use)."""
        if self._channels is None:
            found: dict[str, NotificationChannel] = {}
            for channel in self._plugins.notification_channels(self._server):
                self._add(found, channel)
            self._channels = found
        return self._channels

    def register(self, channel: NotificationChannel) -> None:
        """Add a channel at run time (a bridge that starts later)."""
        self._add(self.channels, channel)

    @staticmethod
    def _add(into: dict[str, NotificationChannel], channel: NotificationChannel) -> None:
        if not isinstance(channel, NotificationChannel):
            raise TypeError(f"{channel!r} is not a notification channel")
        if channel.name in into:
            raise ValueError(f"two notification channels are named {channel.name!r}")
        into[channel.name] = channel

    # -- the members' stores -------------------------------------------------------------

    async def store(self, user_id: str) -> NotificationStore:
        """The member's store; DatabaseClosedError while their data is locked."""
        user, _ = await self._server.fetch(user_id)
        if not user.active:
            raise DatabaseClosedError(f"{user.username}'s account is deactivated")
        mine = await self._server.open_member(user)
        return NotificationStore(mine.db)

    def _changed(self, user_id: str, unread: int) -> None:
        self._server.events.publish(user_id, NotificationsChanged(unread=unread))

    # -- notify --------------------------------------------------------------------------

    async def notify(
        self,
        user_id: str,
        *,
        title: str,
        body: str = "",
        link: str | None = None,
        source: str = "assistant",
        urgency: Urgency | str = "normal",
    ) -> Notification:
        title = " ".join(title.split())
        if not title:
            raise InvalidInputError("a notification needs a title")
        if len(title) > MAX_TITLE:
            raise InvalidInputError(f"a notification's title is at most {MAX_TITLE} characters")
        body = body.strip()
        if len(body) > MAX_BODY:
            raise InvalidInputError(f"a notification's text is at most {MAX_BODY} characters")
        if _SOURCE.fullmatch(source) is None:
            raise InvalidInputError(f"{source!r} is not a notification source name")
        if urgency not in _URGENCY_RANK:
            raise InvalidInputError("urgency is one of low, normal, high")
        store = await self.store(user_id)
        note, unread = await store.add(
            title=title,
            body=body,
            link=check_link(link),
            source=source,
            urgency=urgency,  # type: ignore[arg-type]
        )
        self._changed(user_id, unread)
        self._batcher.add(user_id, note.id)
        return note

    # -- reading and marking (the routes call these) --------------------------------------

    async def mark_read(self, user_id: str, ids: list[str]) -> tuple[int, int]:
        found, unread = await (await self.store(user_id)).mark_read(ids)
        self._changed(user_id, unread)
        return found, unread

    async def mark_all_read(self, user_id: str) -> int:
        unread = await (await self.store(user_id)).mark_all_read()
        self._changed(user_id, unread)
        return unread

    async def delete(self, user_id: str, note_id: str) -> bool:
        removed, unread = await (await self.store(user_id)).delete(note_id)
        if removed:
            self._changed(user_id, unread)
        return removed

    async def save_prefs(self, user_id: str, prefs: NotificationPrefs) -> NotificationPrefs:
        if len(prefs.channels) > MAX_CHANNELS or len(set(prefs.channels)) != len(prefs.channels):
            raise InvalidInputError("list each delivery channel at most once")
        unknown = [c for c in prefs.channels if c not in self.channels]
        if unknown:
            raise InvalidInputError(
                f"unknown delivery channel {unknown[0]!r}; known: {', '.join(self.channels)}"
            )
        if prefs.quiet is not None:
            check_quiet(prefs.quiet)
        await (await self.store(user_id)).save_prefs(prefs)
        return prefs

    # -- delivery ------------------------------------------------------------------------

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks.setdefault(user_id, asyncio.Lock())

    async def _deliver(self, user_id: str, ids: list[str]) -> None:
        async with self._lock(user_id):
            try:
                store = await self.store(user_id)
            except DatabaseClosedError:
                return  # held: the rows wait in their database for the next unlock
            notes = await store.undelivered(ids)
            if not notes:
                return
            prefs = await store.prefs()
            user, _ = await self._server.fetch(user_id)
            zone = default_zone(user.profile.get("timezone"), self._server.instance.timezone().key)
            if is_quiet(prefs.quiet, self.clock(), zone):
                notes = [n for n in notes if n.urgency == "high"]
                if not notes:
                    return
            top = max(notes, key=lambda n: _URGENCY_RANK[n.urgency]).urgency
            delivery = Delivery(
                user_id=user_id, items=notes, unread=await store.unread(), urgency=top
            )
            via = await self._hand_to_channels(delivery, prefs.channels)
            await store.mark_delivered([n.id for n in notes])
            self.deliveries += 1
            log.info("notifications delivered", user_id=user_id, count=len(notes), via=via)

    async def _hand_to_channels(self, delivery: Delivery, chosen: list[str]) -> list[str]:
        via: list[str] = []
        for name in chosen:
            channel = self.channels.get(name)
            if channel is None:
                continue
            try:
                if await channel.available(delivery.user_id) and await channel.deliver(delivery):
                    via.append(name)
            except Exception:
                log.exception("a notification channel failed", channel=name)
        if not via and "web" not in chosen:
            # The fallback: what none of the member's channels took goes to the web.
            await self.channels["web"].deliver(delivery)
            via.append("web")
        return via

    async def deliver_held(self, user_id: str) -> None:
        """Deliver what waits (quiet hours over, a crash, an unlock) in one batch."""
        try:
            store = await self.store(user_id)
        except DatabaseClosedError:
            return
        cutoff = (self.clock() - timedelta(seconds=HELD_GRACE_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
        ids = await store.held(before=cutoff)
        if ids:
            await self._deliver(user_id, ids)

    async def flush(self) -> None:
        """Close every open batch now and wait for the deliveries (tests, shutdown)."""
        await self._batcher.flush_now()

    async def settle(self) -> None:
        """Wait until the batches handed over so far are delivered (tests)."""
        await self._batcher.wait()

    async def run(self) -> None:
        """The held-delivery loop (a service): every `held_check_s`, each unlocked member."""
        try:
            while True:
                await self._sleep(self.config.held_check_s)
                for user_id in [m.id for m in self._server.unlocked()]:
                    try:
                        await self.deliver_held(user_id)
                    except Exception:
                        log.exception("held notifications could not be delivered")
        finally:
            await self._batcher.close()
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    # -- Web Push ------------------------------------------------------------------------

    @property
    def vapid(self) -> VapidKey:
        if self._vapid is None:
            self._vapid = VapidKey.load_or_create(self._server.layout.vapid_key)
        return self._vapid

    async def _key(self) -> VapidKey:
        """`vapid`, read (or made) in a thread the first time: the file, and the signing
        library imported at first use (webpush.py)."""
        if self._vapid is None:
            await asyncio.to_thread(lambda: self.vapid)
        return self.vapid

    async def public_key(self) -> str:
        return (await self._key()).public_key

    async def subscribe(
        self, user_id: str, *, endpoint: str, p256dh: str, auth: str, label: str
    ) -> PushDevice:
        check_endpoint(endpoint, allow_private=self.config.push_allow_private)
        check_keys(p256dh, auth)
        store = await self.store(user_id)
        return await store.add_device(
            endpoint=endpoint, p256dh=p256dh, auth=auth, label=label, at_most=MAX_DEVICES
        )

    async def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            # Made in a thread: the transport's module loads httpcore and its TLS context
            # reads the CA bundle, neither of which belongs on the loop (or in memory
            # before a household's first push device).
            transport = await asyncio.to_thread(self._transport)
            self._http = httpx.AsyncClient(
                transport=transport,
                timeout=self.config.push_timeout_s,
                follow_redirects=False,
                trust_env=False,
            )
        return self._http

    def _transport(self) -> httpx.AsyncBaseTransport:
        """Each host looked up once, refused unless every address is public (or the
        operator allows private ones), and connected to at that address."""
        from skald.features.notifications.pinned_transport import (
            PinnedTransport,
            system_resolve,
        )

        allow = self.config.push_allow_private
        return PinnedTransport(
            (lambda _a: True) if allow else is_public, resolve=self._resolve or system_resolve
        )

    async def push(self, user_id: str, delivery: Delivery) -> int:
        """Send the batch to each enabled device of the member; returns how many took it."""
        store = await self.store(user_id)
        devices = [d for d in await store.devices() if d.enabled]
        if not devices:
            return 0
        await self.public_key()
        payload = push_payload(delivery)
        sent = 0
        for device in devices:  # one device's bad endpoint never stops the others
            outcome, status = await self._push_one(device, payload, delivery.urgency)
            if outcome == "sent":
                sent += 1
            elif outcome == "gone":
                await store.remove_endpoint(device.endpoint)
                log.info("push subscription expired, removed", user_id=user_id, status=status)
            elif outcome == "refused":
                log.warning("a push endpoint was refused", user_id=user_id, device=device.id)
            else:
                log.warning("a push was not accepted", user_id=user_id, status=status)
        return sent

    async def _push_one(
        self, device: PushDevice, payload: bytes, urgency: str
    ) -> tuple[PushOutcome, int | None]:
        try:  # rows stored before today's checks are checked again
            check_endpoint(device.endpoint, allow_private=self.config.push_allow_private)
        except InvalidInputError:
            return "refused", None
        return await send(
            await self._client(),
            PushTarget(device.endpoint, device.p256dh, device.auth),
            payload,
            key=await self._key(),
            subject=self.config.vapid_subject,
            ttl=self.config.push_ttl_s,
            urgency=urgency,
        )


class WebChannel:
    """The web: the live event to every open tab, and Web Push to the member's devices."""

    name = "web"

    def __init__(
        self, events: EventHub, push: Callable[[str, Delivery], Awaitable[object]]
    ) -> None:
        self._events = events
        self._push = push

    async def available(self, user_id: str) -> bool:
        return True

    async def deliver(self, delivery: Delivery) -> bool:
        self._events.publish(
            delivery.user_id, Notified(items=delivery.items, unread=delivery.unread)
        )
        try:
            await self._push(delivery.user_id, delivery)
        except Exception:
            log.exception("web push failed")
        return True
