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

    .venv/bin/python bench/bench_connectors.py --in-containers

runs the same ten as personal connectors in the members' sandboxes (real Docker, the
runtime image; tests/mcp_servers/escape_server.py, which needs only the image's
python3) and adds what the host holds for them outside the server: the RSS of every
process this one started (a `docker exec` client per connector before issue 22's exec
stream, nothing after).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from connector_support import python_connector, simple_feed

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
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


def children_rss_kib() -> tuple[int, int]:
    """(how many, their RSS in KiB) of the processes this one started."""
    count = total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid():
                total += rss_kib(entry.name)
                count += 1
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return count, total


def personal_feed(root: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        command = ["python3", "{DIR}/escape_server.py"]
        python_connector(
            root, name, "escape_server.py", extra={"command": command, "scope": "personal"}
        )
    write_index(root, 1)
    return root


async def main(in_containers: bool) -> None:
    os.environ["SKALD_SECURITY_KDF_PROFILE"] = "test"
    with tempfile.TemporaryDirectory() as tmp:
        layout = DataLayout(Path(tmp) / "data")
        env = {"SKALD_SECURITY_KDF_PROFILE": "test", "SKALD_SANDBOX_ENABLED": "false"}
        if in_containers:
            env |= {"SKALD_SANDBOX_ENABLED": "true", "SKALD_SANDBOX_MEMORY_MB": "512"}
        rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
        docker: Any = None
        try:
            names = tuple(f"c{i}" for i in range(MEMBERS * PER_MEMBER))
            c = service.require(rt.server)
            feed = Path(tmp) / "feed"
            if in_containers:
                from sandbox_support import docker_client, wait_for

                docker = docker_client()
                sandbox = rt.sandbox
                assert sandbox is not None

                async def ready() -> bool:
                    return sandbox.state == "ok" and sandbox.reconciled > 0

                await wait_for(ready, 60)
                c.config = ConnectorsConfig(feed=str(personal_feed(feed, names)))
            else:
                feed = simple_feed(feed, names)
                c.config = ConnectorsConfig(feed=str(feed), household_on_host=True)
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

            def all_running() -> bool:
                return len(sup.instances) == len(names) and all(
                    inst.state == "running" for inst in sup.instances.values()
                )

            async with asyncio.timeout(300):
                while not all_running():  # noqa: ASYNC110 - polls the supervisor's state
                    await asyncio.sleep(0.1)
            started = time.monotonic() - start
            after = await at_rest()
            sessions = sum(1 for inst in sup.instances.values() if inst.session is not None)
            count, child_rss = children_rss_kib()
            print(f"members unlocked: {MEMBERS}, connectors running: {len(sup.instances)}")
            where = "in the members' containers" if in_containers else "on the host"
            print(f"ten connectors {where} started in {started:.1f} s")
            print(
                f"server VmRSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after "
                f"(+{(after - before) / 1024:.1f} MiB for {sessions} sessions)"
            )
            what = "docker clients on the host" if in_containers else "connector processes"
            print(
                f"processes this server started ({what}): {count}, "
                f"{child_rss / 1024:.1f} MiB in total"
                + (f" ({child_rss / 1024 / count:.1f} MiB each)" if count else "")
            )
        finally:
            instance = rt.sandbox.instance_id if rt.sandbox is not None else None
            await rt.shutdown()
            if docker is not None and instance is not None:
                from sandbox_support import remove_instance_containers

                await asyncio.to_thread(remove_instance_containers, docker, instance)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--in-containers",
        action="store_true",
        help="personal connectors in the members' sandboxes (Docker and the runtime image)",
    )
    asyncio.run(main(parser.parse_args().in_containers))
