"""`insert_while_active` (skald/store/registry.py): a member's row (a session, an API
token) is stored only while the member exists and is active, in one statement."""

from __future__ import annotations

from conftest import PASSWORD

from skald.core.users import UserManager
from skald.store.registry import Registry, insert_while_active


async def _rows(registry: Registry) -> list[tuple[object, ...]]:
    return await registry.db.call(lambda c: c.execute("SELECT a, user_id FROM t").fetchall())


async def test_a_row_is_stored_for_an_active_member_only(
    registry: Registry, users: UserManager
) -> None:
    ada = (await users.create("ada", PASSWORD, "member")).user.id
    await registry.db.transaction(lambda c: c.execute("CREATE TABLE t(a TEXT, user_id TEXT)"))

    assert await insert_while_active(registry.db, "t", "a, user_id", ("one", ada), ada)
    assert await _rows(registry) == [("one", ada)]

    await registry.set_active(ada, False)
    assert not await insert_while_active(registry.db, "t", "a, user_id", ("two", ada), ada)
    assert not await insert_while_active(registry.db, "t", "a, user_id", ("three", "x"), "x")
    assert await _rows(registry) == [("one", ada)]
