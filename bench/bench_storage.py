"""Storage benchmark: what unlocking costs, and what encryption costs the database.

Run from the repository root:

    .venv/bin/python bench/bench_storage.py            # full run (about 25 s on 2 cores)
    .venv/bin/python bench/bench_storage.py --quick    # about 3 s, for a sanity check

Part 1 times the real password check of an encrypted account with the default Argon2id
parameters: `keys.unwrap` of a wrap made by `keys.wrap_with_password`.

Part 2 runs the same workload against an unencrypted and an encrypted (SQLCipher 4)
database in the same process, through `skald.store.database` exactly as Skald uses it:
every statement goes through `await db.call(...)` / `await db.transaction(...)`, so the
numbers include the hop to the database thread and back. Plain and encrypted runs
alternate, and each figure is the median over the repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from skald.core import keys
from skald.store.database import Database, open_encrypted, open_plain

INSERT = "INSERT INTO items(id, name, body) VALUES (?, ?, ?)"
SCHEMA = """
CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE single(id INTEGER PRIMARY KEY, name TEXT NOT NULL, body TEXT NOT NULL);
"""
MODES = ("plain", "encrypted")


@dataclass(frozen=True)
class Plan:
    kdf_runs: int
    repeats: int
    rows: int
    batch: int
    single_rows: int
    point_selects: int
    scans: int
    body_bytes: int


FULL = Plan(
    kdf_runs=5,
    repeats=3,
    rows=100_000,
    batch=1000,
    single_rows=2000,
    point_selects=20_000,
    scans=5,
    body_bytes=200,
)
QUICK = Plan(
    kdf_runs=3,
    repeats=1,
    rows=20_000,
    batch=1000,
    single_rows=300,
    point_selects=2000,
    scans=3,
    body_bytes=200,
)


# -- part 1: the key-derivation cost of an unlock -----------------------------------


def bench_unlock(runs: int) -> list[float]:
    """Seconds per unwrap of a password wrap made with the default parameters."""
    user_id = "bench0001"
    password = "a household password"
    dek = keys.new_dek()
    wrapped = keys.wrap_with_password(dek, password, user_id, keys.DEFAULT_KDF)
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        got = keys.unwrap(wrapped, password, user_id, "password")
        times.append(time.perf_counter() - started)
        if got != dek:
            raise RuntimeError("unwrap returned a different key")
    return times


# -- part 2: encrypted versus plain database ----------------------------------------


Timed = Callable[[Database], Awaitable[float]]


def _rows(plan: Plan, start: int, count: int) -> list[tuple[int, str, str]]:
    rng = random.Random(start)
    alphabet = "abcdefghijklmnopqrstuvwxyz "
    return [
        (i, f"item-{i}", "".join(rng.choices(alphabet, k=plan.body_bytes)))
        for i in range(start, start + count)
    ]


async def _open(mode: str, path: Path) -> Database:
    if mode == "encrypted":
        return await open_encrypted(path, f"bench-{mode}", secrets.token_bytes(32))
    return await open_plain(path, f"bench-{mode}")


async def _insert_batched(db: Database, rows: list[tuple[int, str, str]], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        await db.transaction(lambda c, chunk=chunk: c.executemany(INSERT, chunk))
    return time.perf_counter() - started


async def _insert_single(db: Database, rows: list[tuple[int, str, str]]) -> float:
    sql = INSERT.replace("items", "single")
    started = time.perf_counter()
    for row in rows:
        await db.transaction(lambda c, row=row: c.execute(sql, row))
    return time.perf_counter() - started


def _select_one(c: apsw.Connection, item_id: int) -> list[Any]:
    return c.execute("SELECT name, body FROM items WHERE id=?", (item_id,)).fetchall()


async def _point_selects(db: Database, ids: list[int]) -> float:
    started = time.perf_counter()
    for item_id in ids:
        rows = await db.call(lambda c, item_id=item_id: _select_one(c, item_id))
        if not rows:
            raise RuntimeError(f"row {item_id} is missing")
    return time.perf_counter() - started


async def _point_selects_in_one_call(db: Database, ids: list[int]) -> float:
    def q(c: apsw.Connection) -> int:
        return sum(len(_select_one(c, item_id)) for item_id in ids)

    started = time.perf_counter()
    found = await db.call(q)
    elapsed = time.perf_counter() - started
    if found != len(ids):
        raise RuntimeError("rows are missing")
    return elapsed


async def _full_scan(db: Database, expected_rows: int) -> float:
    def q(c: apsw.Connection) -> tuple[int, int]:
        # sum(length(body)) makes SQLite read every row's payload, not just the b-tree.
        count, total = c.execute("SELECT count(*), sum(length(body)) FROM items").fetchall()[0]
        return int(count), int(total)

    started = time.perf_counter()
    count, _ = await db.call(q)
    elapsed = time.perf_counter() - started
    if count != expected_rows:
        raise RuntimeError(f"scan saw {count} rows, expected {expected_rows}")
    return elapsed


async def _one_repeat(mode: str, path: Path, plan: Plan) -> dict[str, float]:
    """Every database metric for one mode, on a fresh file. Values are per second."""
    rows = _rows(plan, 1, plan.rows)
    single = _rows(plan, 1, plan.single_rows)
    rng = random.Random(42)
    ids = [rng.randint(1, plan.rows) for _ in range(plan.point_selects)]
    db = await _open(mode, path)
    try:
        await db.transaction(lambda c: c.execute(SCHEMA))
        result: dict[str, float] = {}
        result["insert_batched"] = plan.rows / await _insert_batched(db, rows, plan.batch)
        result["insert_single"] = plan.single_rows / await _insert_single(db, single)
        result["select_point"] = plan.point_selects / await _point_selects(db, ids)
        result["select_point_one_call"] = plan.point_selects / await _point_selects_in_one_call(
            db, ids
        )
        scans = [await _full_scan(db, plan.rows) for _ in range(plan.scans)]
        result["scan"] = plan.rows / statistics.median(scans)
    finally:
        await db.aclose()
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    result["file_mib"] = size / (1024 * 1024)
    return result


async def bench_databases(plan: Plan, workdir: Path) -> dict[str, dict[str, float]]:
    samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for repeat in range(plan.repeats):
        # Alternate which mode goes first, so warm-up and page-cache effects even out.
        order = MODES if repeat % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            path = workdir / f"{mode}-{repeat}.db"
            samples[mode].append(await _one_repeat(mode, path, plan))
    return {
        mode: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
        for mode, runs in samples.items()
    }


# -- output --------------------------------------------------------------------------

METRICS = [
    ("insert_batched", "insert, {batch}-row transactions", "rows/s"),
    ("insert_single", "insert, one row per transaction", "rows/s"),
    ("select_point", "point select, one db.call each", "rows/s"),
    ("select_point_one_call", "point select, all in one db.call", "rows/s"),
    ("scan", "full scan ({rows} rows)", "rows/s"),
    ("file_mib", "file size after the run", "MiB"),
]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def report(plan: Plan, unlock: list[float], dbs: dict[str, dict[str, float]]) -> None:
    kdf = keys.DEFAULT_KDF
    print(f"skald storage benchmark, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"python {platform.python_version()}, SQLite {apsw.sqlite_lib_version()} "
        f"(apsw {apsw.apsw_version()}), {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print()
    print(
        f"argon2id unlock, default parameters: memory {kdf.memory_kib // 1024} MiB, "
        f"{kdf.time_cost} passes, {kdf.parallelism} lanes"
    )
    print(
        f"  median {statistics.median(unlock):.3f} s over {len(unlock)} runs "
        f"(min {min(unlock):.3f} s, max {max(unlock):.3f} s)"
    )
    print()
    print(
        f"database, {plan.body_bytes}-byte rows, median of {plan.repeats} repeat(s); "
        "ratio = encrypted / plain (1.00 = same, higher is better except for size)"
    )
    header = f"  {'metric':<40} {'unit':>7} {'plain':>12} {'encrypted':>12} {'ratio':>6}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for key, label, unit in METRICS:
        plain = dbs["plain"][key]
        enc = dbs["encrypted"][key]
        name = label.format(batch=plan.batch, rows=f"{plan.rows:,}")
        print(f"  {name:<40} {unit:>7} {_fmt(plain):>12} {_fmt(enc):>12} {enc / plain:>6.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short run with fewer rows")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to create the scratch databases (default: the system temp directory)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL

    unlock = bench_unlock(plan.kdf_runs)
    with tempfile.TemporaryDirectory(prefix="skald-bench-", dir=args.dir) as tmp:
        dbs = asyncio.run(bench_databases(plan, Path(tmp)))
    report(plan, unlock, dbs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
