"""What a connector can make the server keep (issue 20, item 5). A real MCP server
(tests/mcp_servers/flood_server.py, official Python SDK) lists as many tools as it is
told to: at 512 it runs, at 513 (or past 4 MiB of tool list, or growing there after it
started) it is refused at once with a clear error on the card, the model's prompt says
so, nothing of the list is kept, and administrators read what running connectors keep,
per member, in `/api/health?details=true`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
from conftest import PASSWORD, Client
from connector_support import python_connector
from fake_llm import FakeLLM

from skald.agent import CancelScope, ToolContext
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.supervisor import ConnectorInstance
from skald.features.connectors.tools import ConnectorTool
from skald.llm.types import ToolSpec

MakeClient = Callable[[], Awaitable[Client]]
REFUSED = "connector 'flood' refused: it lists more than 512 tools (the limit)"


def _feed(root: Path, **connectors: dict[str, str]) -> Path:
    for name, env in connectors.items():
        python_connector(root, name, "flood_server.py", extra={"env": env})
    write_index(root, 1)
    return root


async def _setup(runtime: Runtime, household: dict[str, str], feed: Path, *names: str) -> str:
    c = service.require(runtime.plugins)
    c.config = msgspec.structs.replace(c.config, feed=str(feed), household_on_host=True)
    for name in names:
        await c.installer.install(c.feed(), name)
        await c.store.set_active(name, household["ada"], True)
    await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    return household["ada"]


async def _settled(runtime: Runtime, name: str, state: str) -> ConnectorInstance:
    sup = service.require(runtime.plugins).supervisor
    assert sup is not None
    inst = None
    for _ in range(600):
        inst = sup.instances.get(("", name))
        if inst is not None and inst.state == state:
            return inst
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never became {state}: {inst and list(inst.events)}")


async def _system_prompt(runtime: Runtime, ada: str, fake: FakeLLM) -> str:
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
    )
    await runtime.llm.add_model(provider.id, "m", "m", "average", ["tools"], 1, True)
    svc = runtime.conversations
    conversation = await svc.create(ada)
    fake.script("m", ["ok"])
    sent = await svc.send(ada, conversation.id, "hello")
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    return str(fake.bodies()[-1]["messages"][0]["content"])


async def test_a_connector_listing_513_tools_is_refused_at_once_and_one_with_512_runs(
    runtime: Runtime,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
    make_client: MakeClient,
) -> None:
    feed = _feed(
        tmp_path / "feed",
        wide={"FLOOD_TOOLS": "512", "FLOOD_PAGE": "100"},
        flood={"FLOOD_TOOLS": "513", "FLOOD_PAGE": "100"},
    )
    ada = await _setup(runtime, household, feed, "wide", "flood")
    wide = await _settled(runtime, "wide", "running")
    assert len(wide.specs) == 512 and wide.retained_bytes > 512 * 50
    flood = await _settled(runtime, "flood", "failed")
    # Refused once, not restarted: the same files would list the same again.
    errors = [e.text for e in flood.events if e.kind == "error"]
    assert errors == [REFUSED]
    assert flood.tools == [] and flood.specs == [] and flood.retained_bytes == 0
    row = await service.require(runtime.plugins).store.require("flood")
    assert row.last_error == REFUSED
    # The administrator's card says why; the model's prompt line says it is refused.
    mum = await make_client()
    await mum.login("mum")
    card = (await mum.call("GET", "/api/connectors/flood")).json()
    assert card["state"] == "failed" and card["last_error"] == REFUSED
    assert REFUSED in [e["text"] for e in card["events"]]
    prompt = await _system_prompt(runtime, ada, fake_llm)
    assert "- flood (refused: it lists more than 512 tools (the limit))" in prompt
    assert "- wide: the wide test server [512 tools]" in prompt
    # What running connectors keep, per member, for administrators only.
    public = (await mum.call("GET", "/api/health")).json()
    assert public["admin"] is None
    details = (await mum.call("GET", "/api/health?details=true")).json()["admin"]
    figures = details["connectors"]
    assert figures["instances"] == 2
    assert figures["retained_bytes"] == wide.retained_bytes
    assert figures["members"] == [
        {
            "user_id": None,
            "username": None,
            "instances": 2,
            "retained_bytes": wide.retained_bytes,
        }
    ]
    member = await make_client()
    await member.login("ada")
    assert (await member.call("GET", "/api/health?details=true")).json()["admin"] is None


async def test_a_tool_list_over_4_mib_is_refused(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    # 140 schemas of about 30 KB: each under the 32 KiB schema limit, the list over 4 MiB.
    feed = _feed(
        tmp_path / "feed",
        flood={"FLOOD_TOOLS": "140", "FLOOD_PAGE": "20", "FLOOD_PAD": "30000"},
    )
    await _setup(runtime, household, feed, "flood")
    flood = await _settled(runtime, "flood", "failed")
    assert [e.text for e in flood.events if e.kind == "error"] == [
        "connector 'flood' refused: its tools list is over 4096 KiB (the limit)"
    ]


async def test_a_connector_growing_past_the_limit_while_running_is_refused(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    feed = _feed(tmp_path / "feed", flood={"FLOOD_TOOLS": "3", "FLOOD_GROW": "600"})
    await _setup(runtime, household, feed, "flood")
    flood = await _settled(runtime, "flood", "running")
    assert len(flood.specs) == 3
    session = flood.session
    assert session is not None
    await session.call_tool("grow")  # lists 600 tools and says its list changed
    await _settled(runtime, "flood", "failed")
    assert flood.tools == [] and flood.specs == [] and flood.retained_bytes == 0
    assert REFUSED in [e.text for e in flood.events]
    assert session.closed
    # A call the model made from an earlier turn's tool list gets a short answer at once.
    member = runtime.user_runtimes[household["ada"]]
    ctx = ToolContext(conversation_id="c", call_id="k", depth=0, cancel=CancelScope(), sink=print)
    spec = ToolSpec(name="mcp__flood__t1", description="", parameters={"type": "object"})
    result = await ConnectorTool(spec, flood, "t1", member).run({}, ctx)
    assert result.is_error
    assert result.content == (
        "connector 'flood' is refused: it lists more than 512 tools (the limit)"
    )
