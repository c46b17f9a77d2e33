"""Sandboxes and the host's own services (issue 20 item 13): a sandbox reaches the host
through its network's gateway, so Skald's own server refuses requests from the
sandboxes' address pool (unless `[sandbox] allow_skald_access`), and `skald doctor`
lists the other services that listen on all addresses."""

from __future__ import annotations

import io
import ipaddress
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from conftest import TEST_ENV
from harness import ServerProcess
from sandbox_support import docker_client, remove_server_containers

from skald.api.app import create_asgi
from skald.api.security import EdgeMiddleware
from skald.config import Config, load_config
from skald.core.runtime import Runtime
from skald.ops import checks_base, checks_host
from skald.paths import DataLayout
from skald.sandbox.manager import LABEL_INSTANCE
from skald.store.snapshot import read_instance_id

IN_POOL = ["10.213.0.2", "10.213.255.14", "::ffff:10.213.4.18"]
OUTSIDE = ["127.0.0.1", "192.168.1.20", "10.214.0.2", "::1"]


async def _status(app: Any, client: str, path: str = "/api/health") -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=(client, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        return await http.get(path)


async def test_skalds_own_server_refuses_the_sandboxes_addresses_and_serves_every_other(
    runtime: Runtime,
) -> None:
    app = create_asgi(runtime)
    for client in IN_POOL:
        r = await _status(app, client)
        assert r.status_code == 403, (client, r.text)
        assert r.json()["error"]["code"] == "from_sandbox"
        assert "allow_skald_access" in r.json()["error"]["message"]
        assert r.headers["x-frame-options"] == "DENY"  # an answer of ours, headers and all
        assert (await _status(app, client, "/")).status_code == 403  # the static UI too
    for client in OUTSIDE:
        assert (await _status(app, client)).status_code == 200, client


async def test_the_websocket_refuses_the_sandboxes_addresses_too(runtime: Runtime) -> None:
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "websocket.accept"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    edge = EdgeMiddleware(app, refused=ipaddress.IPv4Network(runtime.config.sandbox.subnet_pool))
    scope = {"type": "websocket", "path": "/api/ws", "headers": [], "client": ("10.213.0.2", 1)}
    await edge(scope, receive, send)
    assert sent == [{"type": "websocket.close", "code": 4403, "reason": "from a sandbox"}]
    sent.clear()
    await edge({**scope, "client": ("127.0.0.1", 1)}, receive, send)
    assert sent == [{"type": "websocket.accept"}]


async def test_an_administrator_can_let_the_sandboxes_reach_skald(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    env = {**TEST_ENV, "SKALD_SANDBOX_ALLOW_SKALD_ACCESS": "true"}
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    try:
        assert (await _status(create_asgi(rt), IN_POOL[0])).status_code == 200
    finally:
        await rt.shutdown()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP service listening on every address (0.0.0.0), as a printer's or NAS's would."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))  # noqa: S104 - the point of the test
        s.listen()
        yield int(s.getsockname()[1])


async def test_the_doctor_lists_host_services_listening_on_all_addresses(
    tmp_path: Path, listener: int
) -> None:
    with socket.socket() as local:
        local.bind(("127.0.0.1", 0))
        local.listen()
        loopback_only = int(local.getsockname()[1])
        ctx = checks_base.Context(layout=DataLayout(tmp_path), config=Config(), environ={})
        found = await checks_host.check_host_listeners(ctx)
    assert found.status == "warn" and found.fix is not None, found
    assert str(listener) in found.finding.replace(",", " ").split()
    assert str(loopback_only) not in found.finding.replace(",", " ").split()
    assert "10.213.0.0/16" in found.fix

    # Skald's own port is left out while Skald refuses the sandboxes itself.
    server = msgspec.structs.replace(Config().server, port=listener)
    own = msgspec.structs.replace(Config(), server=server)
    ctx = checks_base.Context(layout=DataLayout(tmp_path), config=own, environ={})
    assert str(listener) not in (await checks_host.check_host_listeners(ctx)).finding.split()
    allowed = msgspec.structs.replace(
        own, sandbox=msgspec.structs.replace(own.sandbox, allow_skald_access=True)
    )
    ctx = checks_base.Context(layout=DataLayout(tmp_path), config=allowed, environ={})
    found = await checks_host.check_host_listeners(ctx)
    assert str(listener) in found.finding.replace(",", " ").split()


@pytest.mark.docker
def test_a_real_sandbox_cannot_reach_skald_through_its_gateway_while_loopback_can(
    tmp_path: Path,
) -> None:
    docker = docker_client()
    srv = ServerProcess(
        tmp_path,
        host="0.0.0.0",  # noqa: S104 - the default `server.host`, the case in question
        SKALD_SANDBOX_ENABLED="true",
        SKALD_SANDBOX_MEMORY_MB="512",
    )
    try:
        srv.create_admin()
        srv.add_user("ada", "ada's long password")
        srv.start()
        instance = read_instance_id(DataLayout(srv.data).system_db)
        container = _running_sandbox(docker, instance)
        network = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))
        gateway = network["Gateway"]
        assert gateway.startswith("10.213.")
        code = container.exec_run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
                f"http://{gateway}:{srv.port}/api/health",
            ],
            user="65534:65534",
        )
        assert code.output.decode() == "403", code
        assert httpx.get(f"{srv.url}/api/health", timeout=10).status_code == 200
    finally:
        srv.close()
        remove_server_containers(docker, srv.data)
        docker.close()


def _running_sandbox(docker: Any, instance: str | None) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = docker.containers.list(filters={"label": f"{LABEL_INSTANCE}={instance}"})
        if found and found[0].attrs["NetworkSettings"]["Networks"]:
            return found[0]
        time.sleep(0.3)
    raise AssertionError("the server made no sandbox for the member")
