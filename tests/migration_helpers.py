"""Build a database at any historic schema version, with data typical of that version."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import apsw

from skald.store.database import fetch_all
from skald.store.migrations import Schema, migrate

Seeder = Callable[[apsw.Connection], None]


def _registry_v2(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO users(id, username, display_name, role, encrypted, password_hash, "
        "created_at, updated_at) VALUES ('abc123', 'ada', 'Ada', 'member', 1, NULL, 't', 't')"
    )
    c.execute(
        "INSERT INTO key_wraps VALUES ('abc123', 'password', ?, 't')",
        (json.dumps({"kdf": "argon2id"}),),
    )


def _registry_v4(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO sessions(token_hash, user_id, created_at, last_seen_at, expires_at) "
        "VALUES ('00ff', 'abc123', 1.0, 2.0, 3.0)"
    )


def _registry_v5(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO shared_memory_notes(path, content, created_at, updated_at, updated_by) "
        "VALUES ('index.md', '- wifi.md — guest network password lives on the fridge', 't', 't', "
        "'abc123')"
    )
    c.execute(
        "INSERT INTO shared_memory_notes(path, content, created_at, updated_at, updated_by) "
        "VALUES ('wifi.md', 'the guest network is called sourdough', 't', 't', NULL)"
    )


def _registry_v6(c: apsw.Connection) -> None:
    c.execute("INSERT INTO llm_providers VALUES ('p1', 'Local', 'ollama', NULL, NULL, 't', 't')")
    c.execute(
        "INSERT INTO llm_models VALUES ('m1', 'p1', 'llama3', 'Llama', 'average', '[\"tools\"]', 10, 1, 't', 't')"
    )


def _registry_v7(c: apsw.Connection) -> None:
    c.execute("INSERT INTO security_groups VALUES ('kids', 'Kids', 'stricter')")
    c.execute(
        "INSERT INTO approval_rules(grp, tool_pattern, path_pattern, action, priority, "
        "description) VALUES ('kids', '*', NULL, 'require', 1, 'always ask')"
    )


def _owner_v1(c: apsw.Connection) -> None:
    c.execute("INSERT INTO kv VALUES ('theme', '\"dark\"', 't')")


def _owner_v2(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO memory_notes(path, content, created_at, updated_at) "
        "VALUES ('index.md', 'likes sourdough bread', 't', 't')"
    )


def _owner_v3(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO conversations(id, title, agent_id, created_at, updated_at) "
        "VALUES ('c1', 'Bread', 'assistant', 't', 't')"
    )
    c.execute(
        "INSERT INTO chat_messages(conversation_id, role, body, created_at) "
        "VALUES ('c1', 'user', '{\"role\":\"user\",\"content\":[]}', 't')"
    )


def _owner_v4(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO conversations(id, title, agent_id, created_at, updated_at, security_group) "
        "VALUES ('c2', 'Taxes', 'assistant', 't', 't', 'default')"
    )


def _owner_v5(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO inbox_items(id, conversation_id, kind, tool, arguments, reason, created_at) "
        "VALUES ('call_1', 'c1', 'approval', 'execute_cmd', '{\"command\":\"ls\"}', 'r', 't')"
    )
    c.execute("INSERT INTO conversation_bypass VALUES ('c2', 'execute_cmd', 't')")


def _owner_v6(c: apsw.Connection) -> None:
    c.execute(
        "INSERT INTO inbox_items(id, conversation_id, kind, tool, arguments, reason, created_at, "
        "parent_call) VALUES ('call_2', 'c1', 'approval', 'write_file', '{}', 'r', 't', 'call_0')"
    )


# schema name -> version -> what a database at that version would typically hold.
SEEDERS: dict[str, dict[int, Seeder]] = {
    "registry": {
        2: _registry_v2,
        4: _registry_v4,
        5: _registry_v5,
        6: _registry_v6,
        7: _registry_v7,
    },
    "owner": {1: _owner_v1, 2: _owner_v2, 3: _owner_v3, 4: _owner_v4, 5: _owner_v5, 6: _owner_v6},
}


def build_at(conn: apsw.Connection, schema: Schema, version: int) -> None:
    """Migrate an empty database step by step to `version`, seeding data on the way."""
    for v in range(1, version + 1):
        migrate(conn, schema, target=v)
        seeder = SEEDERS.get(schema.name, {}).get(v)
        if seeder is not None:
            seeder(conn)


def schema_of(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return sorted(
        fetch_all(conn, "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL")
    )


def contents_of(conn: apsw.Connection) -> dict[str, list[tuple[Any, ...]]]:
    tables = [
        r[0]
        for r in fetch_all(
            conn,
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_fts%' ORDER BY name",
        )
    ]
    return {t: sorted(fetch_all(conn, f'SELECT * FROM "{t}"'), key=repr) for t in tables}
