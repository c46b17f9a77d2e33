"""Every historic schema version migrates to head; migrating twice changes nothing."""

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
from skald.store.migrations import Migration, Schema, migrate, user_version
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY

KEY = os.urandom(32)
CASES = [(s, v) for s in (REGISTRY, OWNER) for v in range(s.head + 1)]


async def _open(schema: Schema, path: Path) -> Database:
    # Owner databases are encrypted in production, so migrate them encrypted here too.
    if schema is OWNER:
        return await open_encrypted(path, "t", KEY)
    return await open_plain(path, "t")


async def _fresh_head_schema(schema: Schema, path: Path) -> list[object]:
    db = await _open(schema, path)
    try:
        return await db.call(lambda c: (migrate(c, schema), schema_of(c))[1])
    finally:
        await db.aclose()


@pytest.mark.parametrize(("schema", "version"), CASES, ids=[f"{s.name}-v{v}" for s, v in CASES])
async def test_every_version_migrates_to_head(tmp_path: Path, schema: Schema, version: int) -> None:
    expected_schema = await _fresh_head_schema(schema, tmp_path / "fresh.db")
    db = await _open(schema, tmp_path / "old.db")
    try:
        await db.call(lambda c: build_at(c, schema, version))
        before = await db.call(contents_of)
        applied = await db.call(lambda c: migrate(c, schema))
        assert applied == list(range(version + 1, schema.head + 1))
        assert await db.call(user_version) == schema.head
        assert await db.call(schema_of) == expected_schema
        after = await db.call(contents_of)
        for table, rows in before.items():
            if table in after and rows:
                # Rows survive; new columns may be appended with their defaults.
                width = len(rows[0])
                assert [r[:width] for r in after[table]] == rows, table
        integrity = await db.call(lambda c: c.execute("PRAGMA integrity_check").fetchall())
        assert integrity == [("ok",)]

        # Twice is a no-op: nothing applied, schema, version and data unchanged.
        assert await db.call(lambda c: migrate(c, schema)) == []
        assert await db.call(schema_of) == expected_schema
        assert await db.call(contents_of) == after
    finally:
        await db.aclose()


async def test_fts_index_follows_notes_migrated_from_v1(tmp_path: Path) -> None:
    db = await _open(OWNER, tmp_path / "o.db")
    try:
        await db.call(lambda c: build_at(c, OWNER, OWNER.head))
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
            await db.call(lambda c: migrate(c, REGISTRY))
    finally:
        await db.aclose()


def test_versions_are_numbered_without_gaps() -> None:
    from skald.store.migrations import Migration

    with pytest.raises(ValueError, match="numbered"):
        Schema("bad", (Migration(1, "a", "SELECT 1"), Migration(3, "b", "SELECT 1")))


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


COUNTED = Schema("counted", tuple(Migration(v, f"step {v}", _counted(v)) for v in (1, 2, 3, 4)))


def _migrate_in_a_process(path: str, log: str, start: Any, schema_name: str) -> None:
    os.environ["SKALD_TEST_MIGRATION_LOG"] = log
    schema = COUNTED if schema_name == "counted" else REGISTRY

    async def run() -> None:
        start.wait(120)  # both processes are up: open and migrate together
        db = await open_plain(Path(path), "t")
        try:
            await db.call(lambda c: migrate(c, schema))
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
        if schema_name == "counted":
            runs = conn.execute("SELECT version FROM runs ORDER BY version").fetchall()
            assert [r[0] for r in runs] == [1, 2, 3, 4]
            steps = sorted(int(line.split()[0]) for line in log.read_text().splitlines())
            assert steps == [1, 2, 3, 4]
    finally:
        conn.close()
