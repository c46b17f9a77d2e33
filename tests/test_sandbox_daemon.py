"""The Docker daemon goes away and comes back: Skald keeps serving, says "degraded" with
the reason, and puts every member's container back once the daemon answers again.

This test stops the machine's dockerd (the one ci/test.sh started) and starts it again,
restoring it even when it fails. It runs only as root with the default socket."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from prerequisites import unavailable
from sandbox_support import docker_fixture, sandbox_runtime_fixture, wait_for  # noqa: F401

from skald.core.runtime import Runtime
from skald.sandbox.client import DockerUnavailable, connect

pytestmark = pytest.mark.docker

PIDFILE = Path("/var/run/docker.pid")
LOG = Path("/var/log/dockerd.log")


def _dockerd_pid() -> int | None:
    try:
        pid = int(PIDFILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _start_dockerd() -> None:
    with LOG.open("ab") as log:
        subprocess.Popen(
            ["dockerd"],  # the one on PATH, as ci/test.sh starts it
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this test, like the original
        )


def _wait_docker(up: bool, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            connect(timeout_s=3).close()
            reachable = True
        except DockerUnavailable:
            reachable = False
        if reachable == up:
            return
        time.sleep(0.2)
    raise TimeoutError(f"dockerd did not become {'reachable' if up else 'unreachable'}")


@pytest.fixture
def restartable_dockerd() -> Any:
    reason = None
    if os.geteuid() != 0:
        reason = "restarting dockerd needs root"
    elif os.environ.get("DOCKER_HOST"):
        reason = "DOCKER_HOST points elsewhere: not restarting that daemon"
    elif _dockerd_pid() is None:
        reason = f"no dockerd found through {PIDFILE}"
    if reason is not None:
        unavailable(reason)
    yield
    # Whatever happened, leave a running daemon for the tests after this one.
    if _dockerd_pid() is None:
        _start_dockerd()
    _wait_docker(True)


async def test_daemon_restart_degrades_then_reconciles(
    restartable_dockerd: None, sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user
    user, role = await rt.member(ada.id)
    before = await rt.sandbox.ensure(user, role)

    pid = _dockerd_pid()
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    await asyncio.to_thread(_wait_docker, False)
    await wait_for(_gone(pid), 60)

    async def degraded() -> bool:
        return rt.health()[0] == "degraded" and rt.docker_state == "unreachable"

    await wait_for(degraded, 20)
    assert any("sandboxes unavailable" in r for r in rt.health()[1])
    reconciled = rt.sandbox.reconciled

    await asyncio.to_thread(_start_dockerd)
    await asyncio.to_thread(_wait_docker, True)

    async def healthy_again() -> bool:
        return (
            rt.health()[0] == "ok"
            and rt.sandbox is not None
            and (rt.sandbox.reconciled > reconciled)
        )

    await wait_for(healthy_again, 60)
    container = docker.containers.get(rt.sandbox.container_name(ada.id))
    assert container.status == "running"
    assert container.id == before  # the same container, back up, not a new one


def _gone(pid: int) -> Any:
    async def check() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    return check
