"""Session expiry and the event hub (the services: test_services.py; the login throttle:
test_login_throttle.py)."""

from __future__ import annotations

from conftest import PASSWORD

from skald.config import AuthConfig
from skald.core.events import EventHub, Ping, SessionRevoked
from skald.core.runtime import Runtime
from skald.core.sessions import SessionManager, hash_token


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_sessions_expire_when_idle_and_at_their_absolute_limit(
    runtime: Runtime, household: dict[str, str]
) -> None:
    clock = Clock()
    cfg = AuthConfig(session_idle_hours=1, session_max_days=1)
    sessions = SessionManager(runtime.sessions.store, runtime.core.users, cfg, clock)
    tim = await runtime.core.users.get("tim")
    token = await sessions.create(tim)
    stored = await sessions.store.get(hash_token(token))
    assert stored is not None and token not in repr(stored)  # only the hash is kept
    # Active use keeps it alive past the idle limit...
    for _ in range(5):
        clock.now += 3000
        assert await sessions.resolve(token) is not None
    # ...but an hour of silence ends it.
    clock.now += 3601
    assert await sessions.resolve(token) is None
    assert await sessions.store.get(hash_token(token)) is None
    # And no amount of activity outlives the absolute limit.
    token = await sessions.create(tim)
    for _ in range(30):
        clock.now += 3000
        if await sessions.resolve(token) is None:
            break
    assert clock.now - 1_000_000.0 > 86400 - 3000 * 2
    assert await sessions.resolve(token) is None
    await sessions.create(tim)
    clock.now += 10 * 86400
    assert await sessions.purge_expired() == 1


async def test_a_session_row_left_for_a_deactivated_account_opens_nothing(
    runtime: Runtime, household: dict[str, str]
) -> None:
    # Deactivation deletes the rows; a row that survived anyway (a backup restored from
    # before, a build that had that bug) must still not sign anyone in: the last gate.
    tim = await runtime.core.users.get("tim")
    token = await runtime.sessions.create(tim)
    assert await runtime.sessions.resolve(token) is not None
    await runtime.core.registry.db.call(
        lambda c: c.execute("UPDATE users SET active=0 WHERE id=?", (tim.id,))
    )
    assert await runtime.sessions.resolve(token) is None


async def test_encrypted_session_needs_the_key_in_memory(
    runtime: Runtime, household: dict[str, str]
) -> None:
    handle = await runtime.core.users.unlock("ada", PASSWORD)
    token = await runtime.sessions.create(handle.user)
    assert await runtime.sessions.resolve(token) is not None
    await runtime.core.users.lock(handle.user.id)
    assert await runtime.sessions.resolve(token) is None


async def test_hub_fans_out_and_revokes() -> None:
    hub = EventHub()
    a1, a2, b = hub.connect("a", "h1"), hub.connect("a", "h2"), hub.connect("b", "h3")
    hub.publish("a", Ping(t=1))
    assert a1.queue.get_nowait() == Ping(t=1) and a2.queue.get_nowait() == Ping(t=1)
    assert b.queue.empty()
    hub.revoke_sessions({"h2"}, "signed_out")
    assert (
        a2.queue.get_nowait() == SessionRevoked(code="signed_out", reason="you signed out")
        and a2.queue.get_nowait() is None
    )
    assert hub.connections("a") == [a1]
    hub.revoke_user("a", "deactivated")
    assert a1.revoked == "deactivated" and hub.count == 1
    # A client that stops reading is dropped instead of growing memory without bound.
    for i in range(600):
        hub.publish("b", Ping(t=i))
    assert b.closed and b.revoked is None


async def test_a_start_makes_no_http_client_for_the_models_until_one_is_called(
    runtime: Runtime,
) -> None:
    # A client loads the CA certificates into an SSL context: time and memory at every
    # start, for a household that may make no model call for hours (issue 22).
    assert "http" not in runtime.llm.__dict__
    first = runtime.llm.http
    assert runtime.llm.http is first  # one pool for every provider, once made
    await runtime.llm.close()
    assert first.is_closed
