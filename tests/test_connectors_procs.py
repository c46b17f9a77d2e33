"""Nothing a connector started outlives it: a real container, a real MCP server
(tests/mcp_servers/escape_server.py) that leaves `env -i setsid sleep 1000` behind as a
grandchild at start. After switching the connector off, after the member locks, and after
a kill -9 of the server and a new start, no process of the connector is left."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from connector_support import python_connector, switched_on
from connector_support import running as until_running
from docker.errors import NotFound
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, wait_until
from sandbox_support import (  # noqa: F401
    docker_client,
    docker_fixture,
    remove_server_containers,
    sandbox_runtime_fixture,
)

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
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


async def _switched_on(runtime: Runtime, tmp_path: Path, docker: Any) -> tuple[str, str]:
    """ada's escape connector running in her container; (her id, the container)."""
    created = await runtime.core.users.create("ada", PASSWORD, "admin")
    ada = created.user.id
    await switched_on(runtime, ada, escape_feed(tmp_path / "feed"), "escape")
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    await until_running(runtime, ada, "escape", 60)
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


def docker_clients_of_this_process() -> list[str]:
    """`docker` client processes this process started (each holds about 24 MiB)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == os.getpid() and argv[0].rsplit(b"/", 1)[-1] == b"docker":
            found.append(b" ".join(argv).decode(errors="replace"))
    return found


async def test_a_connector_in_the_members_container_keeps_no_docker_client_on_the_host(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    ada, _ = await _switched_on(sandbox_runtime, tmp_path, docker)
    inst = service.require(sandbox_runtime.server).supervisor.instances[(ada, "escape")]
    assert inst.session is not None
    # Its stdio is a Docker API stream: no process of ours stands for it.
    assert inst.session.transport.pid is None  # type: ignore[attr-defined]
    assert await asyncio.to_thread(docker_clients_of_this_process) == []
    # It answers through that stream, with the environment its manifest gives it.
    hello = await inst.session.call_tool("hello", {})
    assert hello.text() == "hello from escape", hello
    peek = await inst.session.call_tool("peek", {"paths": []})
    own = next(line for line in peek.text().splitlines() if "ESCAPE" in line)
    assert "HOME" in own, peek.text()


async def test_switching_a_connector_off_kills_every_process_it_started_in_the_container(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    ada, container = await _switched_on(sandbox_runtime, tmp_path, docker)
    await service.require(sandbox_runtime.server).deactivate("escape", ada)
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
        wait_until(lambda: "sleep 1000" in _safe_leftovers(docker, name), 120)
        srv.stop(signal.SIGKILL)
        # The crash killed nothing in the container: the escapee runs on, unowned.
        assert "sleep 1000" in leftovers(docker, name)
        srv.start()  # nobody signs in: the start alone sweeps
        wait_until(lambda: leftovers(docker, name) == [], 60)
    finally:
        srv.close()
        try:
            remove_server_containers(docker, srv.data)
        finally:
            docker.close()


def _safe_leftovers(docker: Any, name: str) -> list[str]:
    try:
        return leftovers(docker, name)
    except NotFound:  # the container is being made
        return []


# A local package whose build (an in-tree PEP 517 backend: nothing to download) stalls
# the first time, until killed; the second time it builds at once.
_BACKEND = """
import os, time, zipfile

FLAG = os.path.expanduser("~/slow-install-started")


