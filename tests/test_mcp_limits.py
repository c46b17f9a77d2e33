"""How much of a server's lists the MCP client keeps (issue 20, item 5): a connector's
files may be a member's, and what it lists stays in the server's memory. A real server
(tests/mcp_servers/flood_server.py, the official Python SDK) lists as much as it is
told to; the client keeps at most 512 entries and 4 MiB of JSON per list, across
pages, and refuses beyond with a text naming the connector and the limit."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import msgspec
import pytest
from mcp_support import HERE, child_env

from skald.mcp import ListTooLarge, McpSession, SchemaError, StdioTransport, Tool, connect
from skald.mcp.session import MAX_LIST_BYTES, MAX_LIST_ITEMS
from skald.mcp.tools import MAX_SCHEMA_BYTES, tool_spec

pytestmark = pytest.mark.timeout(120)

FLOOD = HERE / "mcp_servers" / "flood_server.py"


@asynccontextmanager
async def flood(**env: int) -> AsyncIterator[McpSession]:
    variables = child_env() | {f"FLOOD_{k.upper()}": str(v) for k, v in env.items()}
    session = await connect(
        StdioTransport([sys.executable, str(FLOOD)], env=variables), name="flood"
    )
    try:
        yield session
    finally:
        await session.close()


async def test_a_connector_may_list_512_tools_and_not_513() -> None:
    assert MAX_LIST_ITEMS == 512
    async with flood(tools=512, page=100) as session:
        assert len(await session.list_tools()) == 512
        assert session.listed["tools/list"][0] == 512
    async with flood(tools=513, page=100) as session:
        with pytest.raises(ListTooLarge) as caught:
            await session.list_tools()
        assert str(caught.value) == (
            "connector 'flood' refused: it lists more than 512 tools (the limit)"
        )
        # Refused, not broken: the session lives on, and no figure is kept for the list.
        await session.ping()
        assert "tools/list" not in session.listed


async def test_a_tool_list_over_4_mib_across_pages_is_refused() -> None:
    # 30 000 characters of padding per schema, 20 tools a page: 130 tools are about
    # 3.9 MB of JSON (kept), 140 about 4.2 MB (refused on the page that crosses).
    assert MAX_LIST_BYTES == 4 * 1024 * 1024
    async with flood(tools=130, page=20, pad=30_000) as session:
        tools = await session.list_tools()
        assert len(tools) == 130
        count, size = session.listed["tools/list"]
        # The JSON as sent, page by page (each page's brackets counted once).
        assert count == 130 and 0 <= size - len(msgspec.json.encode(tools)) < 20
        assert size < MAX_LIST_BYTES
    async with flood(tools=140, page=20, pad=30_000) as session:
        with pytest.raises(ListTooLarge) as caught:
            await session.list_tools()
        assert "its tools list is over 4096 KiB (the limit)" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "method"),
    [("resources", McpSession.list_resources), ("prompts", McpSession.list_prompts)],
)
async def test_resource_and_prompt_lists_have_the_same_limits(
    kind: str, method: Callable[[McpSession], object]
) -> None:
    async with flood(**{kind: 512, "page": 200}) as session:
        assert len(await method(session)) == 512  # type: ignore[misc]
    async with flood(**{kind: 513, "page": 200}) as session:
        with pytest.raises(ListTooLarge) as caught:
            await method(session)  # type: ignore[misc]
        assert f"it lists more than 512 {kind}" in str(caught.value)


def _schema_of(size: int) -> dict[str, object]:
    """An object schema whose JSON is exactly `size` bytes."""
    schema: dict[str, object] = {"type": "object", "description": ""}
    base = len(msgspec.json.encode(schema))
    schema["description"] = "d" * (size - base)
    assert len(msgspec.json.encode(schema)) == size
    return schema


def test_one_schema_may_be_32_kib_and_not_a_byte_more() -> None:
    assert MAX_SCHEMA_BYTES == 32 * 1024
    spec = tool_spec("srv", Tool(name="ok", input_schema=_schema_of(MAX_SCHEMA_BYTES)))
    assert spec.name == "mcp__srv__ok"
    with pytest.raises(SchemaError) as caught:
        tool_spec("srv", Tool(name="big", input_schema=_schema_of(MAX_SCHEMA_BYTES + 1)))
    assert "the input schema is 32769 bytes, over the limit of 32768" in str(caught.value)
