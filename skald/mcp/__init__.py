"""Skald's MCP (Model Context Protocol) client: a library, like `skald.llm`.

It speaks JSON-RPC 2.0 to one server over stdio (a child process) or streamable HTTP,
and knows nothing of members, routes, Docker or storage: the product (the connectors
supervisor) decides what to start, with which environment, and where elicitations go.

    from skald.mcp import StdioTransport, Handlers, connect

    session = await connect(StdioTransport(["npx", "server"], env={...}), name="notes")
    tools = await session.list_tools()
    result = await session.call_tool("search", {"q": "milk"}, on_progress=cb)
    await session.close()

Every failure is an `McpError` whose text names the connector; a dead or broken server
gives `Disconnected`: "connector '<name>' disconnected: <reason>". See
docs/dev/connectors.md for the rules and traps.
"""

from skald.mcp.errors import (
    Disconnected,
    ListTooLarge,
    McpError,
    RemoteError,
    RequestTimeout,
    SchemaError,
    SessionExpired,
    TransportClosed,
)
from skald.mcp.http import HttpTransport
from skald.mcp.oauth import ClientInfo, McpOAuth, MemoryStore, OAuthError, OAuthStore, Tokens
from skald.mcp.session import (
    CLIENT_INFO,
    Handlers,
    Limits,
    LogRecord,
    McpSession,
    ProgressCallback,
    Related,
    Timeouts,
    apply_defaults,
    connect,
)
from skald.mcp.tools import check_tool, model_tool_name, tool_spec, tool_specs
from skald.mcp.transport import StdioTransport, Transport
from skald.mcp.wire import (
    LATEST_PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    CallToolResult,
    ContentBlock,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    Implementation,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Root,
    ServerCapabilities,
    TextContent,
    Tool,
)

__all__ = [
    "CLIENT_INFO",
    "LATEST_PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "CallToolResult",
    "ClientInfo",
    "ContentBlock",
    "Disconnected",
    "ElicitRequestParams",
    "ElicitResult",
    "GetPromptResult",
    "Handlers",
    "HttpTransport",
    "Implementation",
    "Limits",
    "ListTooLarge",
    "LogRecord",
    "McpError",
    "McpOAuth",
    "McpSession",
    "MemoryStore",
    "OAuthError",
    "OAuthStore",
    "ProgressCallback",
    "Prompt",
    "ReadResourceResult",
    "Related",
    "RemoteError",
    "RequestTimeout",
    "Resource",
    "ResourceTemplate",
    "Root",
    "SchemaError",
    "ServerCapabilities",
    "SessionExpired",
    "StdioTransport",
    "TextContent",
    "Timeouts",
    "Tokens",
    "Tool",
    "Transport",
    "TransportClosed",
    "apply_defaults",
    "check_tool",
    "connect",
    "model_tool_name",
    "tool_spec",
    "tool_specs",
]
