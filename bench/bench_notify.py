"""Notifications benchmark: what one `notify()` costs, and a delivery with Web Push.

Run from the repository root:

    .venv/bin/python bench/bench_notify.py            # 500 notifications, 200 pushes
    .venv/bin/python bench/bench_notify.py --quick    # 100 and 40

It boots a Runtime in process on a scratch data directory (test KDF), with one
encrypted member unlocked, and measures with `time.perf_counter()`:

- `notify()`: write to the member's encrypted database plus the badge event, one after
  the other (the batch window is kept closed so no delivery competes);
- a burst of 20 `notify()` calls with the real 200 ms window: how many deliveries it
  made (must be 1) and the time from the first call to the delivery done;
- one Web Push (encrypt with a fresh key, sign the VAPID JWT, POST) to the push-service
  double of tests/push_double.py on 127.0.0.1, which verifies and decrypts each one.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("SKALD_SECURITY_KDF_PROFILE", "test")

import httpx  # noqa: E402
from push_double import PushDouble, b64u  # noqa: E402

from skald.config import load_config  # noqa: E402
from skald.core.runtime import Runtime  # noqa: E402
from skald.features.notifications.service import NotificationService  # noqa: E402
from skald.features.notifications.webpush import PushTarget, send  # noqa: E402
from skald.paths import DataLayout  # noqa: E402

ENV = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
PASSWORD = "a household password"


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1]
    return f"median {statistics.median(values) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"


async def main(quick: bool) -> None:
    n_notify, n_push = (100, 40) if quick else (500, 200)
    with tempfile.TemporaryDirectory() as tmp:
        layout = DataLayout(Path(tmp) / "data")
        rt = await Runtime.boot(layout, load_config(layout.root, ENV), announce=io.StringIO())
        try:
            user = await rt.core.users.create("ada", PASSWORD, "member")
            await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
            never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            async def closed(_: float) -> None:
                await never

            held = NotificationService(rt, sleep=closed)
            times = []
            for i in range(n_notify):
                t0 = time.perf_counter()
                await held.notify(user.user.id, title=f"n{i}", body="x" * 200)
                times.append(time.perf_counter() - t0)
            await held._batcher.close()
            print(f"notify() x{n_notify}, encrypted member: {_ms(times)}")

            live = NotificationService(rt)
            rt.notifications = live
            await live.mark_all_read(user.user.id)
            store = await live.store(user.user.id)
            await store.mark_delivered(await store.held(before="9999"))
            t0 = time.perf_counter()
            for i in range(20):
                await live.notify(user.user.id, title=f"burst {i}")
            await live.settle()
            print(
                f"burst of 20 with the 200 ms window: {live.deliveries} delivery, "
                f"first call to delivered {(time.perf_counter() - t0) * 1000:.0f} ms"
            )

            with PushDouble(await live.public_key()) as double:
                sub = double.subscribe()
                target = PushTarget(double.endpoint(sub), sub.p256dh, b64u(sub.auth))
                payload = b'{"count": 1, "unread": 1, "items": [{"title": "t"}]}'
                times = []
                async with httpx.AsyncClient() as client:
                    for _ in range(n_push):
                        t0 = time.perf_counter()
                        out = await send(
                            client, target, payload, key=live.vapid,
                            subject="mailto:a@b.example", ttl=60,
                        )  # fmt: skip
                        times.append(time.perf_counter() - t0)
                        assert out == ("sent", 201), double.refusals
                print(f"one Web Push to the local double x{n_push}: {_ms(times)}")
        finally:
            await rt.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
