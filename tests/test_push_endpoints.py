"""Where the server may post a push message (issue 20 item 10, issue 32 item 9).

The push double (tests/push_double.py) listens on 127.0.0.1; a test resolver answers for
a name (`push.test`), so a "public" name can be made to resolve anywhere, and the double
can speak TLS with a certificate for that name.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from certs import self_signed
from cryptography import x509
from push_double import PushDouble, b64u
from test_notifications import Hand
from test_webpush import household  # noqa: F401  (the fixture: every member unlocked)

from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.notifications.config import NotificationsConfig
from skald.features.notifications.pinned import is_public
from skald.features.notifications.pinned_transport import PinnedTransport
from skald.features.notifications.service import NotificationService
from skald.features.notifications.webpush import PushTarget, VapidKey, check_endpoint, send

pytestmark = pytest.mark.timeout(60)

NUMERIC_SPELLINGS = [
    "2130706433",  # 127.0.0.1 as one number
    "0x7f000001",
    "127.1",
    "0x7f.1",
    "017700000001",  # octal
    "0",  # 0.0.0.0: this host
    "0xa9fea9fe",  # 169.254.169.254, the cloud metadata address
    "10.1",
    "127.0.0.1.",
    "0177.0.0.1",
    "127.000.000.001",
]

NOT_PUBLIC = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "192.168.1.1",
    "100.64.0.0", "100.127.255.255",  # shared address space (RFC 6598), both ends
    "198.18.0.0", "198.19.255.255",  # benchmarking (RFC 2544), both ends
    "240.0.0.1", "255.255.255.255",  # reserved, broadcast
    "169.254.169.254", "0.0.0.0", "192.0.2.1",  # noqa: S104 - link-local, this host, docs
    "224.0.0.1", "239.255.255.250",  # multicast
    "::1", "0:0:0:0:0:0:0:1", "::", "fe80::1", "fc00::1", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "2002:7f00:1::", "64:ff9b::a00:1",  # IPv4 inside IPv6
]  # fmt: skip

PUBLIC = [
    "8.8.8.8", "100.63.255.255", "100.128.0.0", "198.17.255.255", "198.20.0.0",
    "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1",
]  # fmt: skip


@pytest.mark.parametrize("host", NUMERIC_SPELLINGS)
@pytest.mark.parametrize("allow_private", [False, True])
def test_numeric_spellings_of_addresses_are_refused_as_push_endpoints(
    host: str, allow_private: bool
) -> None:
    with pytest.raises(InvalidInputError, match="address"):
        check_endpoint(f"https://{host}/wp/abc", allow_private=allow_private)


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_every_address_that_is_not_public_is_refused(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(InvalidInputError):
        check_endpoint(f"https://{host}/wp/abc", allow_private=False)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_written_the_usual_way_are_accepted(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    assert check_endpoint(f"https://{host}/wp/abc", allow_private=False)


def test_host_names_are_accepted_and_odd_ones_refused() -> None:
    for good in ("fcm.googleapis.com", "push.example.com.", "a-1.example"):
        assert check_endpoint(f"https://{good}/wp/x", allow_private=False)
    for bad in ("push_\x01.example", "bücher.example", "-x.example", "[fe80::1%25eth0]"):
        with pytest.raises(InvalidInputError):
            check_endpoint(f"https://{bad}/wp/x", allow_private=False)


class Resolver:
    """Answers for push.test from a script (the last answer repeats); counts lookups."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.lookups = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        assert host == "push.test"
        answer = self.answers[min(self.lookups, len(self.answers) - 1)]
        self.lookups += 1
        return answer


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for push.test, and a client trusting only it."""
    folder: Path = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(folder, "push.test", alt=x509.DNSName("push.test"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    return server, client


@pytest.fixture
def vapid(tmp_path: Path) -> VapidKey:
    return VapidKey.load_or_create(tmp_path / "vapid.pem")


@pytest.fixture
def secure_double(
    vapid: VapidKey, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> Iterator[PushDouble]:
    with PushDouble(vapid.public_key, tls=tls[0], name="push.test") as d:
        yield d


def _loopback_only(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Stands in for "public" here: the double is on 127.0.0.1, nothing else answers."""
    return address == ipaddress.ip_address("127.0.0.1")


