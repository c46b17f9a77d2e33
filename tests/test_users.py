"""Accounts and their keys: encryption at rest, password changes, recovery, revocation."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import sqlcipher3

from skald.core import keys
from skald.core.kdf_pool import KdfPool
from skald.core.users import UserManager
from skald.errors import (
    AccountInactiveError,
    AuthenticationError,
    ConflictError,
    DatabaseClosedError,
    InvalidInputError,
)
from skald.paths import DataLayout
from skald.store.database import WrongKeyError, open_encrypted
from skald.store.registry import Registry

PW = "correct horse battery"
SECRET_TEXT = "grandma's secret lasagne recipe"


def _files_of(db_path: Path) -> list[Path]:
    return [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]


async def _dek_of(registry: Registry, user_id: str, password: str) -> bytes:
    sec = await registry.secrets(user_id)
    wrapped = keys.WrappedKey.from_json(sec.wraps["password"])
    return keys.unwrap(wrapped, password, user_id, "password")


async def test_encrypted_owner_file_has_no_plaintext(
    users: UserManager, registry: Registry, layout: DataLayout
) -> None:
    created = await users.create("ada", PW, "member")
    assert created.user.encrypted and created.recovery_code
    handle = await users.unlock("ada", PW)
    await handle.store.note_put("people/grandma.md", SECRET_TEXT)
    await handle.store.kv_set("favourite_food", "lasagne")
    await users.lock(created.user.id)

    path = layout.user_db(created.user.id)
    blob = b"".join(p.read_bytes() for p in _files_of(path))
    assert not path.read_bytes().startswith(b"SQLite format 3")
    # Needles of 6+ bytes: shorter ones turn up by chance in random ciphertext.
    for needle in (
        b"SQLite format",
        b"memory_notes",
        b"favourite_food",
        b"lasagne",
        b"grandma",
        b"CREATE TABLE",
    ):
        assert needle not in blob, needle

    # A real SQLCipher 4 build opens it with the DEK and reads the rows.
    dek = await _dek_of(registry, created.user.id, PW)
    conn = sqlcipher3.connect(str(path))
    try:
        conn.execute(f"PRAGMA key=\"x'{dek.hex()}'\"")
        rows = conn.execute("SELECT path, content FROM memory_notes").fetchall()
    finally:
        conn.close()
    assert rows == [("people/grandma.md", SECRET_TEXT)]

    # A wrong DEK fails cleanly, in our stack and in SQLCipher's.
    with pytest.raises(WrongKeyError):
        await open_encrypted(path, "x", os.urandom(32))
    conn = sqlcipher3.connect(str(path))
    conn.execute(f"PRAGMA key=\"x'{os.urandom(32).hex()}'\"")
    with pytest.raises(sqlcipher3.DatabaseError):
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    conn.close()


async def test_wrong_password_and_unknown_user_fail_alike(users: UserManager) -> None:
    await users.create("ada", PW, "member")
    await users.create("tim", PW, "children")
    for name, pw in (("ada", "wrong password"), ("tim", "wrong password"), ("nobody", PW)):
        with pytest.raises(AuthenticationError, match="wrong username or password"):
            await users.unlock(name, pw)


async def test_an_unknown_name_waits_as_long_as_a_measured_check_without_deriving(
    registry: Registry, layout: DataLayout
) -> None:
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)

    users = UserManager(registry, layout, keys.TEST_KDF, kdf_pool=KdfPool(sleep=sleep))
    try:
        await users.create("ada", PW, "member")
        await users.create("tim", PW, "children")
        for name in ("ada", "tim", "ada"):  # encrypted and plain checks feed the sample
            with pytest.raises(AuthenticationError):
                await users.unlock(name, "wrong password")
        assert len(users.checks) == 3
        derived = users.kdf_pool.derivations
        for _ in range(4):
            with pytest.raises(AuthenticationError, match="wrong username or password"):
                await users.unlock("nobody", PW)
        assert users.kdf_pool.derivations == derived  # no Argon2 for a name that is not there
        assert len(asked) == 4 and set(asked) <= set(users.checks.values())
    finally:
        await users.lock_all()
        users.kdf_pool.close()


async def test_unencrypted_role_gets_a_plain_file_and_a_hash(
    users: UserManager, registry: Registry, layout: DataLayout
) -> None:
    created = await users.create("tim", PW, "children")
    assert not created.user.encrypted and created.recovery_code is None
    assert layout.user_db(created.user.id).read_bytes().startswith(b"SQLite format 3")
    sec = await registry.secrets(created.user.id)
    assert sec.password_hash and sec.password_hash.startswith("$argon2id$") and not sec.wraps
    handle = await users.unlock_unencrypted(created.user)
    await handle.store.kv_set("x", 1)
    assert await handle.store.kv_get("x") == 1


async def test_password_change_rewraps_without_touching_the_data(
    users: UserManager, layout: DataLayout
) -> None:
    created = await users.create("ada", PW, "member")
    handle = await users.unlock("ada", PW)
    await handle.store.note_put("a.md", SECRET_TEXT)
    await users.lock(created.user.id)
    path = layout.user_db(created.user.id)
    before = {p.name: p.read_bytes() for p in _files_of(path)}

    await users.change_password("ada", PW, "a brand new password")
    assert {p.name: p.read_bytes() for p in _files_of(path)} == before
    with pytest.raises(AuthenticationError):
        await users.unlock("ada", PW)
    handle = await users.unlock("ada", "a brand new password")
    assert await handle.store.note_get("a.md") == SECRET_TEXT


async def test_recovery_code_resets_a_forgotten_password(users: UserManager) -> None:
    created = await users.create("ada", PW, "member")
    handle = await users.unlock("ada", PW)
    await handle.store.note_put("a.md", SECRET_TEXT)
    await users.lock(created.user.id)
    code = created.recovery_code
    assert code is not None

    with pytest.raises(AuthenticationError):
        await users.recover("ada", "0" * 30, "whatever new pw")
    # Typed sloppily: lower case, spaces instead of dashes.
    fresh = await users.recover("ada", code.lower().replace("-", " "), "remembered at last")
    assert fresh != code
    handle = await users.unlock("ada", "remembered at last")
    assert await handle.store.note_get("a.md") == SECRET_TEXT
    # The used code is spent; the new one works.
    with pytest.raises(AuthenticationError):
        await users.recover("ada", code, "another password")
    await users.recover("ada", fresh, "another password")


async def test_deactivate_closes_every_handle(users: UserManager) -> None:
    created = await users.create("ada", PW, "member")
    first = await users.unlock("ada", PW)
    second = await users.unlock("ada", PW)
    db = first.db
    await first.store.kv_set("k", "v")
    await users.deactivate("ada")
    assert not users.is_unlocked(created.user.id)
    for handle in (first, second):
        with pytest.raises(DatabaseClosedError):
            await handle.store.kv_get("k")
    with pytest.raises(DatabaseClosedError):
        await db.call(lambda c: c.execute("SELECT 1").fetchall())
    with pytest.raises(AccountInactiveError):
        await users.unlock("ada", PW)
    await users.activate("ada")
    assert await (await users.unlock("ada", PW)).store.kv_get("k") == "v"


async def test_delete_removes_the_owner_file(users: UserManager, layout: DataLayout) -> None:
    created = await users.create("ada", PW, "member")
    handle = await users.unlock("ada", PW)
    layout.home(created.user.id).mkdir()
    await users.delete("ada")
    assert not _files_of(layout.user_db(created.user.id))
    assert not layout.home(created.user.id).exists()
    with pytest.raises(DatabaseClosedError):
        await handle.store.kv_get("k")
    with pytest.raises(AuthenticationError):
        await users.unlock("ada", PW)


async def test_bad_input_writes_nothing(users: UserManager, layout: DataLayout) -> None:
    await users.create("ada", PW, "member")
    files = set(layout.users_db_dir.iterdir())
    with pytest.raises(ConflictError):
        await users.create("ADA", PW, "member")
    with pytest.raises(InvalidInputError):
        await users.create("bob", "short", "member")
    with pytest.raises(InvalidInputError):
        await users.create("../etc", PW, "member")
    with pytest.raises(InvalidInputError):
        await users.create("bob", PW, "no-such-role")
    assert set(layout.users_db_dir.iterdir()) == files
    assert [u.username for u in await users.registry.list_users()] == ["ada"]


async def test_admin_reset_only_for_unencrypted_accounts(users: UserManager) -> None:
    await users.create("ada", PW, "member")
    await users.create("tim", PW, "children")
    with pytest.raises(InvalidInputError, match="encrypted"):
        await users.set_password("ada", "new password 1")
    await users.set_password("tim", "new password 1")
    await users.unlock("tim", "new password 1")


async def test_concurrent_unlocks_share_one_open_database(users: UserManager) -> None:
    await users.create("ada", PW, "member")
    handles = await asyncio.gather(*(users.unlock("ada", PW) for _ in range(5)))
    assert len({id(h.db) for h in handles}) == 1


@pytest.mark.slow
async def test_loop_stays_responsive_during_a_default_kdf_unlock(
    registry: Registry, layout: DataLayout
) -> None:
    manager = UserManager(registry, layout, keys.DEFAULT_KDF)
    await manager.create("ada", PW, "member")
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - start - 0.01)

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await manager.unlock("ada", PW)
    elapsed = time.perf_counter() - started
    done.set()
    await tick
    await manager.lock_all()
    # Argon2 with 256 MiB takes far longer than a tick; had it run on the loop, one tick
    # would have waited for all of it.
    assert elapsed > 0.2
    assert max(lags) < elapsed / 2, (max(lags), elapsed)
    assert len(lags) >= 5


async def test_a_missing_owner_file_is_an_error_not_a_fresh_start(
    users: UserManager, layout: DataLayout
) -> None:
    from skald.errors import StorageError

    created = await users.create("ada", PW, "member")
    layout.user_db(created.user.id).unlink()
    with pytest.raises(StorageError, match="missing"):
        await users.unlock("ada", PW)
    assert not layout.user_db(created.user.id).exists()


async def test_the_last_administrator_cannot_be_removed(users: UserManager) -> None:
    await users.create("mum", PW, "admin")
    with pytest.raises(ConflictError, match="last active administrator"):
        await users.deactivate("mum")
    with pytest.raises(ConflictError):
        await users.delete("mum")
    await users.create("dad", PW, "admin")
    await users.deactivate("mum")
    with pytest.raises(ConflictError):
        await users.delete("dad")


async def test_a_key_wrap_copied_onto_another_account_does_not_open(
    users: UserManager, registry: Registry
) -> None:
    ada = await users.create("ada", PW, "member")
    bob = await users.create("bob", PW, "member")  # the same password on purpose
    await users.unlock("bob", PW)
    await users.lock(bob.user.id)

    # Someone with write access to system.db puts Ada's password wrap on Bob's account:
    # Bob's password would then open Ada's data key if the wrap were not bound to Ada.
    await registry.db.call(
        lambda c: c.execute(
            "UPDATE key_wraps SET wrap=(SELECT wrap FROM key_wraps WHERE user_id=? "
            "AND kind='password') WHERE user_id=? AND kind='password'",
            (ada.user.id, bob.user.id),
        )
    )
    with pytest.raises(AuthenticationError):
        await users.unlock("bob", PW)
    ada_wraps = (await registry.secrets(ada.user.id)).wraps
    with pytest.raises(AuthenticationError):
        keys.unwrap(keys.WrappedKey.from_json(ada_wraps["password"]), PW, bob.user.id, "password")
    # Nor does a recovery wrap open as a password wrap of the same account.
    assert ada.recovery_code
    code = keys.normalise_recovery_code(ada.recovery_code)
    recovery = keys.WrappedKey.from_json(ada_wraps["recovery"])
    assert keys.unwrap(recovery, code, ada.user.id, "recovery")
    with pytest.raises(AuthenticationError):
        keys.unwrap(recovery, code, ada.user.id, "password")
    assert await users.unlock("ada", PW)


async def test_an_account_change_names_only_account_fields_never_other_sql(
    users: UserManager, registry: Registry
) -> None:
    created = await users.create("ada", PW, "member")
    # `update_user(**changes)` builds its SET list from the keys: anything but a field
    # of UserChanges is refused before any SQL, whatever a caller passes.
    with pytest.raises(TypeError, match="not a field of an account"):
        await registry.update_user(created.user.id, **{"role='admin', display_name": "x"})  # type: ignore[arg-type]
    after = await registry.get_user(created.user.id)
    assert after is not None and after.role == "member"
    await registry.update_user(created.user.id, display_name="Ada L.")
    after = await registry.get_user(created.user.id)
    assert after is not None and after.display_name == "Ada L."
