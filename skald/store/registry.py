"""The registry database `database/system.db`: users, roles, instance config."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

import apsw
import msgspec

from skald.approvals.rules import DEFAULT_GROUP, SEED_RULES, Action, Rule, SeedRule
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.store.columns import Col, Columns
from skald.store.database import Database, change_one, fetch_all, fetch_one, open_plain
from skald.store.json_values import JsonValues
from skald.store.migrations import SchemaPlan, migrate_features
from skald.store.migrations.registry import REGISTRY
from skald.store.rows import Role, RoleAttributes, User, UserChanges, UserSecrets

_USER = Columns(
    User,
    "id",
    "username",
    "display_name",
    "role",
    Col("encrypted", read=bool),
    Col("active", read=bool),
    "locale",
    "created_at",
    "updated_at",
    Col("profile", read=json.loads),
)
# The instance's own settings (JSON by key); the table has no `updated_at`.
_CONFIG = JsonValues("config", stamp=None)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user_in(conn: apsw.Connection, user_id: str) -> User | None:
    """A user row, read on the caller's connection (inside a `db.call`)."""
    row = fetch_one(conn, f"SELECT {_USER.names} FROM users WHERE id=?", (user_id,))
    return None if row is None else _USER.row(row)


async def insert_while_active(
    db: Database,
    table: str,
    columns: str,
    values: tuple[object, ...],
    user_id: str,
    *,
    fewer_than: int | None = None,
) -> bool:
    """Insert one row of member `user_id` (a session, an API token) only while they exist
    and are active, in one statement: a deactivation that commits meanwhile leaves no row
    behind; with `fewer_than`, only while `table` holds fewer rows of theirs (parallel
    requests cannot all pass a count read before). Whether it was stored."""
    marks = ",".join("?" * len(values))
    limit = "" if fewer_than is None else f" AND (SELECT COUNT(*) FROM {table} WHERE user_id=?) < ?"
    bound = () if fewer_than is None else (user_id, fewer_than)

    def q(c: apsw.Connection) -> bool:
        c.execute(
            f"INSERT INTO {table}({columns}) SELECT {marks} "
            f"WHERE EXISTS (SELECT 1 FROM users WHERE id=? AND active=1){limit}",
            (*values, user_id, *bound),
        )
        return c.changes() == 1

    return await db.transaction(q)


def role_in(conn: apsw.Connection, name: str) -> Role | None:
    row = fetch_one(conn, "SELECT name, display_name, builtin FROM roles WHERE name=?", (name,))
    return None if row is None else _role(conn, row)


def _role(conn: apsw.Connection, row: tuple[Any, ...]) -> Role:
    name = row[0]
    caps = [
        r[0]
        for r in fetch_all(
            conn,
            "SELECT capability FROM role_capabilities WHERE role=? ORDER BY capability",
            (name,),
        )
    ]
    attrs = {
        k: json.loads(v)
        for k, v in fetch_all(conn, "SELECT key, value FROM role_attributes WHERE role=?", (name,))
    }
    return Role(
        name=name,
        display_name=row[1],
        builtin=bool(row[2]),
        capabilities=caps,
        attributes=msgspec.convert(attrs, RoleAttributes),
    )


