"""The plugins an administrator manages: on or off, their settings, who may use them.

Rule: one row per third-party plugin Skald has seen (installed from a wheel, an
installed package's entry point, or `[plugins] modules`), keyed by its id. A plugin
reaches a member by a grant row, written when the plugin is first seen (for every
member whose role has `auto_grant`) and when a member is created (a trigger on `users`);
holders of `plugin.manage` reach every plugin without a row (decided in code).

Trap: uninstalling keeps the row (its settings and grants: the plugin's data stays);
only a purge deletes it, and the grants go with it (ON DELETE CASCADE).
"""

from __future__ import annotations

import json
from typing import Any

import apsw
import msgspec

from skald.store.database import Database, fetch_all, fetch_one
from skald.store.json_values import JsonValues
from skald.store.migrations import Feature, Migration
from skald.store.registry import now_iso

_REGISTRY_V1 = """
CREATE TABLE plugins(
    id TEXT PRIMARY KEY,
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    settings TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(settings)),
    added_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE plugin_grants(
    plugin TEXT NOT NULL REFERENCES plugins(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY(plugin, user_id)
) WITHOUT ROWID;
-- A new member reaches every plugin when their role has auto_grant.
CREATE TRIGGER plugin_grants_new_user AFTER INSERT ON users
WHEN EXISTS (SELECT 1 FROM role_attributes
             WHERE role = new.role AND key = 'auto_grant' AND value = 'true')
BEGIN
    INSERT OR IGNORE INTO plugin_grants(plugin, user_id, created_at)
        SELECT id, new.id, strftime('%Y-%m-%dT%H:%M:%SZ','now') FROM plugins;
END;
-- Managing plugins is the administrators' (the role editor may hand it on, knowingly).
INSERT OR IGNORE INTO capabilities(name, description)
    VALUES ('plugin.manage', 'Install, switch and configure plugins');
INSERT OR IGNORE INTO role_capabilities(role, capability)
    SELECT name, 'plugin.manage' FROM roles WHERE name = 'admin';
"""

REGISTRY_FEATURE = Feature(
    "plugins",
    (Migration(1, "plugins, their settings and grants", _REGISTRY_V1),),
    after=("accounts",),
)


# A member's own settings of plugins: in their own (encrypted) database, so nobody else,
# administrators included, can read them.
_OWNER_V1 = """
CREATE TABLE plugin_member_settings(
    section TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value)),
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
"""
OWNER_FEATURE = Feature("plugins", (Migration(1, "each member's plugin settings", _OWNER_V1),))
_MEMBER_SETTINGS = JsonValues("plugin_member_settings", "section", stamp=now_iso)


async def member_settings(db: Database, section: str) -> dict[str, Any] | None:
    """The member's saved values of a plugin's member settings section (their database)."""
    found = await _MEMBER_SETTINGS.get(db, section)
    return None if found is None else dict(found)


async def save_member_settings(db: Database, section: str, values: dict[str, Any]) -> None:
    await _MEMBER_SETTINGS.put(db, section, values)


class PluginRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    enabled: bool
    settings: dict[str, Any]
    added_at: str


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """What the per-turn filters need: which plugins are off, who holds which."""

    off: frozenset[str]
    grants: dict[str, frozenset[str]]  # plugin id -> user ids
    settings: dict[str, dict[str, Any]]  # plugin id -> {section: values}


def _row(r: tuple[Any, ...]) -> PluginRow:
    return PluginRow(id=r[0], enabled=bool(r[1]), settings=json.loads(r[2]), added_at=r[3])


def snapshot_in(c: apsw.Connection) -> Snapshot:
    """The switches, grants and settings, read on the caller's connection (a turn reads
    them in the same trip as the member's role)."""
    rows = [_row(r) for r in fetch_all(c, "SELECT id, enabled, settings, added_at FROM plugins")]
    grants: dict[str, set[str]] = {r.id: set() for r in rows}
    for plugin, user_id in fetch_all(c, "SELECT plugin, user_id FROM plugin_grants"):
        grants.setdefault(plugin, set()).add(user_id)
    return Snapshot(
        off=frozenset(r.id for r in rows if not r.enabled),
        grants={k: frozenset(v) for k, v in grants.items()},
        settings={r.id: r.settings for r in rows},
    )


class PluginStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def ensure(self, ids: list[str]) -> list[str]:
        """A row for each plugin seen; a new one reaches the auto_grant roles now.
        Answers the ids that were new."""

        def q(c: apsw.Connection) -> list[str]:
            added = []
            for pid in ids:
                if fetch_one(c, "SELECT 1 FROM plugins WHERE id=?", (pid,)) is not None:
                    continue
                c.execute("INSERT INTO plugins(id, added_at) VALUES (?, ?)", (pid, now_iso()))
                c.execute(
                    "INSERT OR IGNORE INTO plugin_grants(plugin, user_id, created_at) "
                    "SELECT ?, u.id, ? FROM users u JOIN role_attributes a ON a.role = u.role "
                    "WHERE a.key = 'auto_grant' AND a.value = 'true'",
                    (pid, now_iso()),
                )
                added.append(pid)
            return added

        return await self.db.transaction(q)

    async def get(self, pid: str) -> PluginRow | None:
        row = await self.db.fetch_one(
            "SELECT id, enabled, settings, added_at FROM plugins WHERE id=?", (pid,)
        )
        return None if row is None else _row(row)

    async def enabled(self, pid: str) -> bool:
        row = await self.get(pid)
        return row is not None and row.enabled

    async def snapshot(self) -> Snapshot:
        return await self.db.call(snapshot_in)

    async def set_enabled(self, pid: str, enabled: bool) -> None:
        await self.db.execute("UPDATE plugins SET enabled=? WHERE id=?", (int(enabled), pid))

    async def set_settings(self, pid: str, settings: dict[str, Any]) -> None:
        text = json.dumps(settings)
        await self.db.execute("UPDATE plugins SET settings=? WHERE id=?", (text, pid))

    async def grant(self, pid: str, user_id: str, granted: bool) -> None:
        def q(c: apsw.Connection) -> None:
            if granted:
                c.execute(
                    "INSERT OR IGNORE INTO plugin_grants(plugin, user_id, created_at) "
                    "VALUES (?, ?, ?)",
                    (pid, user_id, now_iso()),
                )
            else:
                c.execute("DELETE FROM plugin_grants WHERE plugin=? AND user_id=?", (pid, user_id))

        await self.db.call(q)

    async def purge(self, pid: str) -> None:
        await self.db.execute("DELETE FROM plugins WHERE id=?", (pid,))

    async def user_exists(self, user_id: str) -> bool:
        row = await self.db.fetch_one("SELECT 1 FROM users WHERE id=?", (user_id,))
        return row is not None

    async def access(self, pid: str) -> list[tuple[str, str, str, str, bool, set[str]]]:
        """Every member: (id, username, display name, role, granted, role's capabilities)."""

        def q(c: apsw.Connection) -> list[tuple[str, str, str, str, bool, set[str]]]:
            caps: dict[str, set[str]] = {}
            for role, cap in fetch_all(c, "SELECT role, capability FROM role_capabilities"):
                caps.setdefault(role, set()).add(cap)
            rows = fetch_all(
                c,
                "SELECT u.id, u.username, u.display_name, u.role, g.user_id IS NOT NULL "
                "FROM users u LEFT JOIN plugin_grants g ON g.user_id = u.id AND g.plugin = ? "
                "ORDER BY u.username",
                (pid,),
            )
            return [(r[0], r[1], r[2], r[3], bool(r[4]), caps.get(r[3], set())) for r in rows]

        return await self.db.call(q)

    async def granted(self, pid: str, user_id: str) -> bool:
        row = await self.db.fetch_one(
            "SELECT 1 FROM plugin_grants WHERE plugin=? AND user_id=?", (pid, user_id)
        )
        return row is not None
