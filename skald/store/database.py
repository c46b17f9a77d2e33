"""One APSW connection, served by one dedicated thread, awaited from asyncio.

APSW is synchronous. Running its calls on the event loop would stall every other
user, so each open database owns a single worker thread and async callers submit work
with `await db.call(fn)`. One thread per database also means the connection is never
used concurrently, which keeps SQLite's locking simple and transactions unambiguous.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import apsw

from skald.errors import DatabaseClosedError, NotFoundError, StorageError

T = TypeVar("T")

KEY_BYTES = 32
DEFAULT_BUSY_TIMEOUT_MS = 5000
# A WAL grows to the size of the largest transaction and, by default, keeps that size
# on disk for good (a 10 MiB tool argument left a 60 MB WAL behind). Past a checkpoint
# SQLite truncates it back to this (it counts in the member's storage quota).
WAL_SIZE_LIMIT = 4 * 1024 * 1024


class WrongKeyError(StorageError):
    """The key does not open this database (or the file is not a database)."""

    code = "wrong_key"


def _journal_wal(conn: apsw.Connection, busy_timeout_ms: int) -> object:
    # Switching a file to WAL escalates a read lock to an exclusive one; while another
    # process is doing the same (two openers of one fresh file), SQLite answers BUSY at
    # once instead of calling the busy handler (deadlock avoidance), so wait here.
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            return conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _configure(conn: apsw.Connection, busy_timeout_ms: int) -> None:
    conn.set_busy_timeout(busy_timeout_ms)
    mode = _journal_wal(conn, busy_timeout_ms)
    if str(mode).lower() != "wal":
        raise StorageError(f"could not switch {conn.filename} to WAL (got {mode})")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")


def _apply_key(conn: apsw.Connection, key: bytes) -> None:
    # SQLite3 Multiple Ciphers in SQLCipher-4 mode with a raw 256-bit key: the file is
    # byte-compatible with SQLCipher 4, so standard tools can open it given the key.
    if len(key) != KEY_BYTES:
        raise ValueError("database keys are 32 raw bytes")
    conn.execute("PRAGMA cipher='sqlcipher'")
    conn.execute("PRAGMA legacy=4")
    conn.execute(f"PRAGMA key=\"x'{key.hex()}'\"")


def _check_readable(conn: apsw.Connection) -> None:
    # A wrong key is only noticed when the first page is read.
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.NotADBError as exc:
        raise WrongKeyError(f"{conn.filename}: wrong key, or not a Skald database") from exc


def _touch_private(path: Path) -> None:
    # Create the file 0600 before SQLite does, so the umask never decides who may read it.
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
    path.chmod(0o600)


def _secure_sidecars(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            side.chmod(0o600)


class WriteCount:
    """How many rows of some tables this process has changed through one `Database`:
    every writer counts (any `call` or `transaction`, a foreign key's cascade, a
    `DELETE` with no `WHERE`), by SQLite's pre-update hook, so a cache that keeps what
    it read from those tables knows it may be stale without every writer having to say
    so. The count moves on the database thread while the write runs, so before the
    writer's `await` returns. Trap: another process's writes (the CLI's) are not seen;
    a cache must bound its age for those."""

    def __init__(self, tables: frozenset[str]) -> None:
        self.tables = tables
        self.value = 0


class Database:
    """An open SQLite database and the one thread allowed to touch it."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"db-{name}")
        self._conn: apsw.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._counts: list[WriteCount] = []
        self._hook_wanted = False

    # -- opening -------------------------------------------------------------------

    def _open_sync(self, key: bytes | None, busy_timeout_ms: int, create: bool) -> None:
        if not create and not self.path.exists():
            # Never paper over a lost file with an empty new one: the member would see
            # no data and their next writes would land in the wrong file.
            raise StorageError(f"{self.path} is missing; restore it from a backup")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _touch_private(self.path)
        conn = apsw.Connection(str(self.path))
        try:
            # Before the first read: another process opening or migrating the same file
            # holds a lock for a moment, and without a timeout that read fails at once.
            conn.set_busy_timeout(busy_timeout_ms)
            if key is not None:
                _apply_key(conn, key)
            _check_readable(conn)
            _configure(conn, busy_timeout_ms)
        except BaseException:
            conn.close()
            raise
        _secure_sidecars(self.path)
        self._conn = conn

    # -- running work --------------------------------------------------------------

    def _submit(self, fn: Callable[[apsw.Connection], T]) -> Future[T]:
        with self._lock:
            if self._closed:
                raise DatabaseClosedError(f"database {self.name} is closed")
            return self._executor.submit(self._run, fn)

    def _run(self, fn: Callable[[apsw.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise DatabaseClosedError(f"database {self.name} is closed")
        if self._hook_wanted:
            # Here, on the database thread and before any work submitted after
            # `count_writes` returned: no write can slip past the hook.
            conn.preupdate_hook(self._counted)
            self._hook_wanted = False
        return fn(conn)

    def count_writes(self, tables: frozenset[str]) -> WriteCount:
        """A `WriteCount` over `tables`, live from the next piece of work submitted."""
        count = WriteCount(tables)
        with self._lock:
            self._counts.append(count)
            self._hook_wanted = True
        return count

    def _counted(self, change: apsw.PreUpdate) -> None:
        for count in self._counts:
            if change.table_name in count.tables:
                count.value += 1

    async def call(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run `fn(connection)` on the database thread and return its result."""
        return await asyncio.wrap_future(self._submit(fn))

    def send(self, fn: Callable[[apsw.Connection], T]) -> asyncio.Future[T]:
        """`call`, queued on the database thread now (before any work submitted after it
        returns), for a caller that does not wait for it. Raises DatabaseClosedError at
        once on a closed database."""
        return asyncio.wrap_future(self._submit(fn))

    async def fetch_one(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        """`fetch_one` on the database thread: the first row, or None."""
        return await self.call(lambda conn: fetch_one(conn, sql, params))

    async def fetch_text(self, sql: str, params: Any = ()) -> str | None:
        """The first column of the first row as text (`str`), or None without a row."""
        row = await self.fetch_one(sql, params)
        return None if row is None else str(row[0])

    async def fetch_all(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """`fetch_all` on the database thread: every row."""
        return await self.call(lambda conn: fetch_all(conn, sql, params))

    async def fetch_ints(self, sql: str, params: Any = ()) -> tuple[int, ...]:
        """The one row of an aggregate (counts, sums) as integers."""
        row = await self.fetch_one(sql, params)
        assert row is not None  # an aggregate always answers one row
        return tuple(int(value) for value in row)

    async def execute(self, sql: str, params: Any = ()) -> None:
        """One statement on the database thread, committing on its own (no transaction
        is opened); its cursor stays on that thread."""

        def run(conn: apsw.Connection) -> None:
            conn.execute(sql, params)

        await self.call(run)

    async def transaction(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run `fn` inside one write transaction: all of it commits, or none of it."""
        return await self.call(lambda conn: run_in_transaction(conn, fn))

    def call_sync(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Blocking variant for code that already runs off the event loop."""
        return self._submit(fn).result()

    def transaction_sync(self, fn: Callable[[apsw.Connection], T]) -> T:
        return self.call_sync(lambda conn: run_in_transaction(conn, fn))

    # -- closing -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close now. Queued work finishes first; anything submitted later fails.

        Synchronous on purpose: revoking access must be complete before the caller
        answers anyone.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            fut = self._executor.submit(self._close_conn)
        fut.result()
        self._executor.shutdown(wait=True)

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def run_in_transaction(conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
    """BEGIN IMMEDIATE so a writer takes the lock up front instead of failing at commit.

    Nested use becomes a savepoint, so helpers can be composed.
    """
    if conn.in_transaction:
        with conn:
            return fn(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


async def _open(
    path: Path, name: str, key: bytes | None, busy_timeout_ms: int, create: bool
) -> Database:
    db = Database(path, name)
    try:
        await asyncio.wrap_future(db._executor.submit(db._open_sync, key, busy_timeout_ms, create))
    except BaseException:
        await db.aclose()
        raise
    return db


async def open_plain(
    path: Path, name: str, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, *, create: bool = True
) -> Database:
    """Open an unencrypted database file (creating it unless `create` is False)."""
    return await _open(path, name, None, busy_timeout_ms, create)


async def open_encrypted(
    path: Path,
    name: str,
    key: bytes,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    *,
    create: bool = True,
) -> Database:
    """Open a SQLCipher-4 database with a raw 256-bit key (creating it unless told not to)."""
    return await _open(path, name, bytes(key), busy_timeout_ms, create)


def fetch_all(conn: apsw.Connection, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(sql, params)]


def fetch_one(conn: apsw.Connection, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
    for row in conn.execute(sql, params):
        return tuple(row)
    return None


def change_one(conn: apsw.Connection, sql: str, params: Any, missing: str) -> None:
    """Run an UPDATE/DELETE of one row by its key; NotFoundError(missing) if none matched."""
    if not changed(conn, sql, params):
        raise NotFoundError(missing)


def changed(conn: apsw.Connection, sql: str, params: Any = ()) -> bool:
    """Run an UPDATE/DELETE; whether it changed any row."""
    conn.execute(sql, params)
    return conn.changes() > 0
