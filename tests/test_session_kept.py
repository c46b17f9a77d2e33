"""A request's session lookup is kept between requests (issue 22, goal 6), and every
way of taking a session away still works on the very next request.

The kept answer is good while no row of the tables it came from was written in this
process and for at most `KEPT_S` seconds (another process's writes). These tests write
behind the store's back (raw SQL on the same connection, a foreign key's cascade, a
write that lands while the lookup is on its way) and through the web API (sign-out,
a role edit, a deactivation, a deletion, with requests running in parallel), and
expect the next lookup to see it.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable

import pytest
from conftest import PASSWORD, Client, MakeClient, signed_in

import skald.store.sessions as sessions_module
from skald.core.users import UserManager
from skald.store.database import Database
from skald.store.kept import KEPT_S
from skald.store.registry import Registry
from skald.store.sessions import READS, SessionRow, SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _trips(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The work sent to `db`'s thread from now on (by name)."""
    sent: list[str] = []
    submit = Database._submit

    def counted(self: Database, fn: Callable[..., object]) -> object:
        if self is db:
            sent.append(getattr(fn, "__qualname__", repr(fn)))
        return submit(self, fn)

    monkeypatch.setattr(Database, "_submit", counted)
    return sent


async def _session(store: SessionStore, user_id: str) -> str:
    token_hash = secrets.token_hex(32)
    now = time.time()
    row = SessionRow(
        token_hash=token_hash,
        user_id=user_id,
        created_at=now,
        last_seen_at=now,
        expires_at=now + 3600,
        user_agent="",
        client="",
    )
    assert await store.insert(row)
    return token_hash


@pytest.fixture
async def ada_id(users: UserManager) -> str:
    return (await users.create("ada", PASSWORD, "member")).user.id


