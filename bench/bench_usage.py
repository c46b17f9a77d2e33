"""Usage aggregate: the stats answer over 1,000,000 request rows, and what keeping the
aggregate up costs a turn.

    python bench/bench_usage.py            # 1,000,000 rows, about a minute
    python bench/bench_usage.py --quick    # 100,000 rows

Writes only to a temporary directory. The stats figure times what `GET /api/usage/stats`
does after its guard (two grouped reads of `usage_hourly` on the database thread and the
bucketing), p50/p95 of 200 answers, reading every day of the month and through
`StatsCache` as the route does (the closed days kept, today read: the first of the 200
answers fills it); the write figure times `LlmStore.record_request`
(one transaction, as a turn does) with and without the aggregate's trigger, plus the
turn's cap check and count (`UsageStore.check_and_count`, one transaction; no caps
set, so it reads the caps and counts), 3000 rows each, alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from skald.features.usage.stats import StatsCache, build, window
from skald.features.usage.store import SCHEMA, UsageStore
from skald.store.database import Database, open_plain
from skald.store.llm import LlmStore
from skald.store.migrations import migrate_features
from skald.store.migrations.registry import REGISTRY

USERS = [f"user{i}" for i in range(6)]
MODELS = [f"model{i}" for i in range(4)]
ZONE = ZoneInfo("Europe/Rome")


async def _db(path: Path) -> Database:
    db = await open_plain(path, "bench")
    await db.call(lambda c: migrate_features(c, REGISTRY.with_features([SCHEMA])))
    return db


async def _fill(db: Database, rows: int, days: int) -> None:
    now = time.time()
    rng = random.Random(7)
    sql = (
        "INSERT INTO llm_requests(at, user_id, model_id, status, input_tokens, "
        "output_tokens, cost_usd) VALUES (?,?,?,?,?,?,?)"
    )
    batch = 20_000
    for start in range(0, rows, batch):
        chunk = [
            (
                now - rng.random() * days * 86400,
                rng.choice(USERS),
                rng.choice(MODELS),
                "finished",
                rng.randint(100, 4000),
                rng.randint(10, 800),
                rng.random() / 100,
            )
            for _ in range(min(batch, rows - start))
        ]
        await db.transaction(lambda c, chunk=chunk: c.executemany(sql, chunk))


async def _stats(db: Database, everyone: bool, cache: StatsCache | None = None) -> float:
    store = UsageStore(db)
    t0 = time.perf_counter()
    starts, _, until = window("month", ZONE)
    who = None if everyone else USERS[0]
    if cache is None:
        cells = await store.bucketed(starts, until, who)
    else:
        cells = await cache.cells(store.bucketed, starts, until, who)
    build("month", cells, {}, {}, starts)
    return (time.perf_counter() - t0) * 1000


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


async def _writes(db: Database, n: int) -> tuple[float, float, float]:
    """ms per record_request with the trigger, without it, and per check_and_count."""
    store, usage = LlmStore(db), UsageStore(db)
    trigger = await db.call(
        lambda c: c.execute(
            "SELECT sql FROM sqlite_master WHERE name='usage_hourly_count'"
        ).fetchone()[0]
    )

    async def record(count: int) -> float:
        t0 = time.perf_counter()
        for i in range(count):
            await store.record_request(
                at=time.time(), user_id=USERS[i % 6], model_id=MODELS[i % 4],
                status="finished", input_tokens=1000, output_tokens=100, latency_ms=900.0,
                error=None, cost_usd=0.001, origin="c1",
            )  # fmt: skip
        return (time.perf_counter() - t0) * 1000 / count

    with_t, without_t, turns = [], [], []
    for _ in range(3):
        with_t.append(await record(n // 3))
        await db.call(lambda c: c.execute("DROP TRIGGER usage_hourly_count"))
        without_t.append(await record(n // 3))
        await db.call(lambda c: c.execute(trigger))
        t0 = time.perf_counter()
        for i in range(n // 3):
            await usage.check_and_count(
                USERS[i % 6], "member", (0.0, 0.0), time.time(), lambda *_: (None, [])
            )
        turns.append((time.perf_counter() - t0) * 1000 / (n // 3))
    return statistics.median(with_t), statistics.median(without_t), statistics.median(turns)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = 100_000 if args.quick else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        db = await _db(Path(tmp) / "registry.db")
        t0 = time.perf_counter()
        await _fill(db, rows, days=90)
        filled = time.perf_counter() - t0
        aggregate = await db.call(
            lambda c: c.execute("SELECT count(*) FROM usage_hourly").fetchone()[0]
        )
        print(f"request rows                 {rows:>10,}  (filled in {filled:.1f} s, over 90 days)")
        print(f"aggregate rows               {aggregate:>10,}")
        cache = StatsCache()  # as the route has it: the closed days kept, today read
        for everyone in (False, True):
            for kept in (None, cache):
                times = [await _stats(db, everyone, kept) for _ in range(200)]
                who = "everyone (admin)" if everyone else "one member"
                how = "every day read" if kept is None else "StatsCache"
                print(
                    f"stats, month, {who:<16} {how:<14} p50 {_pct(times, 0.5):6.2f} ms  "
                    f"p95 {_pct(times, 0.95):6.2f} ms"
                )
        with_t, without_t, turn = await _writes(db, 300 if args.quick else 3000)
        print(f"record_request without trigger {without_t:8.3f} ms")
        print(f"record_request with trigger    {with_t:8.3f} ms  (ratio {with_t / without_t:.2f})")
        print(f"check_and_count (once per turn) {turn:8.3f} ms")
        added = max(0.0, with_t - without_t) + turn
        print(f"added to a one-request turn    {added:8.3f} ms")
        await db.aclose()


if __name__ == "__main__":
    asyncio.run(main())
