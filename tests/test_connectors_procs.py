"""Nothing a connector started outlives it: a real container, a real MCP server
(tests/mcp_servers/escape_server.py) that leaves `env -i setsid sleep 1000` behind as a
grandchild at start. After switching the connector off, after the member locks, and after
a kill -9 of the server and a new start, no process of the connector is left."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import PASSWORD
from connector_support import python_connector
from docker.errors import NotFound
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from sandbox_support import (  # noqa: F401
    docker_client,
    docker_fixture,
    remove_instance_containers,
    sandbox_runtime_fixture,
)
from test_chat_recovery import _wait_for

from skald.connectors import service
from skald.connectors.feedtool import write_index
from skald.connectors.supervisor import Instance
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.store.snapshot import read_instance_id

pytestmark = pytest.mark.docker

PERSONAL = {
    "command": ["python3", "{DIR}/escape_server.py"],
    "scope": "personal",
    "env": {"ESCAPE": "1"},
}


def escape_feed(root: Path) -> Path:
    python_connector(root, "escape", "escape_server.py", extra=PERSONAL)
    write_index(root, 1)
    return root


def leftovers(docker: Any, container: str) -> list[str]:
    """The connector's processes in the container: the server and its escapee."""
    out = docker.containers.get(container).exec_run(["ps", "-eww", "-o", "args"]).output
    return sorted(
        line.strip()
        for line in out.decode().splitlines()
        if "escape_server" in line or line.strip() == "sleep 1000"
    )


async def _running(runtime: Runtime, owner: str, name: str) -> Instance:
    sup = service.require(runtime.plugins).supervisor
    assert sup is not None
    inst = None
    for _ in range(600):
        inst = sup.instances.get((owner, name))
        if inst is not None and inst.state == "running":
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never ran: {inst and list(inst.events)}")


async def _switched_on(runtime: Runtime, tmp_path: Path, docker: Any) -> tuple[str, str]:
    """ada's escape connector running in her container; (her id, the container)."""
    created = await runtime.core.users.create("ada", PASSWORD, "admin")
    ada = created.user.id
    c = service.require(runtime.plugins)
    c.config = msgspec.structs.replace(c.config, feed=str(escape_feed(tmp_path / "feed")))
    await c.installer.install(c.feed(), "escape")
    await c.store.set_active("escape", ada, True)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    await _running(runtime, ada, "escape")
    assert runtime.sandbox is not None
    container = await runtime.sandbox.container_id(ada)
    assert container is not None
    # The escapee is there, in a session of its own, while the connector runs.
    await _until(lambda: "sleep 1000" in leftovers(docker, container))
    return ada, container


async def _until(check: Any, seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not await asyncio.to_thread(check):  # noqa: ASYNC110 - polls a container
            await asyncio.sleep(0.2)


async def test_switching_a_connector_off_kills_every_process_it_started_in_the_container(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    ada, container = await _switched_on(sandbox_runtime, tmp_path, docker)
    await service.require(sandbox_runtime.plugins).deactivate("escape", ada)
    # Synchronous: nothing is left when the switch-off returns.
    assert await asyncio.to_thread(leftovers, docker, container) == []


async def test_locking_kills_every_process_the_members_connectors_started(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    ada, container = await _switched_on(sandbox_runtime, tmp_path, docker)
    await sandbox_runtime.lock(ada)
    assert await asyncio.to_thread(leftovers, docker, container) == []


def test_after_a_kill_9_the_next_start_kills_what_the_connector_left_in_the_container(
    tmp_path: Path,
) -> None:
    docker = docker_client()
    srv = ServerProcess(tmp_path, SKALD_SANDBOX_ENABLED="true", SKALD_SANDBOX_MEMORY_MB="512")
    srv.create_admin()
    feed = escape_feed(tmp_path / "feed")
    (srv.data / "config.toml").write_text(f"[connectors]\nfeed = {json.dumps(str(feed))}\n")
    srv.start()
    try:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        assert admin.post("/api/marketplace/escape/install", json={}).status_code in (200, 201)
        assert admin.post("/api/connectors/escape/activate", json={}).status_code == 200
        instance = read_instance_id(DataLayout(srv.data).system_db)
        admin_id = next(
            u["id"]
            for u in json.loads(srv.cli("user", "list", "--json").stdout)
            if u["username"] == ADMIN
        )
        name = f"skald-{instance}-{admin_id}"
        _wait_for(lambda: "sleep 1000" in _safe_leftovers(docker, name), timeout=120)
        srv.stop(signal.SIGKILL)
        # The crash killed nothing in the container: the escapee runs on, unowned.
        assert "sleep 1000" in leftovers(docker, name)
        srv.start()  # nobody signs in: the start alone sweeps
        _wait_for(lambda: leftovers(docker, name) == [], timeout=60)
    finally:
        srv.close()
        instance = read_instance_id(DataLayout(srv.data).system_db)
        try:
            if instance is not None:
                remove_instance_containers(docker, instance)
        finally:
            docker.close()


def _safe_leftovers(docker: Any, name: str) -> list[str]:
    try:
        return leftovers(docker, name)
    except NotFound:  # the container is being made
        return []
