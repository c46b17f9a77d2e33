"""Recovery (issue 23 items 2 and 7): a failed connector is retried (the card's Retry,
switching it off and on), a call to one that is not running answers why at once,
household connectors start with the server, and a streamable-HTTP server restarted while
idle is shown down and then called on a new session.

Real servers: the official SDK's streamable HTTP server (tests/mcp_servers/clock_server.py
`http PORT`) on 127.0.0.1, killed and started again on the same port.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PASSWORD, TEST_ENV, MakeClient, signed_in
from connector_support import SERVERS, in_state, simple_feed
from mcp_session_double import session_double
from mcp_support import free_port, python_server, wait_listening

from skald.agent import CancelScope, ToolContext
from skald.agent.events import Event
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.supervisor import ConnectorInstance
from skald.features.connectors.tools import ConnectorTool
from skald.llm.types import ToolSpec
from skald.paths import DataLayout


class ClockServer:
    """The SDK clock server over streamable HTTP on one port, stopped and started again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = python_server(SERVERS / "clock_server.py", "http", str(self.port))
        wait_listening(self.port, self.proc)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def clock() -> Iterator[ClockServer]:
    server = ClockServer()
    try:
        yield server
    finally:
        server.kill()


def _ignore(event: Event) -> None:
    pass


CTX = ToolContext(conversation_id="conv", call_id="c", depth=0, cancel=CancelScope(), sink=_ignore)


async def _install_http(runtime: Runtime, tmp_path: Path, url: str) -> None:
    feed = simple_feed(tmp_path / "feed", ("clock",), clock={"transport": "http", "url": url})
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(feed), max_restarts=1)
    await c.installer.install(c.feed(), "clock")


async def _call_now(runtime: Runtime, user_id: str, inst: ConnectorInstance) -> tuple[bool, str]:
    """`mcp__clock__now` as the model calls it (a turn's tools are fixed when it starts:
    the instance may have failed since)."""
    spec = ToolSpec(name="mcp__clock__now", description="now", parameters={"type": "object"})
    tool = ConnectorTool(spec, inst, "now", runtime.user_runtimes[user_id].facade)
    result = await tool.run({}, CTX)
    return result.is_error, result.content


async def test_a_failed_connector_answers_why_at_once_and_retry_or_off_on_starts_it_again(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    tmp_path: Path,
    clock: ClockServer,
) -> None:
    await _install_http(runtime, tmp_path, clock.url)  # nobody listens yet
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    r = await ada.call("POST", "/api/connectors/clock/activate")
    assert r.status_code == 200, r.text
    inst = await in_state(runtime, "", "clock", "failed", seconds=30)
    # A call answers at once with the reason (not "not running; try again later" after 30 s).
    is_error, text = await _call_now(runtime, household["ada"], inst)
    assert is_error and "failed" in text and "cannot reach" in text, text

    clock.start()
    # The card's Retry starts it again now.
    r = await ada.call("POST", "/api/connectors/clock/retry")
    assert r.status_code == 200, r.text
    inst = await in_state(runtime, "", "clock", "running", seconds=30)
    assert await _call_now(runtime, household["ada"], inst) == (False, "12:34")
    # Nothing to retry while it runs: a clear 409.
    r = await ada.call("POST", "/api/connectors/clock/retry")
    assert r.status_code == 409 and "running" in r.text

    # Failed again (a restart with nobody listening); the household instance outlives
    # ada's switch-off (mum uses it too): switching it on again retries it.
    await mum.call("POST", "/api/connectors/clock/activate")
    clock.kill()
    sup = service.require(runtime.server).supervisor
    assert sup is not None
    await sup.restart_all("clock")
    await in_state(runtime, "", "clock", "failed", seconds=30)
    clock.start()
    assert (await ada.call("POST", "/api/connectors/clock/deactivate")).status_code == 200
    r = await ada.call("POST", "/api/connectors/clock/activate")
    assert r.status_code == 200, r.text
    inst = await in_state(runtime, "", "clock", "running", seconds=30)
    assert await _call_now(runtime, household["ada"], inst) == (False, "12:34")


