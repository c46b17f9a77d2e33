"""What the sandbox tests share: a reachable Docker with the built runtime image (or a
failure under CI, a skip with the reason elsewhere), and Skald runtimes whose containers
are removed after each test (found by this test's instance label only)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD, TEST_ENV
from prerequisites import unavailable

from skald.assets import asset_dir
from skald.config import SandboxConfig, load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.client import DockerUnavailable, connect
from skald.sandbox.execute import CommandResult, run_command
from skald.sandbox.image import has_image, image_tag
from skald.sandbox.manager import LABEL_INSTANCE, SandboxManager
from skald.store.rows import Role, User
from skald.store.snapshot import read_instance_id

SANDBOX_ENV = {**TEST_ENV, "SKALD_SANDBOX_ENABLED": "true", "SKALD_SANDBOX_MEMORY_MB": "512"}


def _unavailable(reason: str) -> None:
    unavailable(f"Docker is required: {reason}")


def docker_client() -> Any:
    """A Docker client with the runtime image present, or fail (CI) / skip."""
    try:
        client = connect(os.environ.get("DOCKER_HOST", ""))
    except DockerUnavailable as exc:
        _unavailable(str(exc))
    tag = image_tag()
    if not has_image(client, tag):
        client.close()
        _unavailable(f"the runtime image {tag} is not built (run `skald image build`)")
    return client


def remove_instance_containers(client: Any, instance_id: str) -> None:
    for container in client.containers.list(
        all=True, filters={"label": f"{LABEL_INSTANCE}={instance_id}"}
    ):
        container.remove(force=True)
    for network in client.networks.list(filters={"label": f"{LABEL_INSTANCE}={instance_id}"}):
        network.remove()


def remove_server_containers(docker: Any, data: Path, settle_s: float = 1.0) -> None:
    """After a server process stopped or was killed: its instance's containers and networks
    removed, and again `settle_s` later. A container the server asked for just before it
    died is still being made by the daemon and lands after the first pass (it was left
    behind once in ten CI runs)."""
    instance = read_instance_id(DataLayout(data).system_db)
    if instance is None:
        return
    remove_instance_containers(docker, instance)
    time.sleep(settle_s)
    remove_instance_containers(docker, instance)


async def wait_for(predicate: Any, seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not await predicate():  # noqa: ASYNC110 - polls state outside this loop
            await asyncio.sleep(0.1)


# Registered under their short names; test modules import the `*_fixture` names.
@pytest.fixture(name="docker")
def docker_fixture() -> Any:
    client = docker_client()
    yield client
    client.close()


@pytest.fixture(name="sandbox_runtime")
async def sandbox_runtime_fixture(tmp_path: Path, docker: Any) -> AsyncIterator[Runtime]:
    """A booted runtime with the sandbox on, its watcher polling fast."""
    layout = DataLayout(tmp_path / "data")
    rt = await Runtime.boot(layout, load_config(layout.root, SANDBOX_ENV), announce=io.StringIO())
    async with sandbox_ready(rt, docker):
        yield rt


@contextlib.asynccontextmanager
async def sandbox_ready(rt: Runtime, docker: Any) -> AsyncIterator[None]:
    """For the block: `rt` (booted with the sandbox on) once its sandbox is ready, its
    watcher polling fast; then `rt` is shut down and its containers removed."""
    assert rt.sandbox is not None
    rt.sandbox.poll_s = 0.3
    instance = rt.sandbox.instance_id
    try:
        await wait_for(_ok(rt.sandbox), 30)
        yield
    finally:
        await rt.shutdown()
        await asyncio.to_thread(remove_instance_containers, docker, instance)


async def new_member_container(
    rt: Runtime, name: str, role_name: str = "member"
) -> tuple[User, Role, str]:
    """A new account `name` in `role_name`, and its container, made: (its row, its role,
    the container's id)."""
    assert rt.sandbox is not None
    created = await rt.core.users.create(name, PASSWORD, role_name)
    user, role = await rt.member(created.user.id)
    return user, role, await rt.sandbox.ensure(user, role)


async def run_in_sandbox(rt: Runtime, user_id: str, command: str, **kw: Any) -> CommandResult:
    """`command` in the member's container (made if need be), from her home; 30 s and
    64 KiB of output unless `kw` says otherwise."""
    assert rt.sandbox is not None
    user, role = await rt.member(user_id)
    cid = await rt.sandbox.ensure(user, role)
    kw.setdefault("workdir", "/home/skald")
    kw.setdefault("timeout_s", 30)
    kw.setdefault("max_bytes", 65536)
    return await run_command(rt.sandbox, cid, command, **kw)


@pytest.fixture(name="with_sandbox")
async def with_sandbox_fixture(runtime: Runtime) -> Runtime:
    """The runtime with a sandbox manager that never reaches Docker: enough for the tool
    set and the prompt to offer `execute_cmd`, for a test of what is offered (a command
    that got as far as the sandbox would fail, not be refused)."""
    runtime.sandbox = SandboxManager(
        runtime.config.sandbox,
        instance_id="offline",
        homes_dir=runtime.core.layout.homes_dir,
        docs_dir=asset_dir("docs"),
        members=runtime._sandbox_members,
    )
    return runtime


@contextlib.asynccontextmanager
async def as_service_account(
    rt: Runtime, docker: Any, homes: Path, suffix: str
) -> AsyncIterator[tuple[SandboxManager, str, str]]:
    """A new member, ada, in her container of a second sandbox manager (instance id: the
    runtime's and `suffix`; homes under `homes`) that runs members as uid 4321, as an
    installed service account does, not as root: (the manager, her id, the container's).
    Its containers are removed and it is closed afterwards."""
    assert rt.sandbox is not None
    created = await rt.core.users.create("ada", PASSWORD, "member")
    user, role = await rt.member(created.user.id)

    async def members() -> list[Any]:
        return [(user, role)]

    manager = SandboxManager(
        SandboxConfig(memory_mb=256),
        instance_id=f"{rt.sandbox.instance_id}{suffix}",
        homes_dir=homes,
        docs_dir=rt.sandbox.docs_dir,
        members=members,
        uid=4321,
        gid=4321,
    )
    try:
        assert await manager.check()
        await asyncio.to_thread(manager._prepare_host_dirs, manager.spec_for(user, role))
        os.chown(homes / user.id, 4321, 4321)
        yield manager, user.id, await manager.ensure(user, role)
    finally:
        # Closed first: `close` waits for a container being made, which would otherwise
        # land after the removal and outlive the test.
        await manager.close()
        await asyncio.to_thread(remove_instance_containers, docker, manager.instance_id)


def _ok(manager: SandboxManager) -> Any:
    async def check() -> bool:
        return manager.state == "ok" and manager.reconciled > 0

    return check
