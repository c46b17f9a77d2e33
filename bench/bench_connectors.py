"""Connectors benchmark: the server's resident memory with 5 members × 2 connectors.

Run from the repository root:

    .venv/bin/python bench/bench_connectors.py

An in-process server (the tests' way: `Runtime.boot`, the light KDF) gets five members,
each unlocked, then ten connectors from a local feed (the official Python SDK's small
server of tests/mcp_servers), two switched on per member, so the supervisor holds ten
live MCP sessions over stdio. It prints the server's VmRSS (read after a second at rest)
before and after, and the connector processes' own RSS (they are separate processes:
on a real install a personal connector's process lives in the member's container).
The connectors are household-scope here so no Docker is needed; the server's side of a
session (transport, reader task, tool specs) is the same for both scopes.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from connector_support import simple_feed

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import ConnectorsConfig
from skald.paths import DataLayout

MEMBERS = 5
PER_MEMBER = 2
PASSWORD = "a household password"


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def at_rest() -> int:
    await asyncio.sleep(1.0)
    return rss_kib()


async def main() -> None:
    os.environ["SKALD_SECURITY_KDF_PROFILE"] = "test"
    with tempfile.TemporaryDirectory() as tmp:
        layout = DataLayout(Path(tmp) / "data")
        env = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
        rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
        try:
            names = tuple(f"c{i}" for i in range(MEMBERS * PER_MEMBER))
            c = service.require(rt.plugins)
            c.config = ConnectorsConfig(feed=str(simple_feed(Path(tmp) / "feed", names)))
            users = []
            for i in range(MEMBERS):
                created = await rt.core.users.create(f"member{i}", PASSWORD, "member")
                users.append(created.user.id)
                await rt.attach(await rt.core.users.unlock(f"member{i}", PASSWORD))
            for name in names:
                await c.installer.install(c.feed(), name)
            before = await at_rest()
            start = time.monotonic()
            for i, user_id in enumerate(users):
                for name in names[i * PER_MEMBER : (i + 1) * PER_MEMBER]:
                    await c.store.set_active(name, user_id, True)
                assert c.supervisor is not None
                await c.supervisor.member_changed(user_id)
            sup = c.supervisor
            assert sup is not None
            while not all(  # noqa: ASYNC110 - polls the supervisor's stateinst.state == "running" for inst in sup.instances.values()) or len(
                sup.instances
            ) < len(names):
                await asyncio.sleep(0.1)
            started = time.monotonic() - start
            after = await at_rest()
            children = [
                inst.session.transport.pid  # type: ignore[attr-defined]
                for inst in sup.instances.values()
                if inst.session is not None
            ]
            child_rss = sum(rss_kib(pid) for pid in children if pid)
            print(f"members unlocked: {MEMBERS}, connectors running: {len(sup.instances)}")
            print(f"ten connectors started in {started:.1f} s")
            print(
                f"server VmRSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after "
                f"(+{(after - before) / 1024:.1f} MiB for {len(children)} sessions)"
            )
            print(
                f"connector processes: {child_rss / 1024:.1f} MiB in total "
                f"({child_rss / 1024 / max(1, len(children)):.1f} MiB each)"
            )
        finally:
            await rt.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
