"""Migration models 7 and usage 1: request cost and origin columns, the hourly aggregate
backfilled from the request rows already there, then kept up by its trigger."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apsw

from skald.features.usage.store import SCHEMA
from skald.store.migrations import SchemaPlan, ledger, migrate_features
from skald.store.migrations.registry import MODELS, REGISTRY

INSERT = (
    "INSERT INTO llm_requests(at, user_id, model_id, status, input_tokens, output_tokens) "
    "VALUES (?,?,?,?,?,?)"
)


def _before(conn: apsw.Connection) -> None:
    """A registry as the last release left it: models at 6, no usage feature."""
    old = dataclasses.replace(MODELS, migrations=MODELS.migrations[:6])
    features = tuple(old if f.name == "models" else f for f in REGISTRY.features)
    migrate_features(conn, SchemaPlan("registry", REGISTRY.history, features))


def test_usage_migration_backfills_the_aggregate_and_its_trigger_keeps_it_up(
    tmp_path: Path,
) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    _before(conn)
    assert ledger(conn)["models"] == 6 and "usage" not in ledger(conn)
    hour = 490_000
    rows = [
        (hour * 3600 + 10, "u1", "m1", "finished", 10, 2),
        (hour * 3600 + 20, "u1", "m1", "failed", 5, 0),
        (hour * 3600 + 3700, "u1", "m1", "finished", 1, 1),
        (hour * 3600 + 30, "u2", "m2", "finished", 7, 7),
    ]
    conn.executemany(INSERT, rows)
    plan = REGISTRY.with_features([SCHEMA])
    applied = migrate_features(conn, plan)
    assert ("models", 7) in applied and ("usage", 1) in applied
    sql = (
        "SELECT user_id, hour, model_id, turns, requests, failures, input_tokens, "
        "output_tokens, cost_usd FROM usage_hourly ORDER BY 1, 2"
    )
    assert conn.execute(sql).fetchall() == [
        ("u1", hour, "m1", 0, 2, 1, 15, 2, 0.0),
        ("u1", hour + 1, "m1", 0, 1, 0, 1, 1, 0.0),
        ("u2", hour, "m2", 0, 1, 0, 7, 7, 0.0),
    ]
    # New rows carry cost and origin, and the trigger adds them at once.
    conn.execute(
        "INSERT INTO llm_requests(at, user_id, model_id, status, input_tokens, "
        "output_tokens, cost_usd, origin) VALUES (?,?,?,?,?,?,?,?)",
        (hour * 3600 + 50, "u2", "m2", "finished", 3, 1, 0.25, "conv1"),
    )
    assert conn.execute(sql).fetchall()[-1] == ("u2", hour, "m2", 0, 2, 0, 10, 8, 0.25)
    assert migrate_features(conn, plan) == []
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
