"""The sign-in throttle, device cookies and the key-derivation pool, as units."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from skald.config import AuthConfig
from skald.core import kdf_pool
from skald.core.devices import MAX_AGE_S, MAX_ENTRIES, DeviceCookies
from skald.core.kdf_pool import Durations, KdfBusyError, KdfPool
from skald.core.throttle import LoginThrottle, ThrottledError
from skald.errors import AuthenticationError


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(free: int = 3, clock: Clock | None = None) -> LoginThrottle:
    cfg = AuthConfig(login_free_attempts=free, login_backoff_base_s=2, login_backoff_max_s=30)
    return LoginThrottle(cfg, clock or Clock())


def fail(throttle: LoginThrottle, username: str, client: str, device: str | None = None) -> None:
    throttle.failure(throttle.reserve(username, client, device))


def test_throttle_backs_off_per_account_and_per_address() -> None:
    clock = Clock()
    throttle = make(3, clock)
    for _ in range(3):
        fail(throttle, "ada", "10.0.0.5")
    with pytest.raises(ThrottledError) as first:
        throttle.reserve("ada", "10.0.0.9")  # another address, same account
    with pytest.raises(ThrottledError):
        throttle.reserve("bob", "10.0.0.5")  # same address, another account
    throttle.release(throttle.reserve("bob", "10.0.0.9"))
    assert first.value.retry_after == 2
    delays = []
    for _ in range(6):
        clock.now += 100
        fail(throttle, "ada", "10.0.0.5")
        with pytest.raises(ThrottledError) as exc:
            throttle.reserve("ada", "10.0.0.5")
        delays.append(exc.value.retry_after)
    assert delays == [4, 8, 16, 30, 30, 30]
    clock.now += 31
    throttle.success(throttle.reserve("ada", "10.0.0.7"))
    fail(throttle, "ada", "10.0.0.7")
    throttle.reserve("ada", "10.0.0.7")  # the account starts afresh after a success


def test_concurrent_attempts_are_reserved_before_the_password_work() -> None:
    throttle = make(5)
    # Twelve requests arrive before any password check has finished.
    outcomes = []
    for _ in range(12):
        try:
            outcomes.append(throttle.reserve("ada", "10.0.0.5"))
        except ThrottledError:
            outcomes.append(None)
    granted = [a for a in outcomes if a is not None]
    assert len(granted) == 5 and outcomes.count(None) == 7
    for attempt in granted:
        throttle.failure(attempt)
    with pytest.raises(ThrottledError):
        throttle.reserve("ada", "10.0.0.5")


def test_past_the_free_attempts_only_one_attempt_at_a_time() -> None:
    clock = Clock()
    throttle = make(2, clock)
    fail(throttle, "ada", "10.0.0.5")
    fail(throttle, "ada", "10.0.0.5")
    clock.now += 100  # the back-off is over
    checking = throttle.reserve("ada", "10.0.0.5")
    with pytest.raises(ThrottledError):
        throttle.reserve("ada", "10.0.0.6")  # the account's next attempt waits
    throttle.failure(checking)


def test_a_successful_sign_in_does_not_clear_the_address_record() -> None:
    throttle = make(3)
    fail(throttle, "ada", "10.0.0.5")
    fail(throttle, "bob", "10.0.0.5")
    throttle.success(throttle.reserve("ada", "10.0.0.5"))
    # The address guessed twice; one more failure on any account ends its free attempts.
    fail(throttle, "cy", "10.0.0.5")
    with pytest.raises(ThrottledError):
        throttle.reserve("di", "10.0.0.5")
    # The account that signed in was forgiven, from elsewhere.
    throttle.release(throttle.reserve("ada", "10.0.0.9"))


def test_usernames_in_another_case_share_one_account_counter() -> None:
    throttle = make(3)
    fail(throttle, "Ada", "10.0.0.1")
    fail(throttle, " ADA ", "10.0.0.2")
    fail(throttle, "ada", "10.0.0.3")
    for name in ("ada", "Ada", "aDa"):
        with pytest.raises(ThrottledError):
            throttle.reserve(name, "10.0.0.4")


def test_an_attempt_without_a_verdict_is_given_back() -> None:
    throttle = make(1)
    throttle.release(throttle.reserve("ada", "10.0.0.5"))
    throttle.release(throttle.reserve("ada", "10.0.0.5"))
    # Settling twice counts once.
    attempt = throttle.reserve("ada", "10.0.0.5")
    throttle.release(attempt)
    throttle.failure(attempt)
    throttle.release(throttle.reserve("ada", "10.0.0.5"))


def test_the_attempt_block_settles_by_its_outcome() -> None:
    throttle = make(2)
    # Anything but a wrong password gives the attempt back...
    for _ in range(3):
        with pytest.raises(ValueError), throttle.attempt("ada", "10.0.0.5"):
            raise ValueError("the server broke")
    # ...a wrong password counts...
    for _ in range(2):
        with pytest.raises(AuthenticationError), throttle.attempt("ada", "10.0.0.5"):
            raise AuthenticationError("wrong password")
    with pytest.raises(ThrottledError), throttle.attempt("ada", "10.0.0.9"):
        pass
    # ...and a block that ends normally is a success for the account.
    other = make(2)
    fail(other, "ada", "10.0.0.5")
    with other.attempt("ada", "10.0.0.5"):
        pass
    fail(other, "ada", "10.0.0.6")
    other.release(other.reserve("ada", "10.0.0.7"))


def test_a_known_device_keeps_its_own_budget() -> None:
    throttle = make(2)
    for _ in range(2):
        fail(throttle, "ada", "10.0.0.5")
    with pytest.raises(ThrottledError):
        throttle.reserve("ada", "10.0.0.5")
    # The household's own browser, behind the same address, is not locked out...
    throttle.success(throttle.reserve("ada", "10.0.0.5", device="laptop"))
    # ...and its own failures lock out only itself.
    for _ in range(2):
        fail(throttle, "ada", "10.0.0.5", device="laptop")
    with pytest.raises(ThrottledError):
        throttle.reserve("ada", "10.0.0.5", device="laptop")
    throttle.release(throttle.reserve("ada", "10.0.0.5", device="phone"))


def test_device_cookies_are_bound_to_their_account_and_expire() -> None:
    clock = Clock()
    devices = DeviceCookies(b"k" * 32, clock)
    cookie = devices.after_sign_in(None, "Ada")
    device = devices.find(cookie, "ada")
    assert device is not None and devices.find(cookie, " ADA") == device
    assert devices.find(cookie, "bob") is None
    # Another key (another installation) or an edited entry is no cookie at all.
    assert DeviceCookies(b"x" * 32, clock).find(cookie, "ada") is None
    name, issued, nonce, sig = cookie.rsplit(".", 3)
    assert devices.find(f"bob.{issued}.{nonce}.{sig}", "bob") is None
    assert devices.find(f"{name}.{issued}.{nonce}x.{sig}", "ada") is None
    assert devices.find("garbage~a.b~...~", "ada") is None
    # A shared browser keeps an entry per account, at most MAX_ENTRIES.
    both = devices.after_sign_in(cookie, "bob")
    assert devices.find(both, "ada") == device and devices.find(both, "bob") is not None
    many = both
    for i in range(MAX_ENTRIES + 2):
        many = devices.after_sign_in(many, f"user{i}")
    assert len(many.split("~")) == MAX_ENTRIES and devices.find(many, "ada") is None
    # A new sign-in gives the device a new id; entries expire.
    assert devices.find(devices.after_sign_in(cookie, "ada"), "ada") != device
    clock.now += MAX_AGE_S + 1
    assert devices.find(cookie, "ada") is None


async def test_the_kdf_pool_admits_a_bounded_number_and_refuses_the_rest_at_once() -> None:
    pool = KdfPool(workers=1, queue=1)
    release = threading.Event()
    threads: list[str] = []
    started: list[int] = []

    def work(n: int) -> int:
        threads.append(threading.current_thread().name)
        started.append(n)
        release.wait(10)
        return n

    try:
        running = asyncio.ensure_future(pool.run(work, 1))
        queued = asyncio.ensure_future(pool.run(work, 2))
        await asyncio.sleep(0)
        with pytest.raises(KdfBusyError) as busy:
            await pool.run(work, 3)
        assert busy.value.retry_after >= 1 and "busy" in str(busy.value)
        # A trusted caller (a known device, a signed-in member) has slots of its own.
        with kdf_pool.trusted():
            trusted = asyncio.ensure_future(pool.run(work, 4))
            await asyncio.sleep(0)
            with pytest.raises(KdfBusyError):
                await pool.run(work, 5)
        assert pool.admitted == 3
        release.set()
        assert await asyncio.gather(running, queued, trusted) == [1, 2, 4]
        assert started == [1, 4, 2]  # the trusted caller went ahead of the queue
        await asyncio.sleep(0.05)
        assert pool.admitted == 0
        # Never on the default executor, which serves files and databases.
        assert set(threads) and all(name.startswith("skald-kdf") for name in threads)
    finally:
        release.set()
        pool.close()


async def test_a_cancelled_waiting_derivation_gives_its_slot_back() -> None:
    pool = KdfPool(workers=1, queue=1)
    release = threading.Event()
    try:
        running = asyncio.ensure_future(pool.run(release.wait, 10))
        waiting = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.sleep(0.05)
        assert pool.admitted == 1
        release.set()
        await running
        await asyncio.sleep(0.05)
        assert pool.admitted == 0
    finally:
        release.set()
        pool.close()


class HeldSleep:
    """An imitation's wait, recorded and held until released (no wall-clock)."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.release = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.release.wait()


