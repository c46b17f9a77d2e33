"""Build a database at any historic schema version, with data typical of that version."""

from __future__ import annotations

import json
from typing import Any

import apsw

from skald.store.database import fetch_all
from skald.store.migrations import Schema, SchemaPlan, migrate

# One seeding statement: SQL alone, or SQL with its bindings.
Statement = str | tuple[str, tuple[Any, ...]]

# schema name -> version -> what a database at that version would typically hold.
SEEDS: dict[str, dict[int, tuple[Statement, ...]]] = {
    "registry": {
        2: (
            "INSERT INTO users(id, username, display_name, role, encrypted, password_hash, "
            "created_at, updated_at) VALUES ('abc123', 'ada', 'Ada', 'member', 1, NULL, 't', 't')",
            (
                "INSERT INTO key_wraps VALUES ('abc123', 'password', ?, 't')",
                (json.dumps({"kdf": "argon2id"}),),
            ),
        ),
        4: (
            "INSERT INTO sessions(token_hash, user_id, created_at, last_seen_at, expires_at) "
            "VALUES ('00ff', 'abc123', 1.0, 2.0, 3.0)",
        ),
        5: (
            "INSERT INTO shared_memory_notes(path, content, created_at, updated_at, updated_by) "
            "VALUES ('index.md', '- wifi.md — guest network password lives on the fridge', "
            "'t', 't', 'abc123')",
            "INSERT INTO shared_memory_notes(path, content, created_at, updated_at, updated_by) "
            "VALUES ('wifi.md', 'the guest network is called sourdough', 't', 't', NULL)",
        ),
        6: (
            "INSERT INTO llm_providers VALUES ('p1', 'Local', 'ollama', NULL, NULL, 't', 't')",
            "INSERT INTO llm_models VALUES ('m1', 'p1', 'llama3', 'Llama', 'average', "
            "'[\"tools\"]', 10, 1, 't', 't')",
        ),
        7: (
            "INSERT INTO security_groups VALUES ('kids', 'Kids', 'stricter')",
            "INSERT INTO approval_rules(grp, tool_pattern, path_pattern, action, priority, "
            "description) VALUES ('kids', '*', NULL, 'require', 1, 'always ask')",
        ),
    },
    "owner": {
        1: ("INSERT INTO kv VALUES ('theme', '\"dark\"', 't')",),
        2: (
            "INSERT INTO memory_notes(path, content, created_at, updated_at) "
            "VALUES ('index.md', 'likes sourdough bread', 't', 't')",
        ),
        3: (
            "INSERT INTO conversations(id, title, agent_id, created_at, updated_at) "
            "VALUES ('c1', 'Bread', 'assistant', 't', 't')",
            "INSERT INTO chat_messages(conversation_id, role, body, created_at) "
            "VALUES ('c1', 'user', '{\"role\":\"user\",\"content\":[]}', 't')",
        ),
        4: (
            "INSERT INTO conversations(id, title, agent_id, created_at, updated_at, "
            "security_group) VALUES ('c2', 'Taxes', 'assistant', 't', 't', 'default')",
        ),
        5: (
            "INSERT INTO inbox_items(id, conversation_id, kind, tool, arguments, reason, "
            "created_at) VALUES ('call_1', 'c1', 'approval', 'execute_cmd', "
            "'{\"command\":\"ls\"}', 'r', 't')",
            "INSERT INTO conversation_bypass VALUES ('c2', 'execute_cmd', 't')",
        ),
    },
}


def build_at(conn: apsw.Connection, plan: SchemaPlan | Schema, version: int) -> None:
    """Build a database as the Skald of historic `user_version` `version` left it (the
    single chain, no ledger), step by step, seeding data on the way."""
    schema = plan.historic() if isinstance(plan, SchemaPlan) else plan
    for v in range(1, version + 1):
        migrate(conn, schema, target=v)
        for statement in SEEDS.get(schema.name, {}).get(v, ()):
            sql, bindings = (statement, ()) if isinstance(statement, str) else statement
            conn.execute(sql, bindings)


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
