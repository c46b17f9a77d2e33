"""The client the MCP conformance suite drives: `python tests/mcp_conformance_client.py URL`.

`@modelcontextprotocol/conformance client --command ...` starts a test server per
scenario, appends its URL to the command and names the scenario in
MCP_CONFORMANCE_SCENARIO; this script does what the scenario expects with Skald's own
client (`skald.mcp`) and exits 0, or prints the failure and exits 1. The suite's checks
judge what reached its server, not this exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx

from skald.mcp import (
    ElicitRequestParams,
    ElicitResult,
    Handlers,
    HttpTransport,
    Related,
    connect,
)
from skald.mcp.oauth import ClientInfo, McpOAuth

# The suite's CIMD scenario expects this URL as the client id (its own test constant).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://127.0.0.1:1/callback"


async def _follow_sign_in(url: str) -> str:
    """The person's part of the flow: the suite's authorization endpoint answers at once
    with a redirect to our callback; a browser would follow it, we read it."""
    async with httpx.AsyncClient() as http:
        response = await http.get(url, follow_redirects=False)
    location = response.headers.get("location")
    if response.status_code not in (301, 302, 303, 307) or not location:
        raise RuntimeError(f"the authorization endpoint answered {response.status_code}")
    return str(location)


def _auth() -> McpOAuth:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}"))
    client = None
    if context.get("client_id"):
        client = ClientInfo(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            private_key_pem=context.get("private_key_pem"),
            signing_algorithm=context.get("signing_algorithm"),
        )
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")

    async def id_jag(audience: str, resource: str) -> str:
        """SEP-990: trade the identity provider's ID token for an ID-JAG (RFC 8693)."""
        form = {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": context["idp_id_token"],
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "audience": audience,
            "resource": resource,
            "client_id": context["idp_client_id"],
        }
        async with httpx.AsyncClient() as http:
            response = await http.post(context["idp_token_endpoint"], data=form)
        response.raise_for_status()
        return str(response.json()["access_token"])

    grant = "authorization_code"
    if "client-credentials" in scenario:
        grant = "client_credentials"
    elif "idp_id_token" in context:
        grant = "jwt_bearer"
    return McpOAuth(
        redirect_uri=REDIRECT_URI,
        authorize=_follow_sign_in,
        client=client,
        client_metadata_url=CLIENT_METADATA_URL,
        grant=grant,  # type: ignore[arg-type]
        assertion=id_jag,
    )


async def _accept_defaults(_params: ElicitRequestParams, _related: Related) -> ElicitResult:
    # A person who accepts without typing anything: the schema's defaults must fill in.
    return ElicitResult(action="accept", content={})


async def run(scenario: str, url: str) -> None:
    handlers = Handlers(elicit=_accept_defaults)
    auth = _auth() if scenario.startswith("auth/") else None
    transport = HttpTransport(url, {}, auth=auth)
    session = await connect(transport, name="conformance", handlers=handlers)
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
            # Any other scenario (auth/*): call every tool without arguments once.
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
