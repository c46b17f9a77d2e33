"""Connectors on what real MCP servers offer beyond tools (issue 23 items 3 and 4): a
legacy HTTP+SSE server behind a connector's `url`, resources read by the model and shown
on the page, subscriptions, prompts, and image results reaching the model as pictures.

The server is tests/mcp_servers/rich_server.py (the official Python SDK), over the legacy
SSE transport or streamable HTTP on 127.0.0.1, so a `personal` connector needs no Docker."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from conftest import Client
from connector_support import simple_feed
from mcp_support import rich_http

from skald.agent import CancelScope, ToolContext
from skald.agent.events import Event
from skald.connectors import service
from skald.connectors.supervisor import Instance
from skald.core.runtime import Runtime

MakeClient = Callable[[], Awaitable[Client]]


def _ignore(event: Event) -> None:
    pass


def ctx(conversation: str = "conv") -> ToolContext:
    return ToolContext(
        conversation_id=conversation, call_id="c", depth=0, cancel=CancelScope(), sink=_ignore
    )


async def running(runtime: Runtime, owner: str, name: str) -> Instance:
    sup = service.require(runtime.plugins).supervisor
    assert sup is not None
    inst = None
    for _ in range(300):
        inst = sup.instances.get((owner, name))
        if inst is not None and inst.state == "running":
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never ran: {inst and list(inst.events)}")


async def switch_on(
    runtime: Runtime, client: Client, tmp_path: Path, url: str, name: str = "notes"
) -> None:
    feed = simple_feed(
        tmp_path / "feed", (name,), **{name: {"scope": "personal", "transport": "http", "url": url}}
    )
    c = service.require(runtime.plugins)
    c.config = msgspec.structs.replace(c.config, feed=str(feed))
    await c.installer.install(c.feed(), name)
    r = await client.call("POST", f"/api/connectors/{name}/activate")
    assert r.status_code == 200, r.text


def model_tool(runtime: Runtime, owner: str, name: str) -> Any:
    [tool] = [t for t in runtime.user_runtimes[owner].all_tools() if t.name == name]
    return tool


async def test_a_legacy_sse_server_lists_and_calls_tools_through_a_connector(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with rich_http("sse") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        inst = await running(runtime, household["ada"], "notes")
        assert [t.name for t in inst.tools] == ["echo", "picture", "note"]
        listed = (await ada.call("GET", "/api/connectors/notes")).json()
        assert [t["name"] for t in listed["tools"]][:1] == ["mcp__notes__echo"]
        result = await model_tool(runtime, household["ada"], "mcp__notes__echo").run(
            {"text": "ciao"}, ctx()
        )
        assert not result.is_error and result.content == "ciao"