async def test_a_household_connector_starts_with_the_server_before_anyone_signs_in(
    tmp_path: Path, clock: ClockServer
) -> None:
    clock.start()
    layout = DataLayout(tmp_path / "data")
    first = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    try:
        ada = await first.core.users.create("ada", PASSWORD, "member")
        await _install_http(first, tmp_path, clock.url)
        c = service.require(first.server)
        await c.store.grant("clock", ada.user.id)
        await c.store.set_active("clock", ada.user.id, True)
    finally:
        await first.shutdown()
    second = await Runtime.boot(layout, load_config(layout.root, TEST_ENV), announce=io.StringIO())
    try:
        assert not second.user_runtimes  # nobody signed in
        inst = await in_state(second, "", "clock", "running", seconds=30)
        assert {s.name for s in inst.specs} >= {"mcp__clock__now"}
    finally:
        await second.shutdown()


async def test_a_server_restarted_while_idle_is_shown_down_and_then_called_on_a_new_session(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    tmp_path: Path,
    clock: ClockServer,
) -> None:
    clock.start()
    await _install_http(runtime, tmp_path, clock.url)
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=c.config.feed, max_restarts=50)
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("POST", "/api/connectors/clock/activate")).status_code == 200
    inst = await in_state(runtime, "", "clock", "running", seconds=30)
    old = inst.session
    assert await _call_now(runtime, household["ada"], inst) == (False, "12:34")
    clock.kill()  # dies while idle: no call is in flight
    # Noticed without a call (its event stream finds nobody): the card says so.
    for _ in range(600):
        card = (await ada.call("GET", "/api/connectors/clock")).json()
        if card["state"] != "running":
            break
        await asyncio.sleep(0.05)
    assert card["state"] == "restarting", card
    assert inst.last_error is not None and "cannot reach" in inst.last_error
    clock.start()  # back, on the same port, knowing no session
    inst = await in_state(runtime, "", "clock", "running", seconds=30)
    assert inst.session is not old
    assert await _call_now(runtime, household["ada"], inst) == (False, "12:34")


async def test_a_call_refused_for_a_forgotten_session_runs_once_on_a_new_session(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    with session_double() as double:
        await _install_http(runtime, tmp_path, double.url)
        c = service.require(runtime.server)
        await c.store.set_active("clock", household["ada"], True)
        await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
        inst = await in_state(runtime, "", "clock", "running", seconds=30)
        double.forget_all()  # restarted in between: the next request meets a 404
        assert await _call_now(runtime, household["ada"], inst) == (False, "ran on s2")
        # The 404'd call was not run and never sent again on the dead id; it ran once,
        # on the new session, after a fresh initialize.
        assert [m for m, _ in double.sent_on("s1")][-1] == "tools/call"
        assert double.sent_on("s1")[-1] == ("tools/call", 404)
        assert [m for m, _ in double.sent_on("s2")].count("tools/call") == 1
        assert [carried for m, carried, _ in double.seen if m == "initialize"] == [None, None]


async def test_the_sign_in_status_of_a_failed_connector_answers_why_at_once(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nobody listens
    feed = simple_feed(
        tmp_path / "feed",
        ("phone",),
        phone={"scope": "personal", "transport": "http", "url": url, "auth": {"type": "qr"}},
    )
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(feed), max_restarts=0)
    await c.installer.install(c.feed(), "phone")
    ada = await signed_in(make_client, "ada")
    assert (await ada.call("POST", "/api/connectors/phone/activate")).status_code == 200
    sup = c.supervisor
    assert sup is not None
    for _ in range(600):
        inst = sup.instances.get((household["ada"], "phone"))
        if inst is not None and inst.state == "failed":
            break
        await asyncio.sleep(0.05)
    r = await ada.call("POST", "/api/connectors/phone/login-status")
    assert r.status_code == 409 and "failed" in r.text and "cannot reach" in r.text, r.text