class Registry:
    """Owner of the registry database; every query on it goes through here."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(
        cls, path: Path, busy_timeout_ms: int = 5000, plan: SchemaPlan = REGISTRY
    ) -> Registry:
        """Open and migrate; `plan` adds plugins' features to the built-in ones."""
        db = await open_plain(path, "registry", busy_timeout_ms)
        try:
            await db.call(lambda c: migrate_features(c, plan))
            await db.transaction(_ensure_instance_id)
            await db.transaction(seed_approvals)
        except BaseException:
            await db.aclose()
            raise
        return cls(db)

    async def close(self) -> None:
        await self.db.aclose()

    # -- config ------------------------------------------------------------------

    async def get_config(self, key: str) -> Any:
        return await _CONFIG.get(self.db, key)

    async def set_config(self, key: str, value: Any) -> None:
        await _CONFIG.put(self.db, key, value)

    async def instance_id(self) -> str:
        return str(await self.get_config("instance_id"))

    # -- security groups and approval rules ---------------------------------------

    async def security_groups(self) -> list[SecurityGroup]:
        rows = await self.db.fetch_all(
            "SELECT name, display_name, description FROM security_groups ORDER BY name"
        )
        return [SecurityGroup(name=r[0], display_name=r[1], description=r[2]) for r in rows]

    # -- approval rules ------------------------------------------------------------

    async def approval_rules(self, group: str | None = None) -> list[Rule]:
        """The rules (of one group, or all), in evaluation order."""

        def q(c: apsw.Connection) -> list[Rule]:
            sql = (
                "SELECT id, grp, tool_pattern, path_pattern, action, priority, description "
                "FROM approval_rules"
            )
            rows = (
                fetch_all(c, sql + " ORDER BY grp, priority, id")
                if group is None
                else fetch_all(c, sql + " WHERE grp=? ORDER BY priority, id", (group,))
            )
            return [Rule(*row) for row in rows]

        return await self.db.call(q)

    async def get_rule(self, rule_id: int) -> Rule | None:
        row = await self.db.fetch_one(
            "SELECT id, grp, tool_pattern, path_pattern, action, priority, description "
            "FROM approval_rules WHERE id=?",
            (rule_id,),
        )
        return None if row is None else Rule(*row)

    async def save_rule(self, rule: Rule, *, create: bool) -> Rule:
        """Insert (the id is assigned) or update a rule; NotFoundError for a missing group."""

        def q(c: apsw.Connection) -> int:
            if fetch_one(c, "SELECT 1 FROM security_groups WHERE name=?", (rule.group,)) is None:
                raise InvalidInputError(f"no security group named {rule.group!r}")
            values = _rule_columns(rule)
            if create:
                c.execute(
                    "INSERT INTO approval_rules(grp, tool_pattern, path_pattern, action, priority, "
                    "description) VALUES (?,?,?,?,?,?)",
                    values,
                )
                return int(c.last_insert_rowid())
            change_one(
                c,
                "UPDATE approval_rules SET grp=?, tool_pattern=?, path_pattern=?, action=?, "
                "priority=?, description=? WHERE id=?",
                (*values, rule.id),
                "no such rule",
            )
            return rule.id

        rule_id = await self.db.transaction(q)
        saved = await self.get_rule(rule_id)
        assert saved is not None
        return saved

    async def delete_rule(self, rule_id: int) -> None:
        sql = "DELETE FROM approval_rules WHERE id=?"
        await self.db.transaction(lambda c: change_one(c, sql, (rule_id,), "no such rule"))

    async def save_group(self, group: SecurityGroup, *, create: bool) -> None:
        def q(c: apsw.Connection) -> None:
            if create:
                if fetch_one(c, "SELECT 1 FROM security_groups WHERE name=?", (group.name,)):
                    raise ConflictError(f"a security group named {group.name!r} exists")
                c.execute(
                    "INSERT INTO security_groups VALUES (?,?,?)",
                    (group.name, group.display_name, group.description),
                )
                return
            change_one(
                c,
                "UPDATE security_groups SET display_name=?, description=? WHERE name=?",
                (group.display_name, group.description, group.name),
                f"no security group named {group.name!r}",
            )

        await self.db.transaction(q)

    async def delete_group(self, name: str) -> None:
        """Delete a group and its rules; refused while a role uses it as its default."""

        def q(c: apsw.Connection) -> None:
            users = fetch_all(
                c,
                "SELECT role FROM role_attributes WHERE key='default_security_group' "
                "AND json_extract(value, '$')=?",
                (name,),
            )
            if users:
                raise ConflictError(
                    f"the role {users[0][0]!r} uses {name!r} as its default security group"
                )
            sql = "DELETE FROM security_groups WHERE name=?"
            change_one(c, sql, (name,), f"no security group named {name!r}")

        await self.db.transaction(q)

    # -- roles -------------------------------------------------------------------

    async def get_role(self, name: str) -> Role | None:
        return await self.db.call(lambda c: role_in(c, name))

    async def list_roles(self) -> list[Role]:
        def q(c: apsw.Connection) -> list[Role]:
            rows = fetch_all(c, "SELECT name, display_name, builtin FROM roles ORDER BY name")
            return [_role(c, r) for r in rows]

        return await self.db.call(q)

    async def sync_capabilities(self, catalogue: list[tuple[str, str]]) -> int:
        """Add the capabilities the code declares (and refresh their descriptions).

        Never deletes: a row the code no longer declares grants nothing (`can` checks the
        declaration), and keeping it keeps the roles that hold it valid. Returns how many
        rows were added or changed.
        """

        def q(c: apsw.Connection) -> int:
            before = c.total_changes()
            c.executemany(
                "INSERT INTO capabilities(name, description) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET description=excluded.description "
                "WHERE description IS NOT excluded.description",
                catalogue,
            )
            return c.total_changes() - before

        return await self.db.transaction(q)

    async def list_capabilities(self) -> list[tuple[str, str]]:
        rows = await self.db.fetch_all("SELECT name, description FROM capabilities ORDER BY name")
        return [(str(r[0]), str(r[1])) for r in rows]

    async def save_role(self, role: Role, *, create: bool) -> None:
        """Insert or replace a role with its capabilities and attributes, atomically."""

        def q(c: apsw.Connection) -> None:
            exists = fetch_one(c, "SELECT 1 FROM roles WHERE name=?", (role.name,)) is not None
            if create and exists:
                raise ConflictError(f"a role named {role.name!r} already exists")
            if not create and not exists:
                raise NotFoundError(f"no role named {role.name!r}")
            known = {r[0] for r in fetch_all(c, "SELECT name FROM capabilities")}
            unknown = sorted(set(role.capabilities) - known)
            if unknown:
                raise InvalidInputError(f"unknown capabilities: {', '.join(unknown)}")
            if create:
                c.execute(
                    "INSERT INTO roles(name, display_name, builtin) VALUES (?, ?, 0)",
                    (role.name, role.display_name),
                )
            else:
                c.execute(
                    "UPDATE roles SET display_name=? WHERE name=?", (role.display_name, role.name)
                )
            c.execute("DELETE FROM role_capabilities WHERE role=?", (role.name,))
            c.executemany(
                "INSERT INTO role_capabilities VALUES (?, ?)",
                [(role.name, cap) for cap in sorted(set(role.capabilities))],
            )
            c.execute("DELETE FROM role_attributes WHERE role=?", (role.name,))
            attrs = msgspec.to_builtins(role.attributes)
            c.executemany(
                "INSERT INTO role_attributes VALUES (?, ?, ?)",
                [(role.name, k, json.dumps(v)) for k, v in attrs.items()],
            )

        await self.db.transaction(q)

    async def count_users_with_role(self, name: str) -> int:
        row = await self.db.fetch_one("SELECT count(*) FROM users WHERE role=?", (name,))
        return int(row[0]) if row else 0

    # -- users -------------------------------------------------------------------

    async def get_user(self, user_id: str) -> User | None:
        return await self.db.call(lambda c: user_in(c, user_id))

    async def user_with_role(self, user_id: str) -> tuple[User | None, Role | None]:
        """The user row and its role as they are now, in one trip to the database
        thread (every turn and every tool call's approval check reads both)."""

        def q(c: apsw.Connection) -> tuple[User | None, Role | None]:
            user = user_in(c, user_id)
            return user, None if user is None else role_in(c, user.role)

        return await self.db.call(q)

    async def find_user(self, username: str) -> User | None:
        return await _USER.find(self.db, "FROM users WHERE username=?", (username,))

    async def list_users(self) -> list[User]:
        rows = await self.db.fetch_all(f"SELECT {_USER.names} FROM users ORDER BY username")
        return [_USER.row(r) for r in rows]

    async def holder_exists(self, capability: str) -> bool:
        """True when an active account's role holds `capability` (by name: which one is
        the core's business, see `UserManager.admin_exists`)."""
        row = await self.db.fetch_one(
            "SELECT 1 FROM users u JOIN role_capabilities rc ON rc.role = u.role "
            "WHERE u.active = 1 AND rc.capability = ? LIMIT 1",
            (capability,),
        )
        return row is not None

    async def secrets(self, user_id: str) -> UserSecrets:
        def q(c: apsw.Connection) -> UserSecrets:
            row = fetch_one(c, "SELECT password_hash FROM users WHERE id=?", (user_id,))
            if row is None:
                raise NotFoundError("no such user")
            wraps = dict(
                fetch_all(c, "SELECT kind, wrap FROM key_wraps WHERE user_id=?", (user_id,))
            )
            return UserSecrets(password_hash=row[0], wraps=wraps)

        return await self.db.call(q)

    async def insert_user(
        self, user: User, password_hash: str | None, wraps: Mapping[str, str]
    ) -> None:
        def q(c: apsw.Connection) -> None:
            if fetch_one(c, "SELECT 1 FROM users WHERE username=?", (user.username,)):
                raise ConflictError(f"a user named {user.username!r} already exists")
            c.execute(
                f"INSERT INTO users({_USER.names}, password_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    user.id,
                    user.username,
                    user.display_name,
                    user.role,
                    int(user.encrypted),
                    int(user.active),
                    user.locale,
                    user.created_at,
                    user.updated_at,
                    json.dumps(user.profile),
                    password_hash,
                ),
            )
            _put_wraps(c, user.id, wraps)

        await self.db.transaction(q)

    async def set_wraps(self, user_id: str, wraps: Mapping[str, str]) -> None:
        await self.db.transaction(lambda c: _put_wraps(c, user_id, wraps))

    async def set_password_hash(self, user_id: str, password_hash: str) -> None:
        await self._update(user_id, "password_hash=?", (password_hash,))

    async def update_user(self, user_id: str, **changes: Unpack[UserChanges]) -> None:
        """Change the given non-secret fields; the others stay as they are.

        Trap: the keys name SQL columns, and `Unpack` is not checked at run time: a key
        that is not a `UserChanges` field is refused here, never written into the SQL."""
        unknown = changes.keys() - UserChanges.__annotations__.keys()
        if unknown:
            raise TypeError(f"update_user: not a field of an account: {sorted(unknown)}")
        fields = {
            k: json.dumps(v) if k == "profile" else v for k, v in changes.items() if v is not None
        }
        if fields:
            assignment = ", ".join(f"{k}=?" for k in fields)
            await self._update(user_id, assignment, tuple(fields.values()))

    async def set_active(self, user_id: str, active: bool) -> None:
        """Deactivating deletes the member's sessions in the same transaction, whoever
        calls it (the web API, the CLI in another process): a later reactivation must
        not bring an old cookie back to life."""

        def q(c: apsw.Connection) -> None:
            change_one(
                c,
                "UPDATE users SET active=?, updated_at=? WHERE id=?",
                (int(active), now_iso(), user_id),
                "no such user",
            )
            if not active:
                c.execute("DELETE FROM sessions WHERE user_id=?", (user_id,))

        await self.db.transaction(q)

    async def _update(self, user_id: str, assignment: str, params: tuple[Any, ...]) -> None:
        sql = f"UPDATE users SET {assignment}, updated_at=? WHERE id=?"
        values = (*params, now_iso(), user_id)
        await self.db.transaction(lambda c: change_one(c, sql, values, "no such user"))

    async def delete_user(self, user_id: str) -> None:
        sql = "DELETE FROM users WHERE id=?"
        await self.db.transaction(lambda c: change_one(c, sql, (user_id,), "no such user"))


