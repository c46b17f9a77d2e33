"""Connector storage: the catalogue, grants and activations in the registry; each member's
connector secrets in that member's OWN owner database.

Rule: a connector reaches a member by a grant row. Rows are written when a connector is
installed (for every member whose role has `auto_grant`) and when a member is created
(a trigger on `users`, so the CLI and the web API write it alike); an administrator adds
or removes rows one member at a time. Administrators (`admin.connectors`) hold every
connector implicitly: that is decided in code (`ConnectorStore.granted`), not by rows.

Rule: a secret (API key, OAuth token) lives only in the owner database of the member it
belongs to, so it is encrypted with their key and unreadable while they are locked. The
registry keeps no credential; `last_stderr` is shown to administrators only and is
scrubbed of known secret values before it is stored.

Trap: the trigger reads `role_attributes.auto_grant` as JSON text (`true`); a role
without the row is `auto_grant: false` (the struct's default), which the trigger matches
by simply finding nothing.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import apsw
import msgspec

from skald.errors import InvalidInputError, NotFoundError
from skald.features.connectors.events import EVENTS_MIGRATION
from skald.store.columns import Col, Columns, first_column
from skald.store.database import Database, fetch_one
from skald.store.migrations import Feature, Migration
from skald.store.registry import now_iso

Transport = Literal["stdio", "http"]
AuthType = Literal["none", "api_key", "oauth2", "qr"]
Scope = Literal["household", "personal"]
Status = Literal["installing", "installed", "failed"]

_REGISTRY_V1 = """
CREATE TABLE connectors(
    name TEXT PRIMARY KEY CHECK (name GLOB '[a-z0-9]*' AND name NOT GLOB '*[^a-z0-9-]*'
                                AND length(name) <= 40),
    display_name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    icon TEXT NOT NULL DEFAULT '',
    feed_version INTEGER NOT NULL,
    transport TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
    manifest TEXT NOT NULL CHECK (json_valid(manifest)),
    auth TEXT NOT NULL CHECK (auth IN ('none', 'api_key', 'oauth2', 'qr')),
    scope TEXT NOT NULL CHECK (scope IN ('household', 'personal')),
    status TEXT NOT NULL CHECK (status IN ('installing', 'installed', 'failed')),
    install_dir TEXT,
    last_error TEXT,
    last_stderr TEXT,
    installed_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE connector_grants(
    connector TEXT NOT NULL REFERENCES connectors(name) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY(connector, user_id)
) WITHOUT ROWID;
CREATE TABLE connector_activations(
    connector TEXT NOT NULL REFERENCES connectors(name) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY(connector, user_id)
) WITHOUT ROWID;
-- A new member reaches every installed connector when their role has auto_grant.
CREATE TRIGGER connector_grants_new_user AFTER INSERT ON users
WHEN EXISTS (SELECT 1 FROM role_attributes
             WHERE role = new.role AND key = 'auto_grant' AND value = 'true')
BEGIN
    INSERT OR IGNORE INTO connector_grants(connector, user_id, created_at)
        SELECT name, new.id, strftime('%Y-%m-%dT%H:%M:%SZ','now') FROM connectors;
END;
"""

_OWNER_V1 = """
CREATE TABLE connector_secrets(
    connector TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY(connector, name)
) WITHOUT ROWID;
"""

# The household's own feed (issue 23 item 6): items an administrator added by hand.
# `files` maps a file name to its text (package.json and its lock, requirements.txt).
_REGISTRY_V2 = """
CREATE TABLE connector_own_items(
    name TEXT PRIMARY KEY CHECK (name GLOB '[a-z0-9]*' AND name NOT GLOB '*[^a-z0-9-]*'
                                AND length(name) <= 40),
    version INTEGER NOT NULL CHECK (version >= 1),
    manifest TEXT NOT NULL CHECK (json_valid(manifest)),
    files TEXT NOT NULL CHECK (json_valid(files)),
    added_by TEXT,
    added_at TEXT NOT NULL
) WITHOUT ROWID;
"""

# Issue 29 item 5: a connector that is installed but not granted to everyone
# (`grant_by_default = 0`: neither the install nor a new member's trigger grants it), and
# the administrators' sign-in providers (OAuth clients: the secret sealed with the
# server key, purpose `providers.PURPOSE`; never in a feed, never answered).
_REGISTRY_V3 = """
ALTER TABLE connectors ADD COLUMN grant_by_default INTEGER NOT NULL DEFAULT 1
    CHECK (grant_by_default IN (0, 1));
DROP TRIGGER connector_grants_new_user;
CREATE TRIGGER connector_grants_new_user AFTER INSERT ON users
WHEN EXISTS (SELECT 1 FROM role_attributes
             WHERE role = new.role AND key = 'auto_grant' AND value = 'true')
BEGIN
    INSERT OR IGNORE INTO connector_grants(connector, user_id, created_at)
        SELECT name, new.id, strftime('%Y-%m-%dT%H:%M:%SZ','now') FROM connectors
        WHERE grant_by_default = 1;
END;
CREATE TABLE oauth_providers(
    slug TEXT PRIMARY KEY CHECK (slug GLOB '[a-z0-9]*' AND slug NOT GLOB '*[^a-z0-9-]*'
                                 AND length(slug) <= 40),
    display_name TEXT NOT NULL,
    authorize_url TEXT NOT NULL,
    token_url TEXT NOT NULL,
    client_id TEXT NOT NULL,
    client_secret_sealed TEXT,
    extra_params TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(extra_params)),
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
"""

REGISTRY_FEATURE = Feature(
    "connectors",
    (
        Migration(1, "connector catalogue, grants and activations", _REGISTRY_V1),
        Migration(2, "the household's own connector feed", _REGISTRY_V2),
        Migration(3, "sign-in providers; connectors not granted by default", _REGISTRY_V3),
    ),
    after=("accounts",),
)
OWNER_FEATURE = Feature(
    "connectors",
    (
        Migration(1, "each member's connector secrets", _OWNER_V1),
        EVENTS_MIGRATION,  # connector events and triage's notifications (events.py)
    ),
)


class Connector(msgspec.Struct, frozen=True, kw_only=True):
    """An installed connector (a catalogue row). `manifest` is its connector.json."""

    name: str
    display_name: str
    description: str
    icon: str
    feed_version: int
    transport: Transport
    manifest: dict[str, Any]
    auth: AuthType
    scope: Scope
    status: Status
    install_dir: str | None
    last_error: str | None
    last_stderr: str | None
    installed_at: str
    updated_at: str


_COLUMNS = Columns(
    Connector,
    "name",
    "display_name",
    "description",
    "icon",
    "feed_version",
    "transport",
    Col("manifest", read=json.loads),
    "auth",
    "scope",
    "status",
    "install_dir",
    "last_error",
    "last_stderr",
    "installed_at",
    "updated_at",
)


class ConnectorStore:
    """Registry queries of the connectors feature."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def all(self) -> list[Connector]:
        return await _COLUMNS.many(self.db, "FROM connectors ORDER BY name")

    async def get(self, name: str) -> Connector | None:
        return await _COLUMNS.find(self.db, "FROM connectors WHERE name=?", (name,))

    async def require(self, name: str) -> Connector:
        found = await self.get(name)
        if found is None:
            raise NotFoundError(f"no connector named {name!r}")
        return found

    async def begin_install(self, connector: Connector) -> None:
        """Write (or overwrite) the row as `installing`; a row left so by a crash is
        simply installed again (the install is retryable)."""

        def q(c: apsw.Connection) -> None:
            existing = fetch_one(c, "SELECT status FROM connectors WHERE name=?", (connector.name,))
            if existing is None:
                c.execute(
                    f"INSERT INTO connectors({_COLUMNS.names}) VALUES ({','.join('?' * len(_COLUMNS))})",
                    _params(connector),
                )
                if connector.manifest.get("grant_by_default") is False:
                    # Installed, but not for everyone: each member needs a grant.
                    c.execute(
                        "UPDATE connectors SET grant_by_default=0 WHERE name=?", (connector.name,)
                    )
                    return
                # The roles with auto_grant reach it now (admins hold it implicitly).
                c.execute(
                    "INSERT OR IGNORE INTO connector_grants(connector, user_id, created_at) "
                    "SELECT ?, u.id, ? FROM users u JOIN role_attributes a ON a.role = u.role "
                    "WHERE a.key = 'auto_grant' AND a.value = 'true'",
                    (connector.name, now_iso()),
                )
            else:
                # An update keeps the running version's files until the new ones are in;
                # only the status says an install is under way.
                c.execute(
                    "UPDATE connectors SET status='installing', updated_at=? WHERE name=?",
                    (now_iso(), connector.name),
                )

        await self.db.transaction(q)

    async def finish_install(self, connector: Connector) -> None:
        """The files are in place: the row takes the new version, manifest and folder."""

        def q(c: apsw.Connection) -> None:
            c.execute(
                "UPDATE connectors SET display_name=?, description=?, icon=?, feed_version=?, "
                "transport=?, manifest=?, auth=?, scope=?, status='installed', install_dir=?, "
                "last_error=NULL, last_stderr=NULL, updated_at=? WHERE name=?",
                (
                    connector.display_name,
                    connector.description,
                    connector.icon,
                    connector.feed_version,
                    connector.transport,
                    json.dumps(connector.manifest),
                    connector.auth,
                    connector.scope,
                    connector.install_dir,
                    now_iso(),
                    connector.name,
                ),
            )

        await self.db.transaction(q)

    async def set_status(
        self,
        name: str,
        status: Status,
        *,
        error: str | None = None,
        stderr: str | None = None,
    ) -> None:
        await self.db.call(
            lambda c: c.execute(
                "UPDATE connectors SET status=?, last_error=?, last_stderr=?, updated_at=? "
                "WHERE name=?",
                (status, error, stderr, now_iso(), name),
            )
        )

    async def note_failure(self, name: str, error: str | None, stderr: str | None) -> None:
        """The last error of a running instance (status unchanged: install state)."""
        await self.db.execute(
            "UPDATE connectors SET last_error=?, last_stderr=?, updated_at=? WHERE name=?",
            (error, stderr, now_iso(), name),
        )

    async def remove(self, name: str) -> None:
        await self.db.execute("DELETE FROM connectors WHERE name=?", (name,))

    # -- grants and activations --------------------------------------------------------

    async def not_by_default(self) -> set[str]:
        """The connectors whose grant is not given by default (`grant_by_default = 0`)."""
        sql = "SELECT name FROM connectors WHERE grant_by_default = 0"
        return set(await first_column(self.db, sql))

    async def set_grant_by_default(self, name: str, value: bool) -> None:
        """Whether future members with auto_grant get it; grants given so far stay."""

        def q(c: apsw.Connection) -> None:
            if fetch_one(c, "SELECT 1 FROM connectors WHERE name=?", (name,)) is None:
                raise NotFoundError(f"no connector named {name!r}")
            c.execute(
                "UPDATE connectors SET grant_by_default=?, updated_at=? WHERE name=?",
                (int(value), now_iso(), name),
            )

        await self.db.transaction(q)

    async def grants(self, user_id: str) -> set[str]:
        return await self._connectors_of("connector_grants", user_id)

    async def grantees(self, name: str) -> list[str]:
        return await self._members_of("connector_grants", name)

    async def grant(self, name: str, user_id: str) -> None:
        def q(c: apsw.Connection) -> None:
            if fetch_one(c, "SELECT 1 FROM users WHERE id=?", (user_id,)) is None:
                raise NotFoundError("no such user")
            _link(c, "connector_grants", name, user_id)

        await self.db.transaction(q)

    async def revoke(self, name: str, user_id: str) -> None:
        """Remove the grant and the member's activation with it (one transaction)."""

        def q(c: apsw.Connection) -> None:
            _unlink(c, "connector_grants", name, user_id)
            _unlink(c, "connector_activations", name, user_id)

        await self.db.transaction(q)

    async def activations(self, user_id: str) -> set[str]:
        return await self._connectors_of("connector_activations", user_id)

    async def active_users(self, name: str) -> list[str]:
        return await self._members_of("connector_activations", name)

    async def set_active(self, name: str, user_id: str, active: bool) -> None:
        def q(c: apsw.Connection) -> None:
            if active:
                _link(c, "connector_activations", name, user_id)
            else:
                _unlink(c, "connector_activations", name, user_id)

        await self.db.transaction(q)

    async def _connectors_of(self, table: _Links, user_id: str) -> set[str]:
        sql = f"SELECT connector FROM {table} WHERE user_id=?"
        return set(await first_column(self.db, sql, (user_id,)))

    async def _members_of(self, table: _Links, name: str) -> list[str]:
        sql = f"SELECT user_id FROM {table} WHERE connector=? ORDER BY user_id"
        return await first_column(self.db, sql, (name,))


# The two tables that tie a member to a connector (both keyed connector, user_id).
_Links = Literal["connector_grants", "connector_activations"]


def _link(c: apsw.Connection, table: _Links, name: str, user_id: str) -> None:
    """Tie the member to an existing connector; tying twice changes nothing."""
    if fetch_one(c, "SELECT 1 FROM connectors WHERE name=?", (name,)) is None:
        raise NotFoundError(f"no connector named {name!r}")
    c.execute(
        f"INSERT OR IGNORE INTO {table}(connector, user_id, created_at) VALUES (?,?,?)",
        (name, user_id, now_iso()),
    )


def _unlink(c: apsw.Connection, table: _Links, name: str, user_id: str) -> None:
    c.execute(f"DELETE FROM {table} WHERE connector=? AND user_id=?", (name, user_id))


def _params(c: Connector) -> tuple[Any, ...]:
    return (
        c.name,
        c.display_name,
        c.description,
        c.icon,
        c.feed_version,
        c.transport,
        json.dumps(c.manifest),
        c.auth,
        c.scope,
        c.status,
        c.install_dir,
        c.last_error,
        c.last_stderr,
        c.installed_at,
        c.updated_at,
    )


class SecretInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What an API answer may say about a secret: its name, never its value."""

    connector: str
    name: str
    updated_at: str


class SecretStore:
    """One member's connector secrets, in their own owner database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def put(self, connector: str, name: str, value: str) -> None:
        if not value:
            raise InvalidInputError("a secret cannot be empty")
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO connector_secrets(connector, name, value, updated_at) "
                "VALUES (?,?,?,?) ON CONFLICT(connector, name) "
                "DO UPDATE SET value=excluded.value, updated_at=excluded.updated_at",
                (connector, name, value, now_iso()),
            )
        )

    async def values(self, connector: str) -> dict[str, str]:
        rows = await self.db.fetch_all(
            "SELECT name, value FROM connector_secrets WHERE connector=?", (connector,)
        )
        return {r[0]: r[1] for r in rows}

    async def infos(self) -> list[SecretInfo]:
        rows = await self.db.fetch_all(
            "SELECT connector, name, updated_at FROM connector_secrets ORDER BY 1, 2"
        )
        return [SecretInfo(connector=r[0], name=r[1], updated_at=r[2]) for r in rows]

    async def delete(self, connector: str, name: str | None = None) -> None:
        if name is None:
            await self.db.execute("DELETE FROM connector_secrets WHERE connector=?", (connector,))
        else:
            await self.db.execute(
                "DELETE FROM connector_secrets WHERE connector=? AND name=?", (connector, name)
            )