def get_requires_for_build_wheel(config_settings=None):
    if not os.path.exists(FLAG):
        open(FLAG, "w").close()
        time.sleep(600)
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "slowpkg-1.0-py3-none-any.whl"
    info = "slowpkg-1.0.dist-info/"
    files = {
        "slowpkg.py": "",
        info + "METADATA": "Metadata-Version: 2.1\\nName: slowpkg\\nVersion: 1.0\\n",
        info + "WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(info + "RECORD", "".join(f"{p},,\\n" for p in [*files, info + "RECORD"]))
    return name
"""


def slow_deps_feed(root: Path, names: tuple[str, ...] = ("slowdeps",)) -> Path:
    """Connectors with the same requirements (so the same dependency folder)."""
    for name in names:
        folder = python_connector(
            root, name, "escape_server.py", extra={**PERSONAL, "dependencies": "pip"}
        )
        pkg = folder / "slowpkg"
        pkg.mkdir()
        (pkg / "slowbackend.py").write_text(_BACKEND)
        (pkg / "pyproject.toml").write_text(
            '[build-system]\nrequires = []\nbuild-backend = "slowbackend"\nbackend-path = ["."]\n'
        )
        (pkg / "__init__.py").write_text("")
        (folder / "requirements.txt").write_text("./slowpkg\n")
    write_index(root, 1)
    return root


def installing(docker: Any, container: str) -> list[str]:
    """The install's processes in the container (pip, its build backend, the lock)."""
    out = docker.containers.get(container).exec_run(["ps", "-eww", "-o", "args"]).output
    return [
        line.strip()
        for line in out.decode().splitlines()
        if "pip install" in line or "_in_process" in line or "flock" in line
    ]


def started(docker: Any, container: str) -> bool:
    probe = ["test", "-e", "/home/skald/slow-install-started"]
    return bool(docker.containers.get(container).exec_run(probe).exit_code == 0)


async def _install_started(runtime: Runtime, ada: str, docker: Any) -> str:
    """ada's data unlocked; her container, once the install of her connectors' dependencies
    has started in it."""
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    assert runtime.sandbox is not None
    container = None
    async with asyncio.timeout(120):
        while container is None:
            container = await runtime.sandbox.container_id(ada)
            await asyncio.sleep(0.2)
    await _until(lambda: started(docker, container), seconds=120)
    return container


async def test_an_install_cut_by_a_lock_is_killed_in_the_container_and_the_next_one_finishes(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    runtime = sandbox_runtime
    ada = (await runtime.core.users.create("ada", PASSWORD, "admin")).user.id
    c = await switched_on(runtime, ada, slow_deps_feed(tmp_path / "feed"), "slowdeps")
    container = await _install_started(runtime, ada, docker)
    assert await asyncio.to_thread(installing, docker, container) != []
    # The member locks mid-install: the install dies with her instance, in the container.
    await runtime.lock(ada)
    assert await asyncio.to_thread(installing, docker, container) == []
    # Signing in again installs afresh (no leftover writes into its staging folder).
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    await until_running(runtime, ada, "slowdeps", 60)
    deps_hash = (await c.store.require("slowdeps")).manifest["_deps_hash"]
    ready = ["test", "-e", f"/home/skald/.skald/connectors/deps/{deps_hash}/.ready"]
    assert docker.containers.get(container).exec_run(ready).exit_code == 0


async def test_two_installs_of_one_dependency_folder_take_turns_under_its_lock(
    sandbox_runtime: Runtime, tmp_path: Path, docker: Any
) -> None:
    runtime = sandbox_runtime
    names = ("slowdeps", "slowtwin")
    ada = (await runtime.core.users.create("ada", PASSWORD, "admin")).user.id
    c = await switched_on(runtime, ada, slow_deps_feed(tmp_path / "feed", names), *names)
    hashes = {(await c.store.require(n)).manifest["_deps_hash"] for n in names}
    assert len(hashes) == 1  # the same requirements: one folder
    container = await _install_started(runtime, ada, docker)

    def both_at_the_lock() -> bool:
        return sum(line.startswith("flock") for line in installing(docker, container)) >= 2

    # The second install waits at the lock while the first builds: one pip, no .ready.
    await _until(both_at_the_lock, seconds=60)
    running = installing(docker, container)
    assert sum(line.startswith("python3 -m pip install") for line in running) == 1
    ready = ["test", "-e", f"/home/skald/.skald/connectors/deps/{hashes.pop()}/.ready"]
    assert docker.containers.get(container).exec_run(ready).exit_code != 0
    await runtime.lock(ada)
    assert await asyncio.to_thread(installing, docker, container) == []
    # Next time one installs, the other finds it done; both run.
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    for name in names:
        await until_running(runtime, ada, name, 60)
    assert docker.containers.get(container).exec_run(ready).exit_code == 0