def _put_wraps(c: apsw.Connection, user_id: str, wraps: Mapping[str, str]) -> None:
    c.executemany(
        "INSERT INTO key_wraps(user_id, kind, wrap, created_at) VALUES (?,?,?,?) "
        "ON CONFLICT(user_id, kind) DO UPDATE SET wrap=excluded.wrap, created_at=excluded.created_at",
        [(user_id, kind, wrap, now_iso()) for kind, wrap in wraps.items()],
    )


def new_instance_id() -> str:
    return secrets.token_hex(4)


def _ensure_instance_id(c: apsw.Connection) -> None:
    # Names this installation's containers and labels; never changes once set (a
    # restore into another directory gives the copy its own: skald/features/backups/restore.py).
    c.execute(
        "INSERT INTO config(key, value) VALUES ('instance_id', ?) ON CONFLICT(key) DO NOTHING",
        (json.dumps(new_instance_id()),),
    )


class SecurityGroup(msgspec.Struct, frozen=True, kw_only=True):
    """A named set of approval rules a conversation runs under."""

    name: str
    display_name: str
    description: str


def _rule_columns(
    rule: Rule | SeedRule,
) -> tuple[str, str, str | None, Action, int, str]:
    """An approval rule's columns, in the order both inserts and the update name them
    (grp, tool_pattern, path_pattern, action, priority, description)."""
    return (
        rule.group,
        rule.tool_pattern,
        rule.path_pattern,
        rule.action,
        rule.priority,
        rule.description,
    )


