"""Web Push against a local push-service double (tests/push_double.py: a real HTTP server
on 127.0.0.1 that checks VAPID, TTL and the encoding and decrypts the payload with the
subscription's private key, as a browser would)."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from conftest import PASSWORD, MakeClient, signed_in
from push_double import PushDouble, b64u
from test_notifications import Hand

from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.notifications.channels import Delivery
from skald.features.notifications.config import NotificationsConfig
from skald.features.notifications.payload import push_payload
from skald.features.notifications.service import MAX_DEVICES, NotificationService
from skald.features.notifications.store import Notification
from skald.features.notifications.webpush import (
    MAX_PAYLOAD,
    PushTarget,
    VapidKey,
    check_endpoint,
    send,
)

pytestmark = pytest.mark.timeout(60)

CONFIG = NotificationsConfig(push_allow_private=True, vapid_subject="mailto:ops@example.org")


@pytest.fixture
async def household(runtime: Runtime, household: dict[str, str]) -> dict[str, str]:
    for name in household:
        await runtime.attach(await runtime.core.users.unlock(name, PASSWORD))
    return household


@pytest.fixture
def hand() -> Hand:
    return Hand()


@pytest.fixture
async def service(runtime: Runtime, hand: Hand) -> NotificationService:
    svc = NotificationService(runtime.server, runtime.plugins, sleep=hand.sleep, config=CONFIG)
    runtime.notifications = svc
    return svc


@pytest.fixture
async def double(service: NotificationService) -> Iterator[PushDouble]:
    with PushDouble(await service.public_key()) as d:
        yield d


async def _deliver(service: NotificationService, hand: Hand) -> None:
    await hand.close_windows()
    await service.settle()


async def test_a_burst_reaches_the_push_double_as_one_valid_encrypted_message(
    household: dict[str, str],
    service: NotificationService,
    double: PushDouble,
    hand: Hand,
    make_client: MakeClient,
) -> None:
    sub = double.subscribe()
    ada = await signed_in(make_client, "ada")
    body = {**double.browser_json(sub), "label": "Ada's phone"}
    r = await ada.call("POST", "/api/notifications/push/devices", json=body)
    assert r.status_code == 201, r.text
    for i in range(5):
        await service.notify(household["ada"], title=f"item {i}", body="text", link="/tasks")
    await _deliver(service, hand)
    assert double.refusals == []
    assert len(double.messages) == 1
    message = double.messages[0]
    payload = message["payload"]
    assert payload["count"] == 5 and payload["unread"] == 5
    assert [i["title"] for i in payload["items"]] == [f"item {i}" for i in range(4, -1, -1)]
    assert payload["items"][0]["link"] == "/tasks"
    assert message["ttl"] == CONFIG.push_ttl_s and message["urgency"] == "normal"
    assert message["claims"]["aud"] == double.origin
    assert message["claims"]["sub"] == "mailto:ops@example.org"


async def test_an_expired_subscription_is_removed_and_a_disabled_one_gets_nothing(
    household: dict[str, str], service: NotificationService, double: PushDouble, hand: Hand
) -> None:
    ada = household["ada"]
    gone, unknown = double.subscribe(), double.subscribe()
    off, live = double.subscribe(), double.subscribe()
    devices = {}
    for name, sub in (("gone", gone), ("unknown", unknown), ("off", off), ("live", live)):
        devices[name] = await service.subscribe(
            ada, endpoint=double.endpoint(sub), p256dh=sub.p256dh, auth=b64u(sub.auth), label=name
        )
    store = await service.store(ada)
    assert await store.set_device_enabled(devices["off"].id, False)
    gone.gone = True
    del double.subscriptions[unknown.id]  # the push service forgot it: 404
    await service.notify(ada, title="hello")
    await _deliver(service, hand)
    assert [m["subscription"] for m in double.messages] == [live.id]
    assert sorted(double.refusals) == [
        "404 no such subscription",
        "410 the subscription has expired",
    ]
    assert sorted(d.label for d in await store.devices()) == ["live", "off"]


async def test_the_double_refuses_what_a_real_push_service_would(
    service: NotificationService, double: PushDouble, tmp_path: Path
) -> None:
    """The double's checks can fail: each broken request is refused for its reason."""
    sub = double.subscribe()
    target = PushTarget(double.endpoint(sub), sub.p256dh, b64u(sub.auth))
    key = service.vapid
    async with httpx.AsyncClient() as client:
        ok = await send(client, target, b'{"n":1}', key=key, subject="mailto:a@b.example", ttl=60)
        assert ok == ("sent", 201)
        stranger = VapidKey.load_or_create(tmp_path / "other.pem")
        out = await send(client, target, b"{}", key=stranger, subject="mailto:a@b.example", ttl=60)
        assert out == ("failed", 403)
        wrong_keys = PushTarget(target.endpoint, double.subscribe().p256dh, target.auth)
        assert (
            await send(client, wrong_keys, b"{}", key=key, subject="mailto:a@b.example", ttl=60)
        ) == ("failed", 400)
        headers = {"Authorization": key.authorization(target.endpoint, "mailto:a@b.example")}
        r = await client.post(target.endpoint, content=b"x" * 40, headers=headers)
        assert r.status_code == 400  # no TTL
    assert double.refusals == [
        "403 k is not the key the subscription was made with",
        "400 the payload does not decrypt with the subscription's keys",
        "400 a TTL header (seconds) is required",
    ]


