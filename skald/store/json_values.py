"""A table of JSON values by key: the registry's `config`, an owner database's `kv`, a
member's `plugin_member_settings`.

Rule: one `JsonValues(table, key, stamp=...)` per table says its SQL once: `get` decodes
the stored value (None without a row), `put` writes it, replacing the row of that key
(one statement: it commits whole on its own). A table with an `updated_at` column gets `stamp` (the
clock that fills it, `now_iso`); `config` has none.

Trap: `table` and `key` go into the SQL text: they are the code's own names, never input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from skald.store.database import Database

__all__ = ["JsonValues"]


class JsonValues:
    def __init__(self, table: str, key: str = "key", *, stamp: Callable[[], str] | None) -> None:
        self.stamp = stamp
        self.select = f"SELECT value FROM {table} WHERE {key}=?"
        if stamp is None:
            self.upsert = (
                f"INSERT INTO {table}({key}, value) VALUES (?, ?) "
                f"ON CONFLICT({key}) DO UPDATE SET value=excluded.value"
            )
        else:
            self.upsert = (
                f"INSERT INTO {table}({key}, value, updated_at) VALUES (?, ?, ?) "
                f"ON CONFLICT({key}) DO UPDATE SET value=excluded.value, "
                "updated_at=excluded.updated_at"
            )

    async def get(self, db: Database, key: str) -> Any:
        """The value stored under `key`, decoded; None without a row."""
        row = await db.fetch_one(self.select, (key,))
        return None if row is None else json.loads(row[0])

    async def put(self, db: Database, key: str, value: Any) -> None:
        text = json.dumps(value)
        params = (key, text) if self.stamp is None else (key, text, self.stamp())
        await db.execute(self.upsert, params)