async def _send(double: PushDouble, vapid: VapidKey, transport: PinnedTransport) -> str:
    sub = double.subscribe()
    target = PushTarget(double.endpoint(sub), sub.p256dh, b64u(sub.auth))
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        outcome, _ = await send(client, target, b"{}", key=vapid, subject="mailto:a@b.test", ttl=9)
    return outcome


async def test_the_push_goes_to_the_address_checked_with_the_name_kept_for_tls_and_host(
    secure_double: PushDouble, vapid: VapidKey, tls: tuple[ssl.SSLContext, ssl.SSLContext]
) -> None:
    """A second lookup would get the rebound address: there is none."""
    resolver = Resolver(["127.0.0.1"], ["10.20.30.40"])
    transport = PinnedTransport(_loopback_only, resolve=resolver, verify=tls[1])
    assert await _send(secure_double, vapid, transport) == "sent", secure_double.refusals
    assert resolver.lookups == 1
    assert secure_double.sni == ["push.test"]
    port = secure_double.server.server_address[1]
    assert secure_double.hosts == [f"push.test:{port}"]
    assert secure_double.messages[0]["claims"]["aud"] == f"https://push.test:{port}"


@pytest.mark.parametrize(
    "answer",
    [["127.0.0.1", "10.0.0.1"], ["10.0.0.1", "127.0.0.1"], ["100.64.0.1"], ["198.18.0.1"],
     ["169.254.169.254"], ["::ffff:127.0.0.1"], ["224.0.0.1"], []],
)  # fmt: skip
async def test_a_name_resolving_to_any_address_that_is_not_public_is_never_connected_to(
    secure_double: PushDouble,
    vapid: VapidKey,
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
    answer: list[str],
) -> None:
    transport = PinnedTransport(_loopback_only, resolve=Resolver(answer), verify=tls[1])
    assert await _send(secure_double, vapid, transport) in ("refused", "failed")
    assert secure_double.hosts == [] and secure_double.sni == []


async def test_the_service_refuses_a_public_name_that_resolves_to_loopback(
    runtime: Runtime,
    household: dict[str, str],  # noqa: F811
    secure_double: PushDouble,
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    hand = Hand()
    config = NotificationsConfig(push_allow_private=False, vapid_subject="mailto:a@b.test")
    service = NotificationService(
        runtime.server,
        runtime.plugins,
        sleep=hand.sleep,
        config=config,
        resolve=Resolver(["127.0.0.1"]),
    )
    runtime.notifications = service
    ada = household["ada"]
    sub = secure_double.subscribe()
    await service.subscribe(
        ada, endpoint=secure_double.endpoint(sub), p256dh=sub.p256dh, auth=b64u(sub.auth), label="x"
    )
    await service.notify(ada, title="hello")
    await hand.close_windows()
    await service.settle()
    assert secure_double.hosts == [] and secure_double.sni == []


async def test_one_device_whose_endpoint_cannot_be_sent_to_never_stops_the_members_others(
    runtime: Runtime,
    household: dict[str, str],  # noqa: F811
) -> None:
    hand = Hand()
    config = NotificationsConfig(push_allow_private=True, vapid_subject="mailto:a@b.test")
    service = NotificationService(runtime.server, runtime.plugins, sleep=hand.sleep, config=config)
    runtime.notifications = service
    ada = household["ada"]
    with PushDouble(await service.public_key()) as double:
        store = await service.store(ada)
        port = double.server.server_address[1]
        for bad in (  # rows an older version let in
            f"{double.origin}/push/\x01",  # httpx: InvalidURL
            f"http://2130706433:{port}/push/x",
        ):
            sub = double.subscribe()
            await store.add_device(
                endpoint=bad, p256dh=sub.p256dh, auth=b64u(sub.auth), label="bad", at_most=20
            )
        await store.db.call(
            lambda c: c.execute(
                "UPDATE push_subscriptions SET created_at = '2000-01-01T00:00:00Z' "
                "WHERE label = 'bad'"
            )
        )
        good = double.subscribe()
        await service.subscribe(
            ada,
            endpoint=double.endpoint(good),
            p256dh=good.p256dh,
            auth=b64u(good.auth),
            label="ok",
        )
        assert [d.label for d in await store.devices()] == ["bad", "bad", "ok"]
        await service.notify(ada, title="hello")
        await hand.close_windows()
        await service.settle()
        assert [m["subscription"] for m in double.messages] == [good.id]
        assert double.hosts == [f"127.0.0.1:{port}"]  # the numeric spelling was not tried
        assert len(await store.devices()) == 3  # refused devices are kept, not deleted
