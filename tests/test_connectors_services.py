"""Connector instances on the one background mechanism (issue 21): each is a service
(`connector:<name>`) of the server's runner (household) or the member's (personal), so
ordering, back-off and health are the runner's. A stdio server killed while it runs
comes back each time (a start that reached "running" starts the count afresh), the
health shows it while it restarts, and stopping it removes the service."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from connector_support import in_state, installed_for_ada, simple_feed

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.supervisor import ConnectorInstance


async def _running(runtime: Runtime, old_pid: int | None = None) -> ConnectorInstance:
    sup = service.require(runtime.server).supervisor
    assert sup is not None
    inst = None
    for _ in range(300):
        inst = sup.instances.get(("", "clock"))
        running = inst is not None and inst.state == "running" and inst.session is not None
        if inst is not None and running and _pid(inst) != old_pid:
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"clock never ran again: {inst and list(inst.events)}")


def _pid(inst: ConnectorInstance) -> int:
    assert inst.session is not None
    pid = inst.session.transport.pid  # type: ignore[attr-defined]
    assert isinstance(pid, int)
    return pid


async def test_a_killed_connector_comes_back_each_time_as_a_service_of_the_runner(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    # One failed start in a row is allowed: three deaths of a server that ran each time
    # must not add up to "failed".
    feed = simple_feed(tmp_path / "feed")
    await installed_for_ada(runtime, household, feed, "clock", max_restarts=1)
    c = service.require(runtime.server)
    inst = await _running(runtime)
    assert "connector:clock" in runtime.services
    health = {h.name: h.state for h in runtime.service_health()}
    assert health["connector:clock"] == "ok"

    for _ in range(3):
        pid = _pid(inst)
        os.kill(pid, signal.SIGKILL)
        inst = await _running(runtime, pid)
        assert _pid(inst) != pid and inst.state == "running"
    # Ran again: healthy at once (`ready`), not degraded for the runner's settle time.
    assert {h.name: h.state for h in runtime.service_health()}["connector:clock"] == "ok"
    assert runtime.health()[0] == "ok"

    # Stopping it (the last member switches it off) removes the service.
    sup = c.supervisor
    assert sup is not None
    await sup.stop_all("clock")
    assert "connector:clock" not in runtime.services
    assert inst.state == "stopped"


async def test_a_connector_that_keeps_failing_gives_up_and_its_service_says_why(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    broken = {"command": ["python3", "-c", "import sys; sys.exit(3)"]}
    feed = simple_feed(tmp_path / "feed", ("clock",), clock=broken)
    await installed_for_ada(runtime, household, feed, "clock", max_restarts=1)
    inst = await in_state(runtime, "", "clock", "failed")
    # Not restarted any more: the runner says it stopped, and why; nothing is degraded.
    [health] = [h for h in runtime.service_health() if h.name == "connector:clock"]
    assert health.state == "stopped" and health.reason is not None
    assert "exited with status 3" in health.reason
    assert inst.failures == 2 and runtime.health()[0] == "ok"
