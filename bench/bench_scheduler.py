"""Scheduler benchmark: the cost of finding due jobs with 10 000 jobs across 20 members,
and the server's memory with them.

Run from the repository root:

    .venv/bin/python bench/bench_scheduler.py             # 20 members x 500 jobs
    .venv/bin/python bench/bench_scheduler.py --quick     # 20 members x 100 jobs

It boots a real `Runtime` in this process on a scratch data directory (real owner
databases on disk, unencrypted members in a role holding `schedule.use`, the test KDF
profile so creating members is quick), gives each member N repeating jobs with random
cron expressions (inserted through `ScheduleStore`, their first run computed by the
cron module as the scheduler does), then times `Scheduler.tick()` on an injected clock:

(a) idle tick: nothing is due (the common case, every `tick_s`): one indexed query per
    unlocked member;
(b) busy tick: one job due per member (20 claims: a transaction each, the run row and
    the next time computed with cronsim); the runs are claimed but not executed (no
    model is involved, `Scheduler._launch` is replaced by a no-op).

It prints the median and 95th percentile of each over the repetitions, and the process's
resident memory (VmRSS) before the jobs exist, after they are created, and after the
ticks.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.schedule.clock import FakeClock
from skald.features.schedule.cron import Schedule
from skald.features.schedule.scheduler import scheduler_of
from skald.features.schedule.store import Job, ScheduleStore, iso, new_id
from skald.paths import DataLayout
from skald.store.rows import Role, RoleAttributes

START = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(members: int, jobs_per: int, reps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = DataLayout(Path(tmp) / "data")
        layout.root.mkdir(parents=True)
        (layout.root / "config.toml").write_text("[schedule]\ntick_s = 86400\n")
        env = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
        from skald.plugins.manager import Plugins

        config = load_config(
            layout.root, env, sections=lambda p: Plugins.load(p.modules).config_sections()
        )
        rt = await Runtime.boot(layout, config, announce=io.StringIO())
        try:
            await rt.core.registry.save_role(
                Role(
                    name="bench",
                    display_name="bench",
                    builtin=False,
                    capabilities=["chat", "schedule.use"],
                    attributes=RoleAttributes(encrypted=False),
                ),
                create=True,
            )
            rss_start = rss_mib()
            rnd = random.Random(14)
            zone = ZoneInfo("Europe/Rome")
            # Every job's first run lies after the first busy tick, except one per member.
            t0 = time.perf_counter()
            ids = []
            for m in range(members):
                created = await rt.core.users.create(f"member{m:02d}", "a bench password", "bench")
                mine = await rt.attach(await rt.core.users.unlock_unencrypted(created.user))
                ids.append(created.user.id)
                store = ScheduleStore(mine.handle.db)
                for j in range(jobs_per):
                    expr = f"{rnd.randint(0, 59)} {rnd.randint(0, 23)} * * {rnd.randint(0, 6)}"
                    first = Schedule(expr).next_after(START + timedelta(days=1), zone)
                    assert first is not None
                    stamp = iso(START)
                    await store.add(
                        Job(
                            id=new_id(),
                            title=f"job {j}",
                            prompt="bench",
                            agent_id="assistant",
                            cron=expr,
                            run_at=None,
                            zone=zone.key,
                            next_run=iso(START) if j == 0 else iso(first),
                            state="active",
                            created_by="member",
                            conversation_id=new_id(),
                            skip_after_s=0,
                            failures=0,
                            created_at=stamp,
                            updated_at=stamp,
                        ),
                        active_limit=jobs_per,
                        conversation_title=f"job {j}",
                    )
            created_s = time.perf_counter() - t0
            rss_jobs = rss_mib()
            scheduler = scheduler_of(rt.plugins)
            clock = FakeClock(START - timedelta(minutes=1))
            scheduler.clock = clock
            scheduler._launch = lambda member, job, run: None  # type: ignore[method-assign]
            await scheduler.tick()  # first sight of every member (left-over runs, tasks)

            idle = []
            for _ in range(reps):
                t = time.perf_counter()
                assert await scheduler.tick() == []
                idle.append((time.perf_counter() - t) * 1000)
            clock.set(START + timedelta(seconds=5))
            t = time.perf_counter()
            claimed = await scheduler.tick()
            busy_ms = (time.perf_counter() - t) * 1000
            assert len(claimed) == members, len(claimed)
            rss_end = rss_mib()
            print(f"members {members}, jobs {members * jobs_per} ({jobs_per} each); "
                  f"created in {created_s:.1f} s")  # fmt: skip
            print(f"idle tick  median {statistics.median(idle):7.2f} ms   "
                  f"p95 {pct(idle, 0.95):7.2f} ms   (n={reps})")  # fmt: skip
            print(f"busy tick  {busy_ms:7.2f} ms for {len(claimed)} claims "
                  f"({busy_ms / len(claimed):.2f} ms each)")  # fmt: skip
            print(f"RSS        {rss_start:.0f} MiB before, {rss_jobs:.0f} MiB with the jobs, "
                  f"{rss_end:.0f} MiB after the ticks (pid {os.getpid()})")  # fmt: skip
        finally:
            await rt.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    per = 100 if args.quick else 10_000 // args.members
    asyncio.run(main(args.members, per, args.reps))