async def test_a_second_lookup_of_a_session_makes_no_trip_to_the_database(
    registry: Registry, ada_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(registry.db)
    token_hash = await _session(store, ada_id)
    first = await store.get_with_member(token_hash)
    sent = _trips(registry.db, monkeypatch)
    assert await store.get_with_member(token_hash) == first
    assert sent == []


# A write to each table the lookup reads, in raw SQL on the store's own connection: no
# store method is told, the pre-update hook alone must notice.
WRITES = {
    "sessions": ("UPDATE sessions SET client='moved' WHERE user_id=?", "client"),
    "users": ("UPDATE users SET display_name='Changed' WHERE id=?", "display_name"),
    "roles": (
        "UPDATE roles SET display_name='Changed' WHERE name=(SELECT role FROM users WHERE id=?)",
        "role display_name",
    ),
    "role_capabilities": (
        "DELETE FROM role_capabilities WHERE capability='chat' "
        "AND role=(SELECT role FROM users WHERE id=?)",
        "capabilities",
    ),
    "role_attributes": (
        "UPDATE role_attributes SET value='\"simple\"' WHERE key='ui_mode' "
        "AND role=(SELECT role FROM users WHERE id=?)",
        "attributes",
    ),
}


def test_every_table_the_lookup_reads_is_watched_and_tried_below() -> None:
    assert set(WRITES) == READS


@pytest.mark.parametrize("table", sorted(WRITES))
async def test_a_kept_session_is_read_again_after_any_write_to_a_table_it_came_from(
    registry: Registry, ada_id: str, table: str
) -> None:
    store = SessionStore(registry.db)
    token_hash = await _session(store, ada_id)
    before = await store.get_with_member(token_hash)
    assert before is not None
    assert await store.get_with_member(token_hash) is before  # kept
    sql, _ = WRITES[table]
    await registry.db.call(lambda c: c.execute(sql, (ada_id,)))
    after = await store.get_with_member(token_hash)
    assert after is not None and after is not before
    assert after != before, f"the write to {table} is not in the answer"


async def test_a_session_deleted_by_its_members_cascade_is_gone_at_the_next_lookup(
    registry: Registry, ada_id: str
) -> None:
    store = SessionStore(registry.db)
    token_hash = await _session(store, ada_id)
    assert await store.get_with_member(token_hash) is not None
    # The sessions row goes by the foreign key's ON DELETE CASCADE, not by a statement.
    await registry.db.call(lambda c: c.execute("DELETE FROM users WHERE id=?", (ada_id,)))
    assert await store.get_with_member(token_hash) is None


async def test_a_deletion_that_lands_while_the_lookup_is_on_its_way_is_not_kept_away(
    registry: Registry, ada_id: str
) -> None:
    """The lookup's read runs first and answers with the session (as it would have
    without keeping); the deletion right behind it lands before the lookup's answer is
    back on the loop. The next request must not get the session."""
    store = SessionStore(registry.db)
    token_hash = await _session(store, ada_id)
    hold = threading.Event()
    held = asyncio.ensure_future(registry.db.call(lambda c: hold.wait(10)))
    lookup = asyncio.ensure_future(store.get_with_member(token_hash))
    await asyncio.sleep(0)  # the held work and the lookup's read are queued, in order
    delete = registry.db._submit(
        lambda c: c.execute("DELETE FROM sessions WHERE token_hash=?", (token_hash,))
    )
    hold.set()
    # Blocking the loop on purpose: the read and the deletion both run before the
    # lookup's coroutine sees its answer.
    delete.result(timeout=10)
    await held
    assert await lookup is not None
    assert await store.get_with_member(token_hash) is None


async def test_another_processs_write_is_seen_once_the_kept_answer_is_too_old(
    registry: Registry, ada_id: str
) -> None:
    """Another connection's writes (the CLI's, in its own process) are not counted: the
    age bound is what covers them."""
    clock = Clock()
    store = SessionStore(registry.db, clock=clock)
    token_hash = await _session(store, ada_id)
    assert await store.get_with_member(token_hash) is not None
    other = await Registry.open(registry.db.path)
    try:
        await other.db.call(
            lambda c: c.execute("DELETE FROM sessions WHERE token_hash=?", (token_hash,))
        )
    finally:
        await other.close()
    clock.now += KEPT_S - 0.1
    assert await store.get_with_member(token_hash) is not None  # the documented bound
    clock.now += 0.2
    assert await store.get_with_member(token_hash) is None


async def test_unknown_tokens_are_never_kept_and_the_kept_sessions_are_bounded(
    registry: Registry, ada_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_module, "KEPT_MAX", 3)
    store = SessionStore(registry.db)
    for _ in range(50):
        assert await store.get_with_member(secrets.token_hex(32)) is None
    assert store.kept.keys() == []
    hashes = [await _session(store, ada_id) for _ in range(5)]
    for token_hash in hashes:
        assert await store.get_with_member(token_hash) is not None
    assert store.kept.keys() == hashes[2:]  # the oldest went first


# -- through the web API -----------------------------------------------------------------


async def _same_cookie(make_client: MakeClient, of: Client) -> Client:
    """A second client holding `of`'s session cookie (a stolen copy): it keeps sending
    it after `of` signed out and its jar forgot it."""
    thief = await make_client()
    thief.http.cookies.set("skald_session", of.http.cookies["skald_session"])
    thief.csrf = of.csrf
    return thief


async def test_a_signed_out_session_is_refused_at_once_even_with_requests_in_flight(
    household: dict[str, str], make_client: MakeClient
) -> None:
    # Tim's data is not encrypted: signing out does not lock anything that would refuse
    # the copy by another way; only the session row stands between it and his account.
    tim = await signed_in(make_client, "tim")
    thief = await _same_cookie(make_client, tim)
    for _ in range(3):
        assert (await thief.call("GET", "/api/auth/me")).status_code == 200  # kept

    async def me() -> int:
        return (await thief.call("GET", "/api/auth/me")).status_code

    during = [asyncio.ensure_future(me()) for _ in range(20)]
    assert (await tim.call("POST", "/api/auth/logout")).status_code == 204
    after = await asyncio.gather(*(me() for _ in range(20)))
    assert set(await asyncio.gather(*during)) <= {200, 401}
    assert after == [401] * 20


async def test_a_capability_taken_from_a_role_is_gone_from_the_next_request(
    household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    body = {"name": "teen", "display_name": "Teen", "capabilities": ["chat", "inbox"]}
    assert (await admin.call("POST", "/api/roles", json=body)).status_code == 201
    user = {"username": "zoe", "password": PASSWORD, "role": "teen"}
    assert (await admin.call("POST", "/api/users", json=user)).status_code == 201
    zoe = await signed_in(make_client, "zoe")
    for _ in range(3):
        assert (await zoe.call("GET", "/api/conversations")).status_code == 200
    r = await admin.call("PATCH", "/api/roles/teen", json={"capabilities": ["inbox"]})
    assert r.status_code == 200, r.text
    assert (await zoe.call("GET", "/api/conversations")).status_code == 403


@pytest.mark.parametrize("how", ["deactivate", "delete"])
async def test_an_account_taken_away_by_the_admin_is_refused_at_the_next_request(
    household: dict[str, str], make_client: MakeClient, how: str
) -> None:
    admin = await signed_in(make_client, "mum")
    tim = await signed_in(make_client, "tim")
    for _ in range(3):
        assert (await tim.call("GET", "/api/auth/me")).status_code == 200
    if how == "deactivate":
        r = await admin.call("POST", f"/api/users/{household['tim']}/deactivate")
    else:
        r = await admin.call("DELETE", f"/api/users/{household['tim']}")
    assert r.status_code in (200, 204), r.text
    assert (await tim.call("GET", "/api/auth/me")).status_code == 401
