"""Numbered, forward-only schema migrations recorded in `PRAGMA user_version`.

Each schema (registry, owner) has its own list. A migration never changes after it has
shipped: fix mistakes with a new one. Every migration runs in its own transaction
together with the `user_version` bump, so a crash leaves the database at a whole
version, never between two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import apsw

from skald.errors import StorageError
from skald.store.database import run_in_transaction

Step = str | Callable[[apsw.Connection], None]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    step: Step


@dataclass(frozen=True)
class Schema:
    """A named, ordered list of migrations; versions are 1, 2, 3... without gaps."""

    name: str
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        expected = list(range(1, len(self.migrations) + 1))
        if [m.version for m in self.migrations] != expected:
            raise ValueError(f"{self.name} migrations must be numbered {expected}")

    @property
    def head(self) -> int:
        return len(self.migrations)


def user_version(conn: apsw.Connection) -> int:
    value = conn.execute("PRAGMA user_version").fetchall()[0][0]
    assert isinstance(value, int)
    return value


def _apply(conn: apsw.Connection, migration: Migration) -> None:
    if isinstance(migration.step, str):
        conn.execute(migration.step)
    else:
        migration.step(conn)
    conn.execute(f"PRAGMA user_version={int(migration.version)}")


def migrate(conn: apsw.Connection, schema: Schema, target: int | None = None) -> list[int]:
    """Bring the database up to `target` (default: head); return the versions applied."""
    goal = schema.head if target is None else target
    if not 0 <= goal <= schema.head:
        raise ValueError(f"{schema.name} has no version {goal}")
    found = user_version(conn)
    if found > schema.head:
        raise StorageError(
            f"{conn.filename} is at {schema.name} schema version {found}, newer than this "
            f"Skald understands ({schema.head}); run the newer Skald version"
        )
    applied: list[int] = []
    for migration in schema.migrations[found:goal]:
        # Re-read inside the transaction: another process may have migrated meanwhile.
        def step(c: apsw.Connection, m: Migration = migration) -> bool:
            if user_version(c) >= m.version:
                return False
            _apply(c, m)
            return True

        if run_in_transaction(conn, step):
            applied.append(migration.version)
    return applied
