"""A household connector runs in a container of its own, not as Skald's account on the
host: a real MCP server (tests/mcp_servers/escape_server.py) that tries to read the
instance key, a member's database and every other process's environment finds none of
them, not even the secret variable of another household connector; its tools work; its
box goes when it stops, and a box left by a crash goes at the next start's reconcile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD, Client, signed_in
from connector_support import python_connector, switched_on
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.household_box import BOX_SCRATCH_MB, LABEL_CONNECTOR
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.supervisor import ConnectorInstance, Supervisor
from skald.sandbox.manager import LABEL_INSTANCE
from skald.sandbox.procs import new_mark

TOKEN = "keeper-token-4f1c9a"
SERVER = ["python3", "{DIR}/escape_server.py"]


def _feed(root: Path) -> Path:
    python_connector(root, "spy", "escape_server.py", extra={"command": SERVER, "network": False})
    python_connector(
        root, "keeper", "escape_server.py", extra={"command": SERVER, "env": {"KEEPER": TOKEN}}
    )
    write_index(root, 1)
    return root


async def test_the_marketplace_says_in_plain_words_what_a_household_connector_can_reach(
    runtime: Runtime,
    make_client: Callable[[], Awaitable[Client]],
    household: dict[str, str],
    tmp_path: Path,
) -> None:
    feed = _feed(tmp_path / "feed")
    python_connector(feed, "mine", "escape_server.py", extra={"scope": "personal"})
    write_index(feed, 1)
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(feed))
    mum = await signed_in(make_client, "mum")
    items = {i["folder"]: i for i in (await mum.call("GET", "/api/marketplace")).json()}
    assert {k: i["reach"] for k, i in items.items()} == {
        "keeper": "box_network",
        "spy": "box_offline",
        "mine": "personal",
    }
    # The operator's choice to run them on the host is said as plainly.
    c.config = ConnectorsConfig(feed=str(feed), household_on_host=True)
    items = {i["folder"]: i for i in (await mum.call("GET", "/api/marketplace")).json()}
    assert items["spy"]["reach"] == "host"
    # A member sees the same words on the connector's card.
    await c.installer.install(c.feed(), "spy")
    ada = await signed_in(make_client, "ada")
    [card] = (await ada.call("GET", "/api/connectors")).json()
    assert card["reach"] == "host"
    en = json.loads(
        (Path(__file__).parents[1] / "skald/features/connectors/i18n/en.json").read_text()
    )
    assert "all of the household's data" in en["marketplace.reach_host"]
    assert "none of the household's data" in en["marketplace.reach_box_offline"]


async def _running(sup: Supervisor, name: str) -> ConnectorInstance:
    inst = None
    for _ in range(600):
        inst = sup.instances.get(("", name))
        if inst is not None and inst.state == "running" and inst.session is not None:
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never ran: {inst and list(inst.events)}")


async def _two_running(runtime: Runtime, tmp_path: Path) -> tuple[Supervisor, str]:
    created = await runtime.core.users.create("ada", PASSWORD, "admin")
    c = await switched_on(runtime, created.user.id, _feed(tmp_path / "feed"), "spy", "keeper")
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    assert c.supervisor is not None
    await _running(c.supervisor, "spy")
    await _running(c.supervisor, "keeper")
    return c.supervisor, created.user.id


async def _text(inst: ConnectorInstance, tool: str, args: dict[str, Any]) -> str:
    assert inst.session is not None
    result = await inst.session.call_tool(tool, args, timeout=30)
    return "\n".join(getattr(part, "text", "") for part in result.content)


def _boxes(docker: Any, instance: str) -> list[Any]:
    labels = [f"{LABEL_INSTANCE}={instance}", LABEL_CONNECTOR]
    return list(docker.containers.list(all=True, filters={"label": labels}))


@pytest.mark.docker
async def test_a_household_connector_sees_neither_the_data_directory_nor_other_connectors(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    runtime = sandbox_runtime
    sup, ada = await _two_running(runtime, tmp_path)
    spy = sup.instances[("", "spy")]
    assert await _text(spy, "hello", {}) == "hello from escape"  # its tools work
    layout = runtime.core.layout
    secrets = [str(layout.instance_key), str(layout.system_db), str(layout.root)]
    seen = await _text(spy, "peek", {"paths": secrets})
    for path in secrets:
        assert f"denied {path}" in seen, seen
    # The keeper's declared variable is in the keeper's process alone: no process the spy
    # can see carries it (on the host, /proc/<pid>/environ of the service's user showed it).
    keeper = sup.instances[("", "keeper")]
    assert "KEEPER" in await _text(keeper, "peek", {"paths": []})
    assert "KEEPER" not in seen, seen
    # It cannot fill the disk: the root is read-only, its scratch places are small.
    assert "errno 30" in await _text(spy, "fill", {"path": "/var/tmp/big", "mib": 1})
    assert "errno 30" in await _text(spy, "fill", {"path": "/connector/big", "mib": 1})
    for scratch in ("/tmp/big", "/home/skald/big"):
        said = await _text(spy, "fill", {"path": scratch, "mib": BOX_SCRATCH_MB + 16})
        assert said.startswith("stopped after") and "errno 28" in said, said
    # What the boxes are: only the connector's own folder, read-only; no network for the
    # spy, a network of its own for the keeper (never the member's).
    assert runtime.sandbox is not None
    for box in _boxes(docker, runtime.sandbox.instance_id):
        mounts = box.attrs["Mounts"]
        assert [m["Destination"] for m in mounts] == ["/connector"], mounts
        assert all(not m["RW"] for m in mounts)
        assert str(layout.root / "connectors") in mounts[0]["Source"]
        networks = set(box.attrs["NetworkSettings"]["Networks"])
        if box.labels[LABEL_CONNECTOR] == "spy":
            assert networks == {"none"}
        else:
            assert networks == {f"{box.name}-net"}
            assert runtime.sandbox.network_name(ada) not in networks


@pytest.mark.docker
async def test_stopping_a_household_connector_removes_its_container_and_network(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    runtime = sandbox_runtime
    sup, _ = await _two_running(runtime, tmp_path)
    assert runtime.sandbox is not None
    instance = runtime.sandbox.instance_id
    assert {b.labels[LABEL_CONNECTOR] for b in _boxes(docker, instance)} == {"spy", "keeper"}
    await sup.stop_all("spy")  # uninstall
    assert {b.labels[LABEL_CONNECTOR] for b in _boxes(docker, instance)} == {"keeper"}
    await sup.stop_everything()  # shutdown
    assert _boxes(docker, instance) == []
    labels = [f"{LABEL_INSTANCE}={instance}", LABEL_CONNECTOR]
    assert docker.networks.list(filters={"label": labels}) == []


@pytest.mark.docker
async def test_a_box_left_by_a_crash_is_removed_at_the_next_start(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    runtime = sandbox_runtime
    await _two_running(runtime, tmp_path)
    manager = runtime.sandbox
    assert manager is not None
    labels = [f"{LABEL_INSTANCE}={manager.instance_id}", LABEL_CONNECTOR]
    boxes = {b.id for b in _boxes(docker, manager.instance_id)}
    networks = {n.id for n in docker.networks.list(filters={"label": labels})}
    assert len(boxes) == 2 and len(networks) == 1
    # This start's boxes are no member's sandboxes, yet a reconcile leaves them alone.
    await manager.reconcile()
    assert {b.id for b in _boxes(docker, manager.instance_id)} == boxes
    assert {n.id for n in docker.networks.list(filters={"label": labels})} == networks
    # A new server start: a new boot mark, then the reconcile every start runs. The
    # crashed start's boxes and their network are nobody's now (the supervisor here
    # makes new ones for its running instances: those are not the old ones).
    manager.boot_mark = new_mark(manager.boot_mark)
    await manager.reconcile()
    assert not boxes & {b.id for b in _boxes(docker, manager.instance_id)}
    assert not networks & {n.id for n in docker.networks.list(filters={"label": labels})}
    # The member's own sandbox is not a box: it stays.
    assert await manager.container_id(next(iter(runtime.user_runtimes))) is not None
