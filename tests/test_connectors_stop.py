"""When a connector must stop being usable, it stops at once, and nothing of it stays
behind (issue 32, items 1 and 3): a deactivated member's connectors are unusable by the
access rule itself, and stopping a household stdio connector kills its process group,
reaps the process and closes its pipes, also when the stop arrives while the instance
is closing a session politely. Real processes (tests/mcp_servers)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import PASSWORD
from connector_support import python_connector, simple_feed
from mcp_support import alive, child_env, settle

from skald.core.runtime import Runtime
from skald.errors import NotFoundError
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.supervisor import ConnectorInstance
from skald.mcp import StdioTransport

pytestmark = pytest.mark.timeout(120)


async def _setup(runtime: Runtime, household: dict[str, str], feed: Path, name: str) -> str:
    c = service.require(runtime.plugins)
    c.config = msgspec.structs.replace(c.config, feed=str(feed), household_on_host=True)
    await c.installer.install(c.feed(), name)
    await c.store.set_active(name, household["ada"], True)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    return household["ada"]


async def _running(runtime: Runtime, name: str) -> ConnectorInstance:
    sup = service.require(runtime.plugins).supervisor
    assert sup is not None
    inst = None
    for _ in range(300):
        inst = sup.instances.get(("", name))
        if inst is not None and inst.state == "running":
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never ran: {inst and list(inst.events)}")


def _pipes(transport: StdioTransport) -> set[str]:
    """The pipe ends this process holds to the server (`pipe:[inode]`)."""
    proc = transport._proc
    assert proc is not None
    found = set()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        pipe = stream._transport.get_extra_info("pipe")  # type: ignore[union-attr]
        found.add(str(Path(f"/proc/self/fd/{pipe.fileno()}").readlink()))
    return found


def _gone(pid: int) -> bool:
    """No such process, not even a zombie waiting to be reaped."""
    return not Path(f"/proc/{pid}").exists()


def _held() -> set[str]:
    out = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            out.add(str(fd.readlink()))
        except OSError:
            continue
    return out


async def test_a_deactivated_members_connectors_are_unusable_at_once(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    ada = await _setup(runtime, household, simple_feed(tmp_path / "feed"), "clock")
    await _running(runtime, "clock")
    c = service.require(runtime.plugins)
    sup = c.supervisor
    assert sup is not None
    mine = runtime.user_runtimes[ada]
    user, role = await mine.fetch_member()
    assert [x.name for x in await c.usable(user, role)] == ["clock"]
    assert any(t.name.startswith("mcp__clock__") for t in mine.all_tools())
    # Deactivated in the registry (what `skald user deactivate` writes, from another
    # process too): the access rule alone says no, whatever the role and grants say.
    await runtime.core.registry.set_active(ada, False)
    user, role = await mine.fetch_member()
    assert not user.active and role.name == "member"
    assert await c.usable(user, role) == []
    assert await c.active(user, role) == []
    with pytest.raises(NotFoundError):
        await c.require_usable(user, role, "clock")
    await sup.member_changed(ada)
    assert sup.wanted[ada] == set()
    assert not [t for t in mine.all_tools() if t.name.startswith("mcp__")]


async def test_stopping_a_household_stdio_connector_kills_its_group_and_reaps_it(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    # The connector starts a child of its own (same process group) before it serves.
    grandchild = tmp_path / "grandchild"
    feed = tmp_path / "feed"
    command = f"sleep 600 & echo $! > {grandchild}; exec {sys.executable} {{DIR}}/clock_server.py"
    python_connector(feed, "clock", "clock_server.py", extra={"command": ["sh", "-c", command]})
    write_index(feed, 1)
    await _setup(runtime, household, feed, "clock")
    inst = await _running(runtime, "clock")
    assert inst.session is not None
    transport = inst.session.transport
    assert isinstance(transport, StdioTransport) and transport.pid is not None
    pid, sleeper = transport.pid, int(grandchild.read_text())
    pipes = _pipes(transport)
    assert alive(pid) and alive(sleeper) and pipes <= _held()
    sup = service.require(runtime.plugins).supervisor
    assert sup is not None
    await sup.stop_all("clock")  # what uninstalling does
    await settle()
    assert inst.state == "stopped" and ("", "clock") not in sup.instances
    assert _gone(pid)  # gone and reaped: not even a zombie
    # The group's SIGKILL is delivered asynchronously: the child of the group (not ours
    # to reap) dies when the kernel next runs it, so it gets a bounded moment.
    for _ in range(200):
        if not alive(sleeper):
            break
        await asyncio.sleep(0.05)
    assert not alive(sleeper)
    assert not pipes & _held()


async def test_a_stop_during_a_polite_close_still_kills_reaps_and_closes_the_pipes() -> None:
    # A server that neither exits on EOF nor on SIGTERM: the close waits its grace period.
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    transport = StdioTransport([sys.executable, "-c", script], env=child_env())
    await transport.open()
    pid = transport.pid
    assert pid is not None
    pipes = _pipes(transport)
    closing = asyncio.create_task(transport.close())
    await asyncio.sleep(0.1)  # inside the grace period
    closing.cancel()  # the supervisor's stop, while the instance closes its session
    with pytest.raises(asyncio.CancelledError):
        await closing
    await settle()
    assert _gone(pid)
    assert not pipes & _held()