def seed_approvals(c: apsw.Connection) -> None:
    """Add the default group and rules whose seed key was never seeded (every boot).

    An admin's edit of a seeded rule is never overwritten, and a deleted one is never
    added again: only keys missing from `approval_seeded` are inserted.
    """
    seeded = {row[0] for row in fetch_all(c, "SELECT seed_key FROM approval_seeded")}
    group_key = f"group.{DEFAULT_GROUP}"
    if group_key not in seeded:
        c.execute(
            "INSERT INTO security_groups(name, display_name, description) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO NOTHING",
            (DEFAULT_GROUP, "Default", "The rules every conversation starts with"),
        )
        c.execute("INSERT INTO approval_seeded VALUES (?)", (group_key,))
    exists = fetch_one(c, "SELECT 1 FROM security_groups WHERE name=?", (DEFAULT_GROUP,))
    for rule in SEED_RULES:
        if rule.key in seeded:
            continue
        if exists is not None or rule.group != DEFAULT_GROUP:
            c.execute(
                "INSERT INTO approval_rules(grp, tool_pattern, path_pattern, action, priority, "
                "description, seed_key) SELECT ?, ?, ?, ?, ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM security_groups WHERE name=?)",
                (*_rule_columns(rule), rule.key, rule.group),
            )
        c.execute("INSERT INTO approval_seeded VALUES (?)", (rule.key,))
