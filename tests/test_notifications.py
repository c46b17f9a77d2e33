"""Notifications: the member's own store, batching, channels and their fallback, quiet
hours, and the API (docs/dev/notifications.md). Time moves by hand: the batch window's
sleep and the service's clock are injected, nothing here sleeps or measures time."""

from __future__ import annotations

import asyncio
import contextlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import PASSWORD, TEST_ENV, MakeClient, signed_in

from skald.config import load_config
from skald.core.events import ServerEvent
from skald.core.runtime import Runtime
from skald.errors import ConfigError, DatabaseClosedError, InvalidInputError
from skald.features.notifications.channels import Delivery
from skald.features.notifications.config import NotificationsConfig
from skald.features.notifications.events import NotificationsChanged, Notified
from skald.features.notifications.quiet import is_quiet
from skald.features.notifications.service import NotificationService
from skald.features.notifications.store import NotificationPrefs, QuietHours
from skald.paths import DataLayout

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def household(runtime: Runtime, household: dict[str, str]) -> dict[str, str]:
    """The household, every member's data unlocked (as a sign-in leaves it)."""
    for name in household:
        await runtime.attach(await runtime.core.users.unlock(name, PASSWORD))
    return household


class Hand:
    """A batch window that closes when the test says so."""

    def __init__(self) -> None:
        self.windows: list[asyncio.Future[None]] = []

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.windows.append(future)
        await future

    async def opened(self, count: int) -> None:
        """Until `count` windows were opened in all (a bounded wait for an event)."""
        for _ in range(1000):
            if len(self.windows) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"only {len(self.windows)} of {count} windows were opened")

    async def close_windows(self) -> None:
        # The batch task starts on the loop's next turns (after database calls in threads):
        # let it open its window first (a bounded wait for an event, not a timing).
        for _ in range(1000):
            if any(not f.done() for f in self.windows):
                break
            await asyncio.sleep(0.01)
        for future in self.windows:
            if not future.done():
                future.set_result(None)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Recorder:
    """A channel that keeps every delivery it gets."""

    def __init__(self, name: str = "rec", *, reachable: bool = True) -> None:
        self.name = name
        self.reachable = reachable
        self.deliveries: list[Delivery] = []

    async def available(self, user_id: str) -> bool:
        return self.reachable

    async def deliver(self, delivery: Delivery) -> bool:
        self.deliveries.append(delivery)
        return True


def _service(runtime: Runtime, hand: Hand, clock: Clock | None = None) -> NotificationService:
    service = NotificationService(
        runtime.server, runtime.plugins, sleep=hand.sleep, clock=clock or Clock(datetime.now(UTC))
    )
    runtime.notifications = service
    return service


# 23:00 in Rome (UTC+1 in December): inside the quiet hours below.
# Far ahead of the real clock: a notification's row is stamped with the real time, and
# held rows go out only once the service's clock is past it (these tests failed once
# the real date passed the night they played).
ROME_NIGHT = datetime(2036, 12, 1, 22, 0, tzinfo=UTC)
NIGHT = QuietHours(start="22:00", end="07:00", timezone="Europe/Rome")


async def _recorded(
    runtime: Runtime,
    hand: Hand,
    user_id: str,
    clock: Clock | None = None,
    *,
    quiet: QuietHours | None = None,
    rec: Recorder | None = None,
) -> tuple[NotificationService, Recorder]:
    """A service whose one channel for `user_id` is a `Recorder` (`rec`, or a new one)."""
    service = _service(runtime, hand, clock)
    rec = Recorder() if rec is None else rec
    service.register(rec)
    await service.save_prefs(user_id, NotificationPrefs(channels=["rec"], quiet=quiet))
    return service, rec


async def _quiet_night(
    runtime: Runtime, household: dict[str, str], rec: Recorder | None = None
) -> tuple[Hand, Clock, str, NotificationService, Recorder]:
    """Where the quiet-hours tests start: ada's recorded channel, her quiet hours NIGHT,
    the service's clock at ROME_NIGHT; the hand, clock, ada, service and recorder."""
    hand = Hand()
    clock = Clock(ROME_NIGHT)
    ada = household["ada"]
    service, rec = await _recorded(runtime, hand, ada, clock, quiet=NIGHT, rec=rec)
    return hand, clock, ada, service, rec


