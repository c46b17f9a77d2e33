"""Building connector feeds for tests: folders of real files and their connectors.json;
the runtime's connectors service set up for a test (`on_host`)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec
from conftest import PASSWORD

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.supervisor import ConnectorInstance, Launch
from skald.store.inbox import InboxItem

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "mcp_servers"


def python_connector(
    root: Path, name: str, script: str, *, extra: dict[str, Any] | None = None
) -> Path:
    """A stdio connector running `script` (a file of tests/mcp_servers) with this Python."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVERS / script, folder / script)
    manifest: dict[str, Any] = {
        "name": name,
        "display_name": name.title(),
        "description": f"the {name} test server",
        "transport": "stdio",
        "command": [sys.executable, "{DIR}/" + script],
        "entry": script,
        "scope": "household",
    }
    manifest.update(extra or {})
    (folder / "connector.json").write_text(json.dumps(manifest))
    return folder


def simple_feed(root: Path, names: tuple[str, ...] = ("clock",), **extra: Any) -> Path:
    for name in names:
        python_connector(root, name, "clock_server.py", extra=extra.get(name))
    write_index(root, 1)
    return root


def oauth_remote(url: str = "http://127.0.0.1:9/mcp", **oauth: Any) -> dict[str, Any]:
    """The manifest fields of a personal remote connector (streamable HTTP at `url`) that
    signs in with OAuth 2: the `oauth` block given, or MCP's own authorization if none."""
    auth: dict[str, Any] = {"type": "oauth2"}
    if oauth:
        auth["oauth"] = oauth
    return {"scope": "personal", "transport": "http", "url": url, "auth": auth}


def on_host(runtime: Runtime, feed: Path | str | None = None, **fields: Any) -> service.Connectors:
    """The runtime's connectors service for a test that does not test boxes: household
    connectors run on the host (`household_on_host`; the test servers need this Python's
    MCP SDK, see docs/dev/connectors.md), from `feed`, with any other `[connectors]`
    `fields` given."""
    c = service.require(runtime.server)
    if feed is not None:
        fields["feed"] = str(feed)
    c.config = msgspec.structs.replace(c.config, household_on_host=True, **fields)
    return c


async def switched_on(
    runtime: Runtime, owner: str, feed: Path | str, *names: str, **fields: Any
) -> service.Connectors:
    """`names` installed from `feed` and switched on for `owner`, with any other
    `[connectors]` `fields` given; the connectors service."""
    c = service.require(runtime.server)
    c.config = msgspec.structs.replace(c.config, feed=str(feed), **fields)
    for name in names:
        await c.installer.install(c.feed(), name)
        await c.store.set_active(name, owner, True)
    return c


async def installed_for_ada(
    runtime: Runtime, household: dict[str, str], feed: Path, *names: str, **fields: Any
) -> str:
    """`names` installed from `feed` (on the host, `on_host`, with any other `fields`) and
    switched on for ada, whose data is then unlocked; her user id."""
    await switched_on(runtime, household["ada"], feed, *names, household_on_host=True, **fields)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    return household["ada"]


async def pending(runtime: Runtime, owner: str, seconds: float = 10.0) -> list[InboxItem]:
    """What waits in `owner`'s Inbox once anything does (empty after `seconds`)."""
    mine = runtime.user_runtimes[owner]
    found: list[InboxItem] = []
    for _ in range(int(seconds * 20)):
        found = await mine.inbox.pending()
        if found:
            break
        await asyncio.sleep(0.05)
    return found


async def launched(runtime: Runtime, owner: str, name: str) -> tuple[ConnectorInstance, Launch]:
    """A new instance of connector `name` for `owner` (a member whose data is open) and
    what the supervisor would launch it with: (the instance, the launch)."""
    c = service.require(runtime.server)
    sup = c.supervisor
    assert sup is not None
    inst = ConnectorInstance(sup, owner, await c.store.require(name))
    sup.members.setdefault(owner, runtime.user_runtimes[owner].facade)
    return inst, await sup.launch_for(inst)


async def in_state(
    runtime: Runtime, owner: str, name: str, *states: str, seconds: float = 30.0
) -> ConnectorInstance:
    """The supervisor's instance of connector `name` for `owner` ("" for a household
    one) once its state is one of `states`; an AssertionError with its events after
    `seconds`."""
    sup = service.require(runtime.server).supervisor
    assert sup is not None
    inst = None
    for _ in range(int(seconds * 10)):
        inst = sup.instances.get((owner, name))
        if inst is not None and inst.state in states:
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never {states}: {inst and (inst.state, list(inst.events))}")


async def running(
    runtime: Runtime, owner: str, name: str, seconds: float = 30.0, *, failed_ends: bool = False
) -> ConnectorInstance:
    """`in_state(..., "running")`; with `failed_ends`, a failed instance ends the wait at
    once (an AssertionError with its events)."""
    states = ("running", "failed") if failed_ends else ("running",)
    inst = await in_state(runtime, owner, name, *states, seconds=seconds)
    if inst.state == "failed":
        raise AssertionError(f"{name} failed: {list(inst.events)}")
    return inst
