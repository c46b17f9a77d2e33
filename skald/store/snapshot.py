"""Consistent copies of live databases (for `skald backup`), with their encryption kept.

`snapshot(conn, dest, key)` copies an open database page by page with SQLite's online
backup API. Run it on the database's own thread (`await db.call(...)`): it holds a read
transaction on the source for the whole copy, so the copy is one consistent state
even while other processes write (WAL readers never block writers).

The trap: with SQLite3 Multiple Ciphers, the backup API reads *decrypted* pages from
the source and hands them to the destination connection, which encrypts them with
*its own* key. An unkeyed destination therefore receives the member's data in clear
text. The destination must be keyed with the same raw key (and cipher settings) as
the source before the copy starts; `snapshot` does that, then checks the first bytes
of the result so a mistake can never leave a clear-text copy behind.

Rule: inside the server a member's raw key never leaves the core: a backup gets a
`HeldCopy` (copies keyed with the key) and the restore drill `KeyChecks` (integrity
checks opened with it), from `Server.held_for_backup` and `Server.key_checks`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import apsw

from skald.errors import StorageError
from skald.store.database import _apply_key, _touch_private

if TYPE_CHECKING:
    from skald.store.database import Database

__all__ = [
    "SQLITE_MAGIC",
    "HeldCopy",
    "KeyChecks",
    "forget_sessions",
    "header_user_version",
    "integrity",
    "is_plain_sqlite",
    "quick_check",
    "read_instance_id",
    "snapshot",
    "write_instance_id",
]

SQLITE_MAGIC = b"SQLite format 3\x00"
_PAGES_PER_STEP = -1  # all at once: one read transaction, one consistent state


def is_plain_sqlite(path: Path) -> bool:
    """True if the file starts like an unencrypted SQLite database."""
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def header_user_version(path: Path) -> int | None:
    """`PRAGMA user_version` read from an unencrypted file's header (None otherwise)."""
    with path.open("rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return None
    return int.from_bytes(head[60:64], "big")


def snapshot(conn: apsw.Connection, dest: Path, key: bytes | None) -> int:
    """Copy the open database `conn` into a new file `dest` (0600); returns its
    `user_version`. `key` is the raw key `conn` was opened with (None: unencrypted)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        dest.with_name(dest.name + suffix).unlink(missing_ok=True)
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _touch_private(dest)
    target = apsw.Connection(str(dest))
    try:
        if key is not None:
            # Before anything reads or writes the destination: see the module docstring.
            _apply_key(target, key)
        with target.backup("main", conn, "main") as copy:
            while not copy.done:
                copy.step(_PAGES_PER_STEP)
        value = target.execute("PRAGMA user_version").fetchall()[0][0]
        version = value if isinstance(value, int) else 0
        check = target.execute("PRAGMA quick_check").fetchall()
        if [tuple(row) for row in check] != [("ok",)]:
            raise StorageError(f"the copy of {conn.filename} failed its check: {check[:3]}")
    except BaseException:
        target.close()
        with contextlib.suppress(OSError):
            dest.unlink()
        raise
    target.close()
    plain = is_plain_sqlite(dest)
    if plain == (key is not None):
        dest.unlink()
        state = "clear text" if plain else "encrypted"
        raise StorageError(f"the copy of {conn.filename} came out {state}; nothing was kept")
    return version


def integrity(path: Path, key: bytes | None) -> tuple[bool, str]:
    """Blocking: `PRAGMA integrity_check` of the database file at `path`, opened with
    `key` (None: unencrypted): (True, "integrity ok") or (False, why)."""
    conn = apsw.Connection(str(path))
    try:
        if key is not None:
            _apply_key(conn, key)
        ok, detail = pragma_check(conn, "integrity_check")
    except apsw.Error as exc:
        return False, f"does not open: {type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return (True, "integrity ok") if ok else (False, detail)


class HeldCopy:
    """A member's open database held still for a backup (`Server.held_for_backup`): it
    copies with their raw key, which stays inside."""

    def __init__(self, db: Database, key: bytes | None) -> None:
        self._db = db
        self._key = key

    @property
    def encrypted(self) -> bool:
        return self._key is not None

    async def snapshot(self, dest: Path) -> int:
        """`snapshot` on the database's own thread: the copy is encrypted exactly when
        the database is. Returns its `user_version`."""
        key = self._key
        return await self._db.call(lambda c: snapshot(c, dest, key))


class KeyChecks:
    """The members' keys the server held when it was made (`Server.key_checks`), kept
    inside: only `check` uses them (the restore drill's restored copies)."""

    def __init__(self, keys: dict[str, bytes | None]) -> None:
        self._keys = keys

    def check(self, user_id: str, path: Path) -> tuple[bool, str] | None:
        """Blocking: `integrity` of the copy at `path` opened with the member's key;
        None when no key of theirs was held (encrypted and locked then)."""
        key = self._keys.get(user_id)
        return None if key is None else integrity(path, key)


def pragma_check(
    conn: apsw.Connection, pragma: Literal["quick_check", "integrity_check"] = "quick_check"
) -> tuple[bool, str]:
    """`PRAGMA quick_check` (or `integrity_check`) on an open database: (True, "ok") or
    (False, its first complaints). The one reading of the answer: the doctor, the
    backups' drill and `skald inspect` use it."""
    if pragma not in ("quick_check", "integrity_check"):  # it is put into the SQL
        raise ValueError(f"not a check: {pragma!r}")
    rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
    if rows == ["ok"]:
        return True, "ok"
    more = f" (+{len(rows) - 5} more)" if len(rows) > 5 else ""
    return False, "; ".join(rows[:5]) + more


def quick_check(conn: apsw.Connection) -> tuple[bool, str]:
    return pragma_check(conn, "quick_check")


def forget_sessions(registry: Path) -> int:
    """Sign everyone out of a restored registry (an unopened file; blocking).

    Sessions revoked after the backup was made (a lost phone signed out) must not come
    back to life with it. Returns how many were removed."""
    conn = apsw.Connection(str(registry), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'"
        ).fetchall()
        if not has:
            return 0
        conn.execute("DELETE FROM sessions")
        return conn.changes()
    finally:
        conn.close()


def write_instance_id(registry: Path, instance_id: str) -> None:
    """Set the instance id of an unopened registry file (blocking)."""
    conn = apsw.Connection(str(registry), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.execute(
            "INSERT INTO config(key, value) VALUES ('instance_id', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (json.dumps(instance_id),),
        )
    finally:
        conn.close()


def read_instance_id(registry: Path) -> str | None:
    """The instance id recorded in an unopened registry file (blocking; None if none)."""
    try:
        conn = apsw.Connection(str(registry), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        rows = conn.execute("SELECT value FROM config WHERE key = 'instance_id'").fetchall()
    except apsw.Error:
        return None
    finally:
        conn.close()
    if not rows:
        return None
    try:
        value = json.loads(str(rows[0][0]))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