def _sampled(*seconds: float) -> Durations:
    sample = Durations()
    for s in seconds:
        sample.add(s)
    return sample


async def test_an_unknown_name_is_admitted_and_refused_exactly_like_a_real_check() -> None:
    """The 503 busy answer must not tell an unknown name from a known one."""
    sleep = HeldSleep()
    pool = KdfPool(workers=1, queue=1, sleep=sleep)
    release = threading.Event()
    sample = _sampled(0.3)
    try:
        real = asyncio.ensure_future(pool.run(release.wait, 10))
        fake = asyncio.ensure_future(pool.imitate(sample, lambda: None))
        await asyncio.sleep(0)
        assert pool.admitted == 2
        for attempt in (lambda: pool.run(release.wait, 10), lambda: pool.imitate(sample, print)):
            with pytest.raises(KdfBusyError):
                await attempt()
        with kdf_pool.trusted():  # the trusted reserve counts imitations the same way
            trusted_fake = asyncio.ensure_future(pool.imitate(sample, lambda: None))
            await asyncio.sleep(0)
            assert pool.admitted == 3
        # The imitations wait for a turn like derivations: none has started its wait yet.
        assert sleep.asked == []
        release.set()
        await real
        await asyncio.sleep(0.05)
        assert sleep.asked == [0.3]  # the trusted one took the turn first, as with run
        sleep.release.set()
        await asyncio.gather(fake, trusted_fake)
        assert pool.admitted == 0 and pool.running == 0
    finally:
        release.set()
        sleep.release.set()
        pool.close()


