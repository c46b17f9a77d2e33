"""The client the MCP conformance suite drives: `python tests/mcp_conformance_client.py URL`.

`@modelcontextprotocol/conformance client --command ...` starts a test server per
scenario, appends its URL to the command and names the scenario in
MCP_CONFORMANCE_SCENARIO; this script does what the scenario expects with Skald's own
client (`skald.mcp`) and exits 0, or prints the failure and exits 1. The suite's checks
judge what reached its server, not this exit code.
"""

from __future__ import annotations

import asyncio
import os
import sys

from skald.mcp import ElicitRequestParams, ElicitResult, Handlers, HttpTransport, connect


async def _accept_defaults(_params: ElicitRequestParams) -> ElicitResult:
    # A person who accepts without typing anything: the schema's defaults must fill in.
    return ElicitResult(action="accept", content={})


async def run(scenario: str, url: str) -> None:
    handlers = Handlers(elicit=_accept_defaults)
    session = await connect(HttpTransport(url, {}), name="conformance", handlers=handlers)
    try:
        tools = await session.list_tools()
        names = {tool.name for tool in tools}
        if scenario == "tools_call":
            result = await session.call_tool("add_numbers", {"a": 5, "b": 3})
            print(result.text())
        elif scenario == "elicitation-sep1034-client-defaults":
            result = await session.call_tool("test_client_elicitation_defaults", {})
            print(result.text())
        elif scenario == "sse-retry":
            result = await session.call_tool("test_reconnection", {})
            print(result.text())
        elif scenario != "initialize":
            # Any other scenario: call every tool without arguments once.
            for name in sorted(names):
                print((await session.call_tool(name, {})).text())
    finally:
        await session.close()


def main() -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    url = sys.argv[-1]
    try:
        asyncio.run(run(scenario, url))
    except Exception as exc:
        print(f"{scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
