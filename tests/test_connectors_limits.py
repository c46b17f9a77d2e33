"""What a connector can make the server keep (issue 20, item 5). A real MCP server
(tests/mcp_servers/flood_server.py, official Python SDK) lists as many tools as it is
told to: at 512 it runs, at 513 (or past 4 MiB of tool list, or growing there after it
started) it is refused at once with a clear error on the card, the model's prompt says
so, nothing of the list is kept, and administrators read what running connectors keep,
per member, in `/api/health?details=true`."""

from __future__ import annotations

from pathlib import Path

from conftest import MakeClient, add_models, signed_in
from connector_support import in_state, installed_for_ada, python_connector
from fake_llm import FakeLLM

from skald.agent import CancelScope, ToolContext
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.tools import ConnectorTool
from skald.llm.types import ToolSpec

REFUSED = "connector 'flood' refused: it lists more than 512 tools (the limit)"


def _feed(root: Path, **connectors: dict[str, str]) -> Path:
    for name, env in connectors.items():
        python_connector(root, name, "flood_server.py", extra={"env": env})
    write_index(root, 1)
    return root


async def _system_prompt(runtime: Runtime, ada: str, fake: FakeLLM) -> str:
    await add_models(runtime, fake, "m")
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
    ada = await installed_for_ada(runtime, household, feed, "wide", "flood")
    wide = await in_state(runtime, "", "wide", "running", seconds=60)
    assert len(wide.specs) == 512 and wide.retained_bytes > 512 * 50
    flood = await in_state(runtime, "", "flood", "failed", seconds=60)
    # Refused once, not restarted: the same files would list the same again.
    errors = [e.text for e in flood.events if e.kind == "error"]
    assert errors == [REFUSED]
    assert flood.tools == [] and flood.specs == [] and flood.retained_bytes == 0
    row = await service.require(runtime.server).store.require("flood")
    assert row.last_error == REFUSED
    # The administrator's card says why; the model's prompt line says it is refused.
    mum = await signed_in(make_client, "mum")
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
    member = await signed_in(make_client, "ada")
    assert (await member.call("GET", "/api/health?details=true")).json()["admin"] is None


async def test_a_tool_list_over_4_mib_is_refused(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    # 140 schemas of about 30 KB: each under the 32 KiB schema limit, the list over 4 MiB.
    feed = _feed(
        tmp_path / "feed",
        flood={"FLOOD_TOOLS": "140", "FLOOD_PAGE": "20", "FLOOD_PAD": "30000"},
    )
    await installed_for_ada(runtime, household, feed, "flood")
    flood = await in_state(runtime, "", "flood", "failed", seconds=60)
    assert [e.text for e in flood.events if e.kind == "error"] == [
        "connector 'flood' refused: its tools list is over 4096 KiB (the limit)"
    ]


async def test_a_connector_growing_past_the_limit_while_running_is_refused(
    runtime: Runtime, household: dict[str, str], tmp_path: Path
) -> None:
    feed = _feed(tmp_path / "feed", flood={"FLOOD_TOOLS": "3", "FLOOD_GROW": "600"})
    await installed_for_ada(runtime, household, feed, "flood")
    flood = await in_state(runtime, "", "flood", "running", seconds=60)
    assert len(flood.specs) == 3
    session = flood.session
    assert session is not None
    await session.call_tool("grow")  # lists 600 tools and says its list changed
    await in_state(runtime, "", "flood", "failed", seconds=60)
    assert flood.tools == [] and flood.specs == [] and flood.retained_bytes == 0
    assert REFUSED in [e.text for e in flood.events]
    assert session.closed
    # A call the model made from an earlier turn's tool list gets a short answer at once.
    member = runtime.user_runtimes[household["ada"]]
    ctx = ToolContext(conversation_id="c", call_id="k", depth=0, cancel=CancelScope(), sink=print)
    spec = ToolSpec(name="mcp__flood__t1", description="", parameters={"type": "object"})
    result = await ConnectorTool(spec, flood, "t1", member.facade).run({}, ctx)
    assert result.is_error
    assert result.content == (
        "connector 'flood' is refused: it lists more than 512 tools (the limit)"
    )