def _events(runtime: Runtime, user_id: str) -> list[ServerEvent]:
    out = []
    for conn in runtime.events.connections(user_id):
        while not conn.queue.empty():
            event = conn.queue.get_nowait()
            if event is not None:
                out.append(event)
    return out


async def test_a_burst_of_twenty_notify_calls_arrives_as_one_delivery(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    ada = household["ada"]
    service, rec = await _recorded(runtime, hand, ada)
    for i in range(20):
        await service.notify(ada, title=f"burst {i}", source="job")
    assert len(hand.windows) == 1, "the first call opens the only window"
    assert rec.deliveries == []
    await hand.close_windows()
    await service.settle()
    assert len(rec.deliveries) == 1
    assert [n.title for n in rec.deliveries[0].items] == [f"burst {i}" for i in range(20)]
    assert rec.deliveries[0].unread == 20
    # The next call opens a new window: a second delivery, of that one only.
    await service.notify(ada, title="later")
    await hand.close_windows()
    await service.settle()
    assert [len(d.items) for d in rec.deliveries] == [20, 1]
    assert service.deliveries == 2


async def test_the_web_gets_the_batch_live_and_the_badge_count_at_each_write(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    service = _service(runtime, hand)
    ada = household["ada"]
    runtime.events.connect(ada, "tab")
    for i in range(3):
        await service.notify(ada, title=f"n{i}")
    changed = [e for e in _events(runtime, ada) if isinstance(e, NotificationsChanged)]
    assert [e.unread for e in changed] == [1, 2, 3]
    await hand.close_windows()
    await service.settle()
    notified = [e for e in _events(runtime, ada) if isinstance(e, Notified)]
    assert len(notified) == 1 and [n.title for n in notified[0].items] == ["n0", "n1", "n2"]


async def test_one_member_never_gets_another_members_notifications(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    service = _service(runtime, hand)
    ada, tim = household["ada"], household["tim"]
    runtime.events.connect(tim, "tims-tab")
    note = await service.notify(ada, title="for ada only")
    await hand.close_windows()
    await service.settle()
    assert _events(runtime, tim) == []
    tims, _ = await (await service.store(tim)).page(limit=50)
    assert tims == []
    assert await service.delete(tim, note.id) is False
    assert (await service.mark_read(tim, [note.id]))[0] == 0
    adas, unread = await (await service.store(ada)).page(limit=50)
    assert [n.id for n in adas] == [note.id] and unread == 1


async def test_a_member_whose_channels_cannot_take_it_gets_it_on_the_web(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    service = _service(runtime, hand)
    away = Recorder("pager", reachable=False)
    service.register(away)
    ada = household["ada"]
    await service.save_prefs(ada, NotificationPrefs(channels=["pager"]))
    runtime.events.connect(ada, "tab")
    await service.notify(ada, title="falls back")
    await hand.close_windows()
    await service.settle()
    assert away.deliveries == []
    assert [type(e) for e in _events(runtime, ada)].count(Notified) == 1


async def test_quiet_hours_hold_deliveries_and_send_them_after_in_one_batch(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand, clock, ada, service, rec = await _quiet_night(runtime, household)
    for i in range(3):
        await service.notify(ada, title=f"night {i}")
    await hand.close_windows()
    await service.settle()
    assert rec.deliveries == [], "held during quiet hours"
    stored, unread = await (await service.store(ada)).page(limit=50)
    assert unread == 3 and not any(n.delivered for n in stored), "the in-app store has them"
    # Still quiet at 06:59 local: the held loop leaves them.
    clock.now = datetime(2036, 12, 2, 5, 59, tzinfo=UTC)
    await service.deliver_held(ada)
    assert rec.deliveries == []
    # 07:00 local: quiet is over, one delivery with all three.
    clock.now = datetime(2036, 12, 2, 6, 0, tzinfo=UTC)
    await service.deliver_held(ada)
    assert len(rec.deliveries) == 1
    assert [n.title for n in rec.deliveries[0].items] == ["night 0", "night 1", "night 2"]
    await service.deliver_held(ada)
    assert len(rec.deliveries) == 1, "delivered once"


async def test_high_urgency_goes_through_quiet_hours(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand, _, ada, service, rec = await _quiet_night(runtime, household)
    await service.notify(ada, title="can wait")
    await service.notify(ada, title="the alarm", urgency="high")
    await hand.close_windows()
    await service.settle()
    assert [[n.title for n in d.items] for d in rec.deliveries] == [["the alarm"]]


async def test_held_rows_of_a_crash_are_delivered_by_the_loop_but_not_a_fresh_batch(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    clock = Clock(datetime.now(UTC))
    ada = household["ada"]
    service, rec = await _recorded(runtime, hand, ada, clock)
    await service.notify(ada, title="in its window")
    await service.deliver_held(ada)
    assert rec.deliveries == [], "a row younger than the grace belongs to its batch"
    # As after a crash: the batch is gone, the row is held in the database.
    await service._batcher.close()
    clock.now += timedelta(minutes=1)
    await service.deliver_held(ada)
    assert [n.title for d in rec.deliveries for n in d.items] == ["in its window"]


async def test_notify_refuses_bad_input_with_a_message(
    runtime: Runtime, household: dict[str, str]
) -> None:
    service = _service(runtime, Hand())
    ada = household["ada"]
    for kwargs, words in (
        ({"title": "  "}, "needs a title"),
        ({"title": "x" * 201}, "at most 200"),
        ({"title": "t", "body": "b" * 2001}, "at most 2000"),
        ({"title": "t", "link": "https://evil.example/x"}, "page of the app"),
        ({"title": "t", "link": "//evil.example/x"}, "page of the app"),
        ({"title": "t", "source": "Bad Source"}, "source"),
        ({"title": "t", "urgency": "screaming"}, "urgency"),
    ):
        with pytest.raises(InvalidInputError, match=words):
            await service.notify(ada, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="unknown delivery channel"):
        await service.save_prefs(ada, NotificationPrefs(channels=["pigeon"]))
    with pytest.raises(InvalidInputError, match="same time"):
        await service.save_prefs(
            ada, NotificationPrefs(quiet=QuietHours(start="07:00", end="07:00"))
        )


async def test_a_locked_member_cannot_be_notified_and_the_caller_is_told(
    runtime: Runtime, household: dict[str, str]
) -> None:
    service = _service(runtime, Hand())
    await runtime.lock(household["ada"])
    with pytest.raises(DatabaseClosedError):
        await service.notify(household["ada"], title="nobody home")


# -- the API ----------------------------------------------------------------------------


async def test_the_api_lists_marks_and_deletes_only_the_callers_own(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    tim = await signed_in(make_client, "tim")
    first = await runtime.notifications.notify(household["ada"], title="one", source="job")
    second = await runtime.notifications.notify(household["ada"], title="two", link="/tasks")
    r = await ada.call("GET", "/api/notifications")
    assert r.status_code == 200
    page = r.json()
    assert [n["title"] for n in page["items"]] == ["two", "one"] and page["unread"] == 2
    assert page["items"][0]["link"] == "/tasks" and page["items"][1]["source"] == "job"
    # Paging: the items after "two".
    r = await ada.call("GET", f"/api/notifications?limit=1&before={second.id}")
    assert [n["title"] for n in r.json()["items"]] == ["one"]
    # Tim sees none of it and can touch none of it.
    assert (await tim.call("GET", "/api/notifications")).json() == {"items": [], "unread": 0}
    r = await tim.call("POST", "/api/notifications/read", json={"ids": [first.id]})
    assert r.status_code == 404
    assert (await tim.call("DELETE", f"/api/notifications/{first.id}")).status_code == 404
    r = await ada.call("POST", "/api/notifications/read", json={"ids": [first.id]})
    assert r.status_code == 200 and r.json() == {"unread": 1}
    r = await ada.call("POST", "/api/notifications/read-all")
    assert r.json() == {"unread": 0}
    assert (await ada.call("DELETE", f"/api/notifications/{first.id}")).status_code == 204
    r = await ada.call("GET", "/api/notifications")
    assert [n["title"] for n in r.json()["items"]] == ["two"]


async def test_the_api_refuses_bad_requests_with_4xx(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    for method, path, body in (
        ("POST", "/api/notifications/read", {"ids": []}),
        ("POST", "/api/notifications/read", {"ids": ["x"] * 201}),
        ("POST", "/api/notifications/read", {"ids": ["x"], "extra": 1}),
        ("GET", "/api/notifications?limit=0", None),
        ("GET", "/api/notifications?limit=100000", None),
        ("PUT", "/api/notifications/settings", {"channels": ["pigeon"]}),
        ("PUT", "/api/notifications/settings", {"channels": []}),
        (
            "PUT",
            "/api/notifications/settings",
            {"channels": ["web"], "quiet": {"start": "25:00", "end": "07:00"}},
        ),
        (
            "PUT",
            "/api/notifications/settings",
            {
                "channels": ["web"],
                "quiet": {"start": "22:00", "end": "07:00", "timezone": "Mars/Base"},
            },
        ),
    ):
        r = await ada.call(method, path, json=body)
        assert r.status_code == 400, f"{method} {path} {body}: {r.status_code} {r.text}"
        assert set(r.json()) == {"error"}


async def test_settings_round_trip(household: dict[str, str], make_client: MakeClient) -> None:
    ada = await signed_in(make_client, "ada")
    r = await ada.call("GET", "/api/notifications/settings")
    assert r.json()["channels"] == ["web"] and r.json()["quiet"] is None
    assert r.json()["available"] == ["web", "telegram"]
    body = {"channels": ["web"], "quiet": {"start": "22:30", "end": "06:45", "timezone": None}}
    r = await ada.call("PUT", "/api/notifications/settings", json=body)
    assert r.status_code == 200, r.text
    r = await ada.call("GET", "/api/notifications/settings")
    assert r.json()["quiet"] == {"start": "22:30", "end": "06:45", "timezone": None}


class Waiting(Recorder):
    """A recorder the test can wait on (an event, not a clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> bool:
        await super().deliver(delivery)
        self.arrived.set()
        return True


async def test_the_held_loop_sends_what_quiet_hours_held_once_they_are_over(
    runtime: Runtime, household: dict[str, str]
) -> None:
    rec = Waiting()
    hand, clock, ada, service, _ = await _quiet_night(runtime, household, rec)
    loop = asyncio.create_task(service.run())
    try:
        await hand.opened(1)  # the loop waits for its first round
        await service.notify(ada, title="overnight")
        await hand.opened(2)  # the batch window
        await hand.close_windows()  # both: the batch is held, the loop's round finds it quiet
        await service.settle()
        await hand.opened(3)  # the loop waits again
        assert rec.deliveries == []
        clock.now = datetime(2036, 12, 2, 6, 30, tzinfo=UTC)  # 07:30 in Rome
        await hand.close_windows()  # the loop's next round
        await asyncio.wait_for(rec.arrived.wait(), 10)
        assert [n.title for d in rec.deliveries for n in d.items] == ["overnight"]
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_held_notifications_survive_a_lock_and_go_out_after_the_unlock(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand, clock, ada, service, rec = await _quiet_night(runtime, household)
    await service.notify(ada, title="while you sleep")
    await hand.close_windows()
    await service.settle()
    await runtime.lock(ada)  # signed out everywhere: the key leaves memory
    clock.now = datetime(2036, 12, 2, 7, 0, tzinfo=UTC)
    await service.deliver_held(ada)  # nothing can be read: nothing happens, no error
    assert rec.deliveries == []
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    await service.deliver_held(ada)
    assert [n.title for d in rec.deliveries for n in d.items] == ["while you sleep"]


async def test_a_notification_cut_off_by_a_restart_is_delivered_after_it(
    tmp_path: Path,
) -> None:
    layout = DataLayout(tmp_path / "data")
    config = load_config(layout.root, TEST_ENV)
    first = await Runtime.boot(layout, config, announce=io.StringIO())
    try:
        ada = (await first.core.users.create("ada", PASSWORD, "member")).user.id
        await first.attach(await first.core.users.unlock("ada", PASSWORD))
        service = _service(first, Hand())  # its window never closes: the "crash" comes first
        await service.notify(ada, title="before the restart")
    finally:
        await first.shutdown()
    second = await Runtime.boot(layout, config, announce=io.StringIO())
    try:
        await second.attach(await second.core.users.unlock("ada", PASSWORD))
        clock = Clock(datetime.now(UTC) + timedelta(minutes=1))
        service, rec = await _recorded(second, Hand(), ada, clock)
        await service.deliver_held(ada)
        await service.deliver_held(ada)
        assert [n.title for d in rec.deliveries for n in d.items] == ["before the restart"]
    finally:
        await second.shutdown()


def test_the_notifications_section_of_config_toml_is_checked_with_its_line(
    tmp_path: Path,
) -> None:
    from skald.plugins.manager import Plugins

    root = tmp_path / "data"
    root.mkdir()
    (root / "config.toml").write_text("[notifications]\nbatch_ms = 200\nheld_check_s = 0\n")
    with pytest.raises(ConfigError, match=r"line 3.*held_check_s"):
        load_config(root, TEST_ENV, lambda _: Plugins.builtin().config_sections())
    (root / "config.toml").write_text('[notifications]\nvapid_subject = "mailto:me@home.example"\n')
    config = load_config(root, TEST_ENV, lambda _: Plugins.builtin().config_sections())
    assert config.section("notifications", NotificationsConfig).vapid_subject == (
        "mailto:me@home.example"
    )


@pytest.mark.parametrize(
    ("utc", "quiet"),
    [
        # Rome, winter (UTC+1): 21:59 local is not quiet, 22:00 is, 06:59 is, 07:00 is not.
        (datetime(2026, 1, 10, 20, 59, tzinfo=UTC), False),
        (datetime(2026, 1, 10, 21, 0, tzinfo=UTC), True),
        (datetime(2026, 1, 11, 5, 59, tzinfo=UTC), True),
        (datetime(2026, 1, 11, 6, 0, tzinfo=UTC), False),
        # Summer (UTC+2): the same wall-clock window, two hours before UTC.
        (datetime(2026, 7, 10, 19, 59, tzinfo=UTC), False),
        (datetime(2026, 7, 10, 20, 0, tzinfo=UTC), True),
        (datetime(2026, 7, 11, 4, 59, tzinfo=UTC), True),
        (datetime(2026, 7, 11, 5, 0, tzinfo=UTC), False),
        # The spring-forward night (29 March 2026, 02:00 -> 03:00): quiet throughout.
        (datetime(2026, 3, 29, 0, 59, tzinfo=UTC), True),
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), True),
        (datetime(2026, 3, 29, 5, 0, tzinfo=UTC), False),  # 07:00 CEST
    ],
)
def test_quiet_hours_follow_the_wall_clock_of_the_members_zone(utc: datetime, quiet: bool) -> None:
    window = QuietHours(start="22:00", end="07:00", timezone="Europe/Rome")
    assert is_quiet(window, utc, "UTC") is quiet


def test_a_daytime_quiet_window_and_the_household_zone_by_default() -> None:
    window = QuietHours(start="13:00", end="15:30")  # no zone: the household's
    assert is_quiet(window, datetime(2026, 1, 10, 12, 0, tzinfo=UTC), "Europe/Rome")
    assert not is_quiet(window, datetime(2026, 1, 10, 12, 0, tzinfo=UTC), "UTC")
    assert not is_quiet(window, datetime(2026, 1, 10, 14, 30, tzinfo=UTC), "Europe/Rome")
    assert not is_quiet(None, datetime(2026, 1, 10, 12, 0, tzinfo=UTC), "UTC")


async def test_quiet_hours_without_a_zone_use_the_members_own_then_the_households(
    runtime: Runtime, household: dict[str, str]
) -> None:
    hand = Hand()
    # 12:00 UTC: 07:00 in New York (quiet 01:00-08:00 there), 12:00 in the household (UTC).
    clock = Clock(datetime(2026, 1, 10, 12, 0, tzinfo=UTC))
    service = _service(runtime, hand, clock)
    rec = Recorder()
    service.register(rec)
    ada, mum = household["ada"], household["mum"]
    await runtime.core.registry.update_user(ada, profile={"timezone": "America/New_York"})
    await runtime.core.registry.update_user(mum, profile={"timezone": "Mars/Base"})
    quiet = QuietHours(start="01:00", end="08:00")
    for who in (ada, mum):
        await service.save_prefs(who, NotificationPrefs(channels=["rec"], quiet=quiet))
        await service.notify(who, title=who)
    await hand.opened(2)  # one window per member
    await hand.close_windows()
    await service.settle()
    # Ada's own zone says quiet; mum's is no zone, so the household's: not quiet.
    assert [d.user_id for d in rec.deliveries] == [mum]
