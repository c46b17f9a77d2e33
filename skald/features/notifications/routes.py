"""Notifications: the caller's own list, read marks, preferences and Web Push devices.

Every signed-in member has notifications (like `/api/storage`, no capability): the
session is the gate, and everything resolves in the caller's own owner database, so an
id of another member's notification or device is simply not found.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from skald.api.deps import AuthRequest
from skald.api.openapi import errors
from skald.errors import NotFoundError
from skald.features.notifications.store import (
    Notification,
    NotificationPrefs,
    PushDevice,
    QuietHours,
)
from skald.plugins.facade import Server  # Litestar reads the annotations

MAX_PAGE = 200
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Channel = Annotated[str, msgspec.Meta(min_length=1, max_length=40)]
HHMM = Annotated[str, msgspec.Meta(min_length=4, max_length=5)]


class NotificationPage(msgspec.Struct, frozen=True, kw_only=True):
    items: list[Notification]
    unread: int


class Unread(msgspec.Struct, frozen=True, kw_only=True):
    unread: int


class MarkReadIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ids: Annotated[list[Id], msgspec.Meta(min_length=1, max_length=MAX_PAGE)]


class QuietIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    start: HHMM
    end: HHMM
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


class PrefsIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    channels: Annotated[list[Channel], msgspec.Meta(min_length=1, max_length=8)]
    quiet: QuietIn | None = None


class PrefsOut(msgspec.Struct, frozen=True, kw_only=True):
    channels: list[str]
    quiet: QuietHours | None
    available: list[str]  # the channels this server has
    household_timezone: str


class PushKey(msgspec.Struct, frozen=True, kw_only=True):
    public_key: str  # the VAPID key, base64url, for pushManager.subscribe()


class SubscriptionKeys(msgspec.Struct, frozen=True, kw_only=True):
    p256dh: Key
    auth: Key


class SubscribeIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # The browser's PushSubscription.toJSON() (expirationTime is ignored).
    endpoint: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    keys: SubscriptionKeys
    label: Annotated[str, msgspec.Meta(max_length=100)] = ""
    expirationTime: int | float | None = None


class DeviceOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    label: str
    enabled: bool
    created_at: str
    endpoint: str  # the browser matches its own subscription by it


class DevicePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool


def _device(d: PushDevice) -> DeviceOut:
    # The fields `DeviceOut` names, read off the row by name (never the browser's keys).
    return msgspec.convert(d, DeviceOut, from_attributes=True)


@get("/api/notifications")
async def list_notifications(
    request: AuthRequest,
    server: NamedDependency[Server],
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
    before: Annotated[str | None, QueryParameter(max_length=64)] = None,
    unread_only: FromQuery[bool] = False,
) -> NotificationPage:
    """The caller's notifications, newest first (`before`: the last id of the previous page)."""
    store = await server.notifications.store(request.user.user.id)
    items, unread = await store.page(limit=limit, before=before, unread_only=unread_only)
    return NotificationPage(items=items, unread=unread)


@post("/api/notifications/read", status_code=200, responses=errors(400, 404))
async def mark_read(
    data: JSONBody[MarkReadIn], request: AuthRequest, server: NamedDependency[Server]
) -> Unread:
    """Mark these notifications read (404 when none of them is the caller's)."""
    found, unread = await server.notifications.mark_read(request.user.user.id, data.ids)
    if found == 0:
        raise NotFoundError("no such notification")
    return Unread(unread=unread)


@post("/api/notifications/read-all", status_code=200)
async def mark_all_read(request: AuthRequest, server: NamedDependency[Server]) -> Unread:
    return Unread(unread=await server.notifications.mark_all_read(request.user.user.id))


@delete("/api/notifications/{note_id:str}", status_code=204, responses=errors(404))
async def delete_notification(
    note_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> None:
    if not await server.notifications.delete(request.user.user.id, note_id):
        raise NotFoundError("no such notification")


async def _prefs_out(server: Server, prefs: NotificationPrefs) -> PrefsOut:
    return PrefsOut(
        channels=prefs.channels,
        quiet=prefs.quiet,
        available=list(server.notifications.channels),
        household_timezone=server.config.assistant.timezone,
    )


@get("/api/notifications/settings")
async def get_settings(request: AuthRequest, server: NamedDependency[Server]) -> PrefsOut:
    store = await server.notifications.store(request.user.user.id)
    return await _prefs_out(server, await store.prefs())


@put("/api/notifications/settings", responses=errors(400))
async def put_settings(
    data: JSONBody[PrefsIn], request: AuthRequest, server: NamedDependency[Server]
) -> PrefsOut:
    """Where notifications arrive (in order) and the quiet hours (null: none)."""
    quiet = None
    if data.quiet is not None:
        quiet = QuietHours(start=data.quiet.start, end=data.quiet.end, timezone=data.quiet.timezone)
    prefs = await server.notifications.save_prefs(
        request.user.user.id, NotificationPrefs(channels=data.channels, quiet=quiet)
    )
    return await _prefs_out(server, prefs)


@post("/api/notifications/test", status_code=201)
async def send_test(request: AuthRequest, server: NamedDependency[Server]) -> Notification:
    """A notification to oneself, to see where it arrives (the settings' test button)."""
    return await server.notifications.notify(
        request.user.user.id,
        title="Test notification",
        body="If you can read this, notifications reach you here.",
        link="/profile",
        source="test",
    )


@get("/api/notifications/push/key")
async def push_key(server: NamedDependency[Server]) -> PushKey:
    return PushKey(public_key=await server.notifications.public_key())


@get("/api/notifications/push/devices")
async def list_devices(request: AuthRequest, server: NamedDependency[Server]) -> list[DeviceOut]:
    store = await server.notifications.store(request.user.user.id)
    return [_device(d) for d in await store.devices()]


@post("/api/notifications/push/devices", status_code=201, responses=errors(400))
async def subscribe(
    data: JSONBody[SubscribeIn], request: AuthRequest, server: NamedDependency[Server]
) -> DeviceOut:
    """Register this browser's push subscription (the same endpoint again: updated)."""
    device = await server.notifications.subscribe(
        request.user.user.id,
        endpoint=data.endpoint,
        p256dh=data.keys.p256dh,
        auth=data.keys.auth,
        label=data.label.strip(),
    )
    return _device(device)


@patch("/api/notifications/push/devices/{device_id:str}", responses=errors(400, 404))
async def patch_device(
    device_id: FromPath[str],
    data: JSONBody[DevicePatch],
    request: AuthRequest,
    server: NamedDependency[Server],
) -> DeviceOut:
    """Push on or off for one device."""
    store = await server.notifications.store(request.user.user.id)
    if not await store.set_device_enabled(device_id, data.enabled):
        raise NotFoundError("no such device")
    device = next(d for d in await store.devices() if d.id == device_id)
    return _device(device)


@delete("/api/notifications/push/devices/{device_id:str}", status_code=204, responses=errors(404))
async def remove_device(
    device_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> None:
    store = await server.notifications.store(request.user.user.id)
    if not await store.remove_device(device_id):
        raise NotFoundError("no such device")


ROUTES = [
    list_notifications,
    mark_read,
    mark_all_read,
    delete_notification,
    get_settings,
    put_settings,
    send_test,
    push_key,
    list_devices,
    subscribe,
    patch_device,
    remove_device,
]
