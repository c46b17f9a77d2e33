"""What the sandbox tests share: a reachable Docker with the built runtime image (or a
failure under CI, a skip with the reason elsewhere), and Skald runtimes whose containers
are removed after each test (found by this test's instance label only)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_ENV
from prerequisites import unavailable

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.client import DockerUnavailable, connect
from skald.sandbox.image import has_image, image_tag
from skald.sandbox.manager import LABEL_INSTANCE, SandboxManager

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
    assert rt.sandbox is not None
    rt.sandbox.poll_s = 0.3
    instance = rt.sandbox.instance_id
    try:
        await wait_for(_ok(rt.sandbox), 30)
        yield rt
    finally:
        await rt.shutdown()
        await asyncio.to_thread(remove_instance_containers, docker, instance)


def _ok(manager: SandboxManager) -> Any:
    async def check() -> bool:
        return manager.state == "ok" and manager.reconciled > 0

    return check