async def test_an_imitation_holds_its_turn_so_a_real_check_waits_behind_it() -> None:
    sleep = HeldSleep()
    pool = KdfPool(workers=1, queue=2, sleep=sleep)
    try:
        fake = asyncio.ensure_future(pool.imitate(_sampled(0.4), lambda: None))
        await asyncio.sleep(0)
        real = asyncio.ensure_future(pool.run(lambda: "checked"))
        await asyncio.sleep(0.05)
        assert not real.done() and pool.running == 1
        sleep.release.set()
        await fake
        assert await real == "checked"
    finally:
        sleep.release.set()
        pool.close()


async def test_an_imitation_waits_a_measured_duration_and_derives_nothing() -> None:
    sleep = HeldSleep()
    sleep.release.set()
    pool = KdfPool(workers=1, queue=1, sleep=sleep)
    sample = Durations()
    calibrations: list[int] = []
    try:
        # Nothing measured yet: the imitation does the real check once, and samples it.
        await pool.imitate(sample, lambda: calibrations.append(1))
        assert calibrations == [1] and len(sample) == 1 and pool.derivations == 1
        for _ in range(5):
            await pool.run(time.sleep, 0.01, sample=sample)
        assert len(sample) == 6 and pool.derivations == 6
        measured = set(sample.values())
        for _ in range(20):
            await pool.imitate(sample, lambda: calibrations.append(1))
        assert calibrations == [1] and pool.derivations == 6 and len(sample) == 6
        assert len(sleep.asked) == 20 and set(sleep.asked) <= measured
        assert len(set(sleep.asked)) > 1  # drawn from the sample, not one fixed figure
    finally:
        pool.close()


async def test_a_cancelled_imitation_keeps_its_slot_until_its_drawn_end_like_a_derivation() -> None:
    """A derivation whose caller left holds its slot until it ends; so does an imitation
    (else a client that disconnects would free slots only for unknown names)."""
    sleep = HeldSleep()  # never returns by itself: the caller leaves first
    pool = KdfPool(workers=1, queue=0, sleep=sleep)
    try:
        fake = asyncio.ensure_future(pool.imitate(_sampled(0.2), lambda: None))
        await asyncio.sleep(0)
        assert sleep.asked == [0.2]
        fake.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fake
        assert pool.admitted == 1
        with pytest.raises(KdfBusyError):
            await pool.imitate(_sampled(0.2), lambda: None)
        await asyncio.sleep(0.4)  # a timer due after the 0.2 s one: runs after it
        assert pool.admitted == 0 and pool.running == 0
    finally:
        pool.close()
