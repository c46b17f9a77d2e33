"""The storage layer: one thread per database, awaited without blocking the loop."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import apsw
import msgspec
import pytest

from skald.errors import DatabaseClosedError
from skald.store.columns import Col, Columns
from skald.store.database import Database, WrongKeyError, open_encrypted, open_plain


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A plain database, x.db, closed after the test."""
    opened = await open_plain(tmp_path / "x.db", "x")
    yield opened
    await opened.aclose()


async def test_pragmas_and_private_file(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        db = await open_plain(tmp_path / "x.db", "x")
    finally:
        os.umask(old)
    try:
        mode = await db.call(lambda c: c.execute("PRAGMA journal_mode").fetchall()[0][0])
        sync = await db.call(lambda c: c.execute("PRAGMA synchronous").fetchall()[0][0])
        fks = await db.call(lambda c: c.execute("PRAGMA foreign_keys").fetchall()[0][0])
        assert (mode, sync, fks) == ("wal", 1, 1)
        await db.transaction(lambda c: c.execute("CREATE TABLE t(x)"))
        for name in ("x.db", "x.db-wal", "x.db-shm"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    finally:
        await db.aclose()


async def test_calls_run_on_one_dedicated_thread(db: Database) -> None:
    names = {await db.call(lambda _c: threading.current_thread().name) for _ in range(5)}
    assert len(names) == 1
    assert names.pop() != threading.current_thread().name


async def test_200_concurrent_calls(db: Database) -> None:
    await db.transaction(lambda c: c.execute("CREATE TABLE t(n INTEGER)"))

    async def insert(n: int) -> int:
        def q(c: apsw.Connection) -> int:
            c.execute("INSERT INTO t VALUES (?)", (n,))
            return int(c.execute("SELECT count(*) FROM t").fetchall()[0][0])

        return await db.transaction(q)

    counts = await asyncio.gather(*(insert(n) for n in range(200)))
    assert sorted(counts) == list(range(1, 201))
    total = await db.call(lambda c: c.execute("SELECT sum(n) FROM t").fetchall()[0][0])
    assert total == sum(range(200))


async def test_transaction_rolls_back_on_error(db: Database) -> None:
    await db.transaction(lambda c: c.execute("CREATE TABLE t(n)"))

    def boom(c: apsw.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError):
        await db.transaction(boom)
    assert await db.call(lambda c: c.execute("SELECT count(*) FROM t").fetchall()) == [(0,)]


async def test_closed_database_refuses_work(tmp_path: Path) -> None:
    db = await open_plain(tmp_path / "x.db", "x")
    await db.aclose()
    with pytest.raises(DatabaseClosedError):
        await db.call(lambda c: c.execute("SELECT 1").fetchall())


async def test_wrong_key_fails_cleanly(tmp_path: Path) -> None:
    key = os.urandom(32)
    db = await open_encrypted(tmp_path / "e.db", "e", key)
    await db.transaction(lambda c: c.execute("CREATE TABLE t(x)"))
    await db.aclose()
    with pytest.raises(WrongKeyError):
        await open_encrypted(tmp_path / "e.db", "e", os.urandom(32))
    with pytest.raises(WrongKeyError):
        await open_plain(tmp_path / "e.db", "e")
    # The right key still works afterwards: a failed attempt damaged nothing.
    db = await open_encrypted(tmp_path / "e.db", "e", key)
    assert await db.call(lambda c: c.execute("SELECT count(*) FROM t").fetchall()) == [(0,)]
    await db.aclose()


class _Pet(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    tags: list[str]
    indoor: bool


def test_a_row_shape_selects_and_reads_its_columns_in_one_order(tmp_path: Path) -> None:
    shape = Columns(
        _Pet, "name", Col("tags", read=json.loads), Col("indoor", sql="flat IS NOT NULL", read=bool)
    )
    conn = apsw.Connection(str(tmp_path / "pets.db"))
    conn.execute("CREATE TABLE pets(name TEXT, tags TEXT, flat TEXT, secret TEXT)")
    conn.execute("INSERT INTO pets VALUES ('Tom', '[\"cat\"]', 'top floor', 's3')")
    (row,) = conn.execute(f"SELECT {shape.names}, secret FROM pets").fetchall()
    assert shape.row(row) == _Pet(name="Tom", tags=["cat"], indoor=True)
    assert row[len(shape)] == "s3"  # what the query selects after the shape is the caller's
    with pytest.raises(ValueError):
        shape.row(row[:2])  # a short row is refused, never read into the wrong fields
