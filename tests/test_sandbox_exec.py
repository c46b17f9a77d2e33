"""`execute_cmd` against a real container: streaming, exit codes, working directories,
time limits, output caps, and /stop killing every process the command started."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.agent.cancel import CancelScope, Stopped
from skald.agent.events import Event, ToolOutput
from skald.agent.tools import ToolContext
from skald.core.runtime import Runtime
from skald.sandbox.execute import run_command
from skald.sandbox.tool import ExecuteCmdTool

pytestmark = pytest.mark.docker

# Children that ignore SIGTERM, a grandchild in its own process group (same session).
STUBBORN = (
    "trap '' TERM; "
    "(trap '' TERM; sleep 301) & "
    "setsid --fork sh -c 'sleep 302' 2>/dev/null || true; "
    "(set -m; sleep 303 &) ; "
    "echo started; sleep 304; wait"
)


class Sink:
    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.first = asyncio.Event()

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolOutput):
            self.chunks.append(event.chunk)
            self.first.set()


async def _tool(rt: Runtime, username: str = "ada") -> ExecuteCmdTool:
    created = await rt.core.users.create(username, PASSWORD, "member")
    user_id = created.user.id
    assert rt.sandbox is not None
    return ExecuteCmdTool(rt.sandbox, lambda: rt.member(user_id))


def _ctx(sink: Sink, scope: CancelScope | None = None) -> ToolContext:
    return ToolContext(
        conversation_id="c1", call_id="call1", depth=0, cancel=scope or CancelScope(), sink=sink
    )


async def _sleepers(rt: Runtime, tool: ExecuteCmdTool) -> str:
    user, role = await tool._member()
    assert rt.sandbox is not None
    cid = await rt.sandbox.ensure(user, role)
    r = await run_command(
        rt.sandbox,
        cid,
        "ps -eo args | grep '^sleep 30[1-4]' || true",
        workdir="/",
        timeout_s=10,
        max_bytes=4096,
    )
    return r.output


async def test_output_streams_and_exit_code(sandbox_runtime: Runtime) -> None:
    tool = await _tool(sandbox_runtime)
    sink = Sink()
    result = await tool.run(
        {"command": "echo one; sleep 0.3; echo two >&2; pwd; exit 3", "workdir": "notes"},
        _ctx(sink),
    )
    # The working directory did not exist: the command says so instead of running.
    assert result.is_error and "No such file or directory" in result.content

    await tool.run({"command": "mkdir -p ~/notes"}, _ctx(Sink()))
    result = await tool.run(
        {
            "command": "echo one; sleep 0.3; echo two >&2; sleep 0.3; pwd; exit 3",
            "workdir": "~/notes",
        },
        _ctx(sink := Sink()),
    )
    assert result.is_error and result.metadata and result.metadata["exit_code"] == 3
    assert result.content.splitlines() == ["[exit code 3]", "one", "two", "/home/skald/notes"]
    assert len(sink.chunks) >= 2 and "".join(sink.chunks) == "one\ntwo\n/home/skald/notes\n"

    ok = await tool.run({"command": "printf 'caf\\xc3\\xa9'"}, _ctx(Sink()))
    assert not ok.is_error and ok.content == "[exit code 0]\ncafé"


async def test_stop_kills_the_whole_process_group(sandbox_runtime: Runtime) -> None:
    rt = sandbox_runtime
    tool = await _tool(rt)
    sink = Sink()
    scope = CancelScope()
    task = asyncio.create_task(scope.run(tool.run({"command": STUBBORN}, _ctx(sink, scope))))
    async with asyncio.timeout(20):
        await sink.first.wait()
    await asyncio.sleep(0.3)
    assert "sleep 304" in await _sleepers(rt, tool)
    started = time.monotonic()
    scope.cancel("stopped")
    with pytest.raises(Stopped):
        await task
    assert time.monotonic() - started < 2.0
    left = await _sleepers(rt, tool)
    # 301 and 304 share the group, 303 has a group of its own in the same session, and
    # 302 even a session of its own: all gone.
    assert not left.strip(), left


async def test_timeout_kills_and_says_so(sandbox_runtime: Runtime) -> None:
    rt = sandbox_runtime
    tool = await _tool(rt)
    started = time.monotonic()
    result = await tool.run({"command": STUBBORN, "timeout_s": 1}, _ctx(Sink()))
    assert time.monotonic() - started < 4.0
    assert result.is_error and "longer than 1 s" in result.content and "started" in result.content
    left = await _sleepers(rt, tool)
    assert not left.strip(), left


async def test_output_cap_and_runaway(sandbox_runtime: Runtime) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    rt.sandbox.config = type(rt.sandbox.config)(output_max_kb=4)
    tool = await _tool(rt)
    result = await tool.run({"command": "seq 1 5000"}, _ctx(Sink()))
    assert result.metadata and result.metadata["truncated"] is True
    assert "[output cut at 4 KiB]" in result.content and len(result.content) < 4096 + 200
    started = time.monotonic()
    result = await tool.run({"command": "yes skald"}, _ctx(Sink()))
    assert time.monotonic() - started < 10
    assert "far more than the output limit" in result.content


async def test_no_container_no_host_fallback(sandbox_runtime: Runtime, docker: Any) -> None:
    rt = sandbox_runtime
    tool = await _tool(rt)
    assert rt.sandbox is not None
    rt.sandbox.image = "skald-runtime:vmissing00000"
    result = await tool.run({"command": "touch /tmp/ran-on-host-6f1e"}, _ctx(Sink()))
    assert result.is_error and "skald image build" in result.content
    assert not await asyncio.to_thread(Path("/tmp/ran-on-host-6f1e").exists)
