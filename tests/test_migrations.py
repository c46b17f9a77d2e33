"""Every historic schema version migrates to head; migrating twice changes nothing;
features (built-in or a plugin's) keep their own numbering in the ledger."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from migration_helpers import build_at, contents_of, schema_of

from skald.errors import StorageError
from skald.store.database import Database, open_encrypted, open_plain
from skald.store.migrations import (
    Feature,
    Migration,
    Schema,
    SchemaPlan,
    ledger,
    migrate_features,
    user_version,
)
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY

KEY = os.urandom(32)
CASES = [(p, v) for p in (REGISTRY, OWNER) for v in range(len(p.history) + 1)]


async def _open(plan: SchemaPlan, path: Path) -> Database:
    # Owner databases are encrypted in production, so migrate them encrypted here too.
    if plan is OWNER:
        return await open_encrypted(path, "t", KEY)
    return await open_plain(path, "t")


async def _fresh_head(plan: SchemaPlan, path: Path) -> tuple[list[object], dict[str, int]]:
    db = await _open(plan, path)
    try:
        return await db.call(lambda c: (migrate_features(c, plan), schema_of(c), ledger(c))[1:])
    finally:
        await db.aclose()


@pytest.mark.parametrize(("plan", "version"), CASES, ids=[f"{p.name}-v{v}" for p, v in CASES])
async def test_every_historic_version_migrates_to_head(
    tmp_path: Path, plan: SchemaPlan, version: int
) -> None:
    expected_schema, expected_ledger = await _fresh_head(plan, tmp_path / "fresh.db")
    db = await _open(plan, tmp_path / "old.db")
    try:
        await db.call(lambda c: build_at(c, plan, version))
        assert await db.call(user_version) == version
        before = await db.call(contents_of)
        applied = await db.call(lambda c: migrate_features(c, plan))
        # Exactly the history entries the old database had not run yet, then every
        # feature migration newer than the history (never anything twice).
        in_history: dict[str, int] = {}
        for feature, v in plan.history:
            in_history[feature.name] = max(in_history.get(feature.name, 0), v)
        newer = [
            (f.name, v)
            for f in plan.features
            for v in range(in_history.get(f.name, 0) + 1, f.head + 1)
        ]
        assert sorted(applied) == sorted([(f.name, v) for f, v in plan.history[version:]] + newer)
        assert await db.call(user_version) == plan.head
        assert await db.call(schema_of) == expected_schema
        assert await db.call(ledger) == expected_ledger
        after = await db.call(contents_of)
        for table, rows in before.items():
            if table in after and rows:
                # Rows survive; new columns may be appended with their defaults, and a
                # migration may seed new rows (the built-in roles' turn budgets).
                width = len(rows[0])
                kept = [r[:width] for r in after[table]]
                assert [r for r in kept if r in rows] == rows, table
        integrity = await db.call(lambda c: c.execute("PRAGMA integrity_check").fetchall())
        assert integrity == [("ok",)]

        # Twice is a no-op: nothing applied, schema, version and data unchanged.
        assert await db.call(lambda c: migrate_features(c, plan)) == []
        assert await db.call(schema_of) == expected_schema
        assert await db.call(contents_of) == after
    finally:
        await db.aclose()


def test_the_ledger_records_each_built_in_feature_at_its_head(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    migrate_features(conn, REGISTRY)
    assert ledger(conn) == {"accounts": 5, "memory": 1, "models": 7, "approvals": 1}


def test_old_request_records_get_the_outcome_names_and_count_as_reported(
    tmp_path: Path,
) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    build_at(conn, REGISTRY, 6)  # models at 1: status was ok | error
    conn.execute(
        "INSERT INTO llm_requests(at, user_id, model_id, status) "
        "VALUES (1, 'u', 'm', 'ok'), (2, 'u', 'm', 'error')"
    )
    migrate_features(conn, REGISTRY)
    rows = conn.execute("SELECT status, estimated FROM llm_requests ORDER BY at").fetchall()
    assert rows == [("finished", 0), ("failed", 0)]
    conn.close()


def test_models_from_before_kinds_are_chat_models_and_kinds_are_checked(
    tmp_path: Path,
) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    build_at(conn, REGISTRY, 6)  # models at 1: no kinds
    conn.execute(
        "INSERT INTO llm_providers(id, name, kind, created_at, updated_at) "
        "VALUES ('p', 'P', 'openai', 'x', 'x');"
        "INSERT INTO llm_models(id, provider_id, model, name, strength, created_at, updated_at) "
        "VALUES ('m', 'p', 'gpt', 'GPT', 'average', 'x', 'x')"
    )
    migrate_features(conn, REGISTRY)
    assert conn.execute("SELECT kind FROM llm_models WHERE id = 'm'").fetchall() == [("chat",)]
    with pytest.raises(apsw.ConstraintError):
        conn.execute("UPDATE llm_models SET kind = 'video'")
    conn.close()


async def test_fts_index_follows_notes_migrated_from_v1(tmp_path: Path) -> None:
    db = await _open(OWNER, tmp_path / "o.db")
    try:
        await db.call(lambda c: build_at(c, OWNER, len(OWNER.history)))
        await db.call(lambda c: migrate_features(c, OWNER))
        hits = await db.call(
            lambda c: c.execute(
                "SELECT path FROM memory_notes_fts WHERE memory_notes_fts MATCH 'sourdough'"
            ).fetchall()
        )
        assert hits == [("index.md",)]
    finally:
        await db.aclose()


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    db = await open_plain(tmp_path / "r.db", "t")
    try:
        await db.call(lambda c: c.execute(f"PRAGMA user_version={REGISTRY.head + 1}"))
        with pytest.raises(StorageError, match="newer than this Skald"):
            await db.call(lambda c: migrate_features(c, REGISTRY))
    finally:
        await db.aclose()


def test_a_database_from_before_features_is_refused_by_no_old_skald(tmp_path: Path) -> None:
    # An older Skald counts user_version 1..7; the ledger's version is past it.
    conn = apsw.Connection(str(tmp_path / "r.db"))
    migrate_features(conn, REGISTRY)
    assert user_version(conn) == REGISTRY.head > len(REGISTRY.history)
    conn.close()


PLUGIN = Feature(
    "sample",
    (
        Migration(1, "widgets", "CREATE TABLE sample_widgets(id INTEGER PRIMARY KEY, name TEXT)"),
        Migration(2, "widget colour", "ALTER TABLE sample_widgets ADD COLUMN colour TEXT"),
    ),
    after=("accounts",),
)


def test_a_plugin_feature_keeps_its_own_numbering_and_runs_once(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    build_at(conn, REGISTRY, 5)  # an old database, before the plugin existed
    plan = REGISTRY.with_features([PLUGIN])
    applied = migrate_features(conn, plan)
    assert ("sample", 1) in applied and ("sample", 2) in applied
    assert ledger(conn)["sample"] == 2
    conn.execute("INSERT INTO sample_widgets(name, colour) VALUES ('w', 'red')")
    assert migrate_features(conn, plan) == []
    assert conn.execute("SELECT name, colour FROM sample_widgets").fetchall() == [("w", "red")]
    conn.close()


def test_a_feature_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    migrate_features(conn, REGISTRY.with_features([PLUGIN]))
    older = Feature("sample", PLUGIN.migrations[:1], after=("accounts",))
    with pytest.raises(StorageError, match="feature 'sample' is at version 2"):
        migrate_features(conn, REGISTRY.with_features([older]))
    conn.close()


def test_a_removed_plugin_leaves_its_tables_and_ledger_alone(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "r.db"))
    migrate_features(conn, REGISTRY.with_features([PLUGIN]))
    assert migrate_features(conn, REGISTRY) == []
    assert ledger(conn)["sample"] == 2
    conn.close()


def test_features_run_after_the_features_they_name() -> None:
    first = Feature("zeta", (Migration(1, "z", "SELECT 1"),))
    second = Feature("alpha", (Migration(1, "a", "SELECT 1"),), after=("zeta",))
    plan = SchemaPlan("t", history=(), features=(second, first))
    assert [f.name for f in plan.ordered()] == ["zeta", "alpha"]
    with pytest.raises(ValueError, match="unknown"):
        SchemaPlan("t", history=(), features=(second,)).ordered()


def test_two_features_of_one_name_are_refused() -> None:
    twin = Feature("accounts", (Migration(1, "x", "SELECT 1"),))
    with pytest.raises(ValueError, match="two different features"):
        REGISTRY.with_features([twin])


def test_versions_are_numbered_without_gaps() -> None:
    with pytest.raises(ValueError, match="numbered"):
        Schema("bad", (Migration(1, "a", "SELECT 1"), Migration(3, "b", "SELECT 1")))
    with pytest.raises(ValueError, match="numbered"):
        Feature("bad", (Migration(2, "a", "SELECT 1"),))


def _recorded(version: int) -> Callable[[apsw.Connection], None]:
    def step(c: apsw.Connection) -> None:
        c.execute("CREATE TABLE IF NOT EXISTS steps(version INTEGER)")
        c.execute("INSERT INTO steps VALUES (?)", (version,))

    return step


def _plan(upto: int) -> SchemaPlan:
    steps = tuple(Migration(v, f"step {v}", _recorded(v)) for v in range(1, upto + 1))
    return SchemaPlan("t", history=(), features=(Feature("recorded", steps),))


def test_a_step_another_migrator_ran_after_the_ledger_was_read_is_not_run_again(
    tmp_path: Path,
) -> None:
    """Deterministic interleaving: `migrate_features` reads the ledger, then waits for the
    write lock; meanwhile another connection runs the same steps. The waiting one must
    read the ledger again inside its transaction and run nothing."""
    path = str(tmp_path / "r.db")
    mine, other = apsw.Connection(path), apsw.Connection(path)
    try:
        migrate_features(mine, _plan(1))  # bridged, at step 1; steps 2 and 3 are new
        other.execute("BEGIN IMMEDIATE")  # the other migrator holds the write lock
        interleaved: list[int] = []

        def busy(_tries: int) -> bool:
            if not interleaved:  # once: the other migrator finishes and lets go
                other.execute("ROLLBACK")
                interleaved.extend(v for _, v in migrate_features(other, _plan(3)))
            return True

        mine.set_busy_handler(busy)
        assert migrate_features(mine, _plan(3)) == []
        assert interleaved == [2, 3]
        steps = [v for (v,) in mine.execute("SELECT version FROM steps ORDER BY rowid")]
        assert steps == [1, 2, 3]
        assert ledger(mine) == {"recorded": 3}
    finally:
        mine.close()
        other.close()


# -- two processes at once ------------------------------------------------------------


def _counted(version: int) -> Callable[[apsw.Connection], None]:
    def step(c: apsw.Connection) -> None:
        # Recorded outside the transaction too, so even a run rolled back would show.
        with open(os.environ["SKALD_TEST_MIGRATION_LOG"], "a") as log:  # noqa: PTH123
            log.write(f"{version} {os.getpid()}\n")
        c.execute("CREATE TABLE IF NOT EXISTS runs(version INTEGER, pid INTEGER)")
        c.execute("INSERT INTO runs VALUES (?, ?)", (version, os.getpid()))
        time.sleep(0.05)  # widen the window in which the other process also wants it

    return step


COUNTED = SchemaPlan(
    "counted",
    history=(),
    features=(
        Feature("counted", tuple(Migration(v, f"step {v}", _counted(v)) for v in (1, 2, 3, 4))),
    ),
)


def _migrate_in_a_process(path: str, log: str, start: Any, schema_name: str) -> None:
    os.environ["SKALD_TEST_MIGRATION_LOG"] = log
    schema = COUNTED if schema_name == "counted" else REGISTRY

    async def run() -> None:
        start.wait(120)  # both processes are up: open and migrate together
        db = await open_plain(Path(path), "t")
        try:
            await db.call(lambda c: migrate_features(c, schema))
        finally:
            await db.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("schema_name", ["counted", "registry"])
def test_two_processes_migrating_one_database_at_once_run_each_step_once(
    tmp_path: Path, schema_name: str
) -> None:
    ctx = multiprocessing.get_context("spawn")
    path, log = tmp_path / "shared.db", tmp_path / "steps.log"
    log.write_text("")
    apsw.Connection(str(path)).close()  # the file exists: the processes only open it
    start = ctx.Barrier(2)
    workers = [
        ctx.Process(target=_migrate_in_a_process, args=(str(path), str(log), start, schema_name))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(180)
    assert [w.exitcode for w in workers] == [0, 0]
    conn = apsw.Connection(str(path))
    try:
        schema = COUNTED if schema_name == "counted" else REGISTRY
        assert user_version(conn) == schema.head
        assert ledger(conn) == {f.name: f.head for f in schema.features}
        if schema_name == "counted":
            runs = conn.execute("SELECT version FROM runs ORDER BY version").fetchall()
            assert [r[0] for r in runs] == [1, 2, 3, 4]
            steps = sorted(int(line.split()[0]) for line in log.read_text().splitlines())
            assert steps == [1, 2, 3, 4]
    finally:
        conn.close()