async def test_the_vapid_key_is_made_once_per_instance_and_kept_private(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    client = await signed_in(make_client, "tim")
    first = (await client.call("GET", "/api/notifications/push/key")).json()["public_key"]
    path = runtime.core.layout.root / "vapid.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert VapidKey.load_or_create(path).public_key == first
    assert len(b64u(b"x" * 65)) == len(first)  # an uncompressed P-256 point


def test_push_endpoints_must_be_https_on_public_hosts_unless_allowed() -> None:
    for bad in (
        "http://push.example.com/x",
        "https://127.0.0.1/x",
        "https://10.1.2.3/x",
        "https://[::1]/x",
        "https://localhost/x",
        "https://router.local/x",
        "https://user:pw@push.example.com/x",
        "ftp://push.example.com/x",
        "not a url",
    ):
        with pytest.raises(InvalidInputError):
            check_endpoint(bad, allow_private=False)
    assert check_endpoint("https://fcm.example.com/wp/abc", allow_private=False)
    assert check_endpoint("http://127.0.0.1:9/x", allow_private=True)


async def test_a_batch_too_big_for_one_push_is_cut_to_fit_and_still_decrypts(
    double: PushDouble, service: NotificationService
) -> None:
    items = [
        Notification(
            id=f"n{i}", created_at="2026-12-01T00:00:00Z", title="t" * 200, body="b" * 2000,
            link=None, source="job", urgency="normal", read=False, delivered=False,
        )
        for i in range(20)
    ]  # fmt: skip
    data = push_payload(Delivery(user_id="u", items=items, unread=20, urgency="normal"))
    assert len(data) <= MAX_PAYLOAD
    decoded = msgspec.json.decode(data)
    assert decoded["count"] == 20 and decoded["items"][0]["id"] == "n19"
    sub = double.subscribe()
    target = PushTarget(double.endpoint(sub), sub.p256dh, b64u(sub.auth))
    async with httpx.AsyncClient() as client:
        out = await send(
            client, target, data, key=service.vapid, subject="mailto:a@b.example", ttl=5
        )
    assert out == ("sent", 201), double.refusals
    assert double.messages[0]["size"] <= 4096


async def test_parallel_subscriptions_cannot_pass_the_device_limit(
    household: dict[str, str], make_client: MakeClient, double: PushDouble
) -> None:
    client = await signed_in(make_client, "ada")
    bodies = [double.browser_json(double.subscribe()) for _ in range(MAX_DEVICES + 5)]
    answers = await asyncio.gather(
        *(client.call("POST", "/api/notifications/push/devices", json=b) for b in bodies)
    )
    assert sorted(r.status_code for r in answers) == [201] * MAX_DEVICES + [400] * 5
    assert len((await client.call("GET", "/api/notifications/push/devices")).json()) == 20
    # A device already known subscribing again is no new one: still let in at the limit.
    known = next(b for b, r in zip(bodies, answers, strict=True) if r.status_code == 201)
    again = await client.call("POST", "/api/notifications/push/devices", json=known)
    assert again.status_code == 201, again.text


async def test_subscribing_checks_the_endpoint_and_keys(
    household: dict[str, str], make_client: MakeClient, double: PushDouble
) -> None:
    client = await signed_in(make_client, "ada")
    sub = double.subscribe()
    good = double.browser_json(sub)
    for broken in (
        {**good, "keys": {"p256dh": "AAAA", "auth": good["keys"]["auth"]}},
        {**good, "keys": {"p256dh": good["keys"]["p256dh"], "auth": b64u(b"short")}},
        {**good, "endpoint": "ftp://x/y"},
    ):
        r = await client.call("POST", "/api/notifications/push/devices", json=broken)
        assert r.status_code == 400, r.text
    r = await client.call("POST", "/api/notifications/push/devices", json=good)
    assert r.status_code == 201
    device = r.json()
    assert device["enabled"] and device["endpoint"] == good["endpoint"]
    path = f"/api/notifications/push/devices/{device['id']}"
    r = await client.call("PATCH", path, json={"enabled": False})
    assert r.status_code == 200 and r.json()["enabled"] is False
    # The same browser subscribing again is the same device, on again.
    r = await client.call("POST", "/api/notifications/push/devices", json=good)
    assert r.json()["id"] == device["id"] and r.json()["enabled"] is True
    other = await signed_in(make_client, "tim")
    assert (await other.call("PATCH", path, json={"enabled": False})).status_code == 404
    assert (await other.call("DELETE", path)).status_code == 404
    assert (await client.call("DELETE", path)).status_code == 204
    assert (await client.call("GET", "/api/notifications/push/devices")).json() == []
