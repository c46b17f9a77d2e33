"""The reference server `@modelcontextprotocol/server-everything` (npm) as a connector:
over streamable HTTP on the host, and over stdio inside a member's container (the
default feed's entry, its dependencies installed in the container), each called by a
scripted chat turn."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD, add_models
from connector_support import running, switched_on
from fake_llm import Call, FakeLLM
from prerequisites import unavailable
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.install import Installer
from skald.features.connectors.service import DEFAULT_FEED

CACHE = Path(os.environ.get("SKALD_TEST_CACHE", Path.home() / ".cache" / "skald-tests"))


@pytest.fixture(scope="module")
def everything_js() -> Path:
    """server-everything's entry file, installed by the product's own host installer
    (npm ci by content hash) into a cache kept between runs."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        unavailable("node and npm are required for server-everything")
    folder = DEFAULT_FEED / "everything"
    files = {n: (folder / n).read_bytes() for n in ("package.json", "package-lock.json")}
    deps = asyncio.run(
        Installer(None, CACHE / "connectors").install_deps_on_host("npm", files)  # type: ignore[arg-type]
    )
    return (
        deps / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def everything_http(everything_js: Path) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        ["node", str(everything_js), "streamableHttp"],
        env={"PATH": os.environ["PATH"], "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail("server-everything exited at start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def _echo_turn(runtime: Runtime, ada: str, fake: FakeLLM) -> str:
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:everything", None, "allow", 5, "test server"), create=True
    )
    await add_models(runtime, fake, "m")
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake.script("m", [[Call("mcp__everything__echo", {"message": "hello there"})], "echoed"])
    sent = await svc.send(ada, conversation.id, "echo something")
    assert isinstance(sent, Sent)
    assert (await svc.wait(ada, sent)).reply == "echoed"
    return [
        m.get("content") or "" for m in fake.bodies()[-1]["messages"] if m.get("role") == "tool"
    ][-1]


async def test_server_everything_over_streamable_http_on_the_host(
    runtime: Runtime,
    household: dict[str, str],
    fake_llm: FakeLLM,
    everything_http: str,
    tmp_path: Path,
) -> None:
    feed = tmp_path / "feed"
    (feed / "everything").mkdir(parents=True)
    (feed / "everything" / "connector.json").write_text(
        json.dumps(
            {
                "name": "everything",
                "transport": "http",
                "url": everything_http,
                "scope": "household",
            }
        )
    )
    write_index(feed, 1)
    ada = household["ada"]
    await switched_on(runtime, ada, feed, "everything")
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    inst = await running(runtime, "", "everything", 60)
    # Listed across pages: more tools than one page of the server holds.
    assert len(inst.tools) >= 10 and "mcp__everything__echo" in {s.name for s in inst.specs}
    assert "hello there" in await _echo_turn(runtime, ada, fake_llm)


@pytest.mark.docker
async def test_server_everything_over_stdio_inside_the_members_container(
    sandbox_runtime: Runtime, fake_llm: FakeLLM, docker: Any
) -> None:
    runtime = sandbox_runtime
    ada = (await runtime.core.users.create("ada", PASSWORD, "member")).user.id
    # This machine's network inspects TLS: its CA reaches the install in the container.
    ca = os.environ.get("NODE_EXTRA_CA_CERTS") or os.environ.get("SSL_CERT_FILE") or ""
    await switched_on(runtime, ada, DEFAULT_FEED, "everything", extra_ca_file=ca)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    inst = await running(runtime, ada, "everything", seconds=600)
    assert "mcp__everything__echo" in {s.name for s in inst.specs}
    # The process runs in the container (docker exec), not as a node process of ours.
    assert inst.session is not None
    argv: list[str] = inst.session.transport.argv  # type: ignore[attr-defined]
    assert argv[:3] == ["docker", "exec", "-i"]
    assert runtime.sandbox is not None
    container_id = await runtime.sandbox.container_id(ada)
    assert container_id is not None and container_id in argv
    container = docker.containers.get(container_id)
    top = json.dumps(container.top(ps_args="-eww -o pid,args"))
    assert "server-everything" in top
    assert "hello there" in await _echo_turn(runtime, ada, fake_llm)
