"""An MCP server that uses MCP's own authorization (official Python SDK, streamable HTTP),
for tests/test_connectors_oauth.py (never the product).

Usage: python tests/mcp_servers/oauth_server.py PORT AUTHORIZATION_SERVER

Every request needs `Authorization: Bearer <token>`; without a valid one the SDK answers
401 with `WWW-Authenticate: Bearer resource_metadata=...`, and serves the protected-
resource metadata (RFC 9728) naming AUTHORIZATION_SERVER (tests/oauth_double.py). A token
is checked by introspection at that server and must have been minted for this server's
URL (`resource`, RFC 8707). `whoami` answers the number of the token it was called with
(the double's `at-<n>`; the token itself would be scrubbed from the answer).
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel.server import Server
from pydantic import AnyHttpUrl

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"


class Introspecting:
    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{ISSUER}/introspect", data={"token": token})
        data = r.json()
        if not data.get("active"):
            return None
        return AccessToken(
            token=token,
            client_id=str(data["client_id"]),
            scopes=[],
            expires_at=data.get("exp"),
            resource=data.get("aud") or None,
        )


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    tool = types.Tool(name="whoami", description="the token you came with", input_schema=schema)
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    token = get_access_token()
    text = f"called with token {token.token.rsplit('-', 1)[-1] if token else 'none'}"
    return types.CallToolResult(content=[types.TextContent(text=text)])


if __name__ == "__main__":
    import uvicorn

    server = Server("oauth-test", on_list_tools=list_tools, on_call_tool=call_tool)
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(ISSUER),
        resource_server_url=AnyHttpUrl(RESOURCE),
        validate_token_resource=True,
    )
    app = server.streamable_http_app(host="127.0.0.1", auth=auth, token_verifier=Introspecting())
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
