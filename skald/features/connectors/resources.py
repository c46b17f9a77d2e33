"""A connector's resources, resource templates and prompts (issue 23 item 4).

Rule: each session lists them once it runs (and again on the server's `list_changed`),
within the client's list limits; the model reads them through one generic pair of tools,
`connector_resources` (what a connector offers) and `connector_read_resource` (one URI),
offered in both tool shapes whenever a switched-on connector has any. A read is judged
as `mcp__<server>__read_resource` with `@mcp:<server>` (`Touches.acts_as`), so rules,
bypasses and "approve for this conversation" see the real server, never one grant for
every connector. Where the server supports it, a resource the model read is subscribed
to (up to `SUBSCRIBE_MAX` per session), and its updates become instance events. Prompts
are the member's: the page lists them and inserts one into the chat composer.

Traps:
- A server without templates (or prompts) may answer "method not found" although it
  announced resources: that is an empty list, not a broken connector.
- Too long a list (`ListTooLarge`) drops that list with an event; the tools still work.
- A resource's contents are the server's: pictures and blobs go through the same
  rendering as a tool's result (`content.render`), text is clipped.
- Not every listed resource is subscribed: servers such as server-everything send an
  update for each every few seconds, which would push every other event out. The
  same update again within `UPDATE_QUIET_S` is not noted twice.
- A server tool that is itself named `read_resource` is judged by the same name as a
  resource read of that server: one "for this conversation" covers both (same server).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skald.agent.tools import Reads, Tool, ToolContext, ToolResult, Touches
from skald.features.connectors.content import render
from skald.llm.types import tool_spec
from skald.mcp import McpError, McpSession, Prompt, Resource, ResourceTemplate
from skald.mcp.wire import CallToolResult, EmbeddedResource

if TYPE_CHECKING:
    from skald.features.connectors.supervisor import ConnectorInstance
    from skald.plugins.facade import Member

SUBSCRIBE_MAX = 20
UPDATE_QUIET_S = 60.0
LISTED_IN_TOOL = 100  # resources named by `connector_resources`
RESULT_CHARS = 50_000


@dataclass
class Catalog:
    """What one session of a connector offers besides tools."""

    resources: list[Resource] = field(default_factory=list)
    templates: list[ResourceTemplate] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    subscribed: set[str] = field(default_factory=set)
    updates: dict[str, float] = field(default_factory=dict)  # uri -> when last noted
    listed_bytes: int = 0

    @property
    def readable(self) -> bool:
        return bool(self.resources or self.templates)

    async def refresh(self, session: McpSession, note: Callable[[str, str], None]) -> None:
        caps = session.server_capabilities
        if isinstance(caps.resources, dict):
            self.resources = await _listed(session.list_resources, "resources", note)
            self.templates = await _listed(
                session.list_resource_templates, "resource templates", note
            )
        if isinstance(caps.prompts, dict):
            self.prompts = await _listed(session.list_prompts, "prompts", note)
        self.listed_bytes = sum(
            session.listed.get(m, (0, 0))[1]
            for m in ("resources/list", "resources/templates/list", "prompts/list")
        )

    async def watch(self, session: McpSession, uri: str, note: Callable[[str, str], None]) -> None:
        """Subscribe to a resource that was read, where the server supports it."""
        if not session.can_subscribe or uri in self.subscribed:
            return
        if len(self.subscribed) >= SUBSCRIBE_MAX:
            return
        try:
            await session.subscribe(uri)
        except McpError as exc:
            note("error", f"cannot subscribe to {uri}: {exc}")
            return
        self.subscribed.add(uri)

    def updated(self, uri: str, now: float) -> bool:
        """Whether an update of `uri` is worth an event (not the same one just now)."""
        last = self.updates.get(uri)
        self.updates[uri] = now
        return last is None or now - last >= UPDATE_QUIET_S


async def _listed(fetch: Callable[[], Any], noun: str, note: Callable[[str, str], None]) -> Any:
    try:
        return await fetch()
    except McpError as exc:
        if "-32601" not in str(exc) and "not found" not in str(exc).lower():
            note("error", f"cannot list {noun}: {exc}")
        return []


def _describe(resource: Resource | ResourceTemplate) -> str:
    title = resource.title if isinstance(resource.title, str) else ""
    about = resource.description if isinstance(resource.description, str) else ""
    mime = f" ({resource.mime_type})" if isinstance(resource.mime_type, str) else ""
    text = " - ".join(t for t in (resource.name, title, about.strip()[:200]) if t)
    return f"{text}{mime}"


# A tool argument naming one of the member's connectors (every tool of the pair and of
# the catalogue shape takes one).
CONNECTOR_PARAM: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 40}

_LIST = tool_spec(
    "connector_resources",
    "List what a connector offers to read (resources: documents, records, files; and "
    "URI templates to fill in). Read one with `connector_read_resource`.",
    {"connector": CONNECTOR_PARAM},
    ["connector"],
)

_READ = tool_spec(
    "connector_read_resource",
    "Read one resource of a connector by its URI (as `connector_resources` lists it, "
    "or a template filled in).",
    {
        "connector": CONNECTOR_PARAM,
        "uri": {"type": "string", "minLength": 1, "maxLength": 2000},
    },
    ["connector", "uri"],
)


def category(server: str) -> str:
    """The category every call on connector `server` carries, in either tool shape and
    for its resources alike: rules and grants name `@mcp:<server>`."""
    return f"@mcp:{server}"


def read_name(server: str) -> str:
    """The name a resource read of `server` is judged by (rules, grants, the Inbox)."""
    return f"mcp__{server}__read_resource"


class ByConnector(Tool):
    """A tool that names its connector in its `connector` argument: one of the member's
    running connectors (`instances`, by name). The resource pair and the catalogue
    shape's `activate_tools` and `connector_call` are built alike."""

    def __init__(self, instances: dict[str, ConnectorInstance], member: Member) -> None:
        self.instances = instances
        self.member = member

    def named(self, args: Mapping[str, Any]) -> ConnectorInstance | None:
        """The connector `args` names; None for a name no running connector has."""
        return self.instances.get(str(args.get("connector", "")))

    def touches(self, args: Mapping[str, Any]) -> Touches:
        # Even listing what a connector offers falls under that connector's rules.
        return Touches(categories=frozenset({category(str(args.get("connector", "")))}))


class ListResources(Reads, ByConnector):
    spec = _LIST

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        inst = self.named(args)
        if inst is None or not inst.catalog.readable:
            offering = sorted(n for n, i in self.instances.items() if i.catalog.readable)
            return ToolResult.error(
                f"no connector named {args.get('connector')!r} offers resources; these do: "
                + (", ".join(offering) or "none")
            )
        catalog = inst.catalog
        lines = [f"Resources of {inst.name} (read them with connector_read_resource):"]
        lines += [f"- {r.uri}: {_describe(r)}" for r in catalog.resources[:LISTED_IN_TOOL]]
        if len(catalog.resources) > LISTED_IN_TOOL:
            lines.append(f"(and {len(catalog.resources) - LISTED_IN_TOOL} more)")
        if catalog.templates:
            lines.append("URI templates (fill in the {placeholders}):")
            lines += [f"- {t.uri_template}: {_describe(t)}" for t in catalog.templates]
        return ToolResult(content="\n".join(lines))


class ReadResource(ByConnector):
    spec = _READ
    kind = "read"

    def touches(self, args: Mapping[str, Any]) -> Touches:
        server = str(args.get("connector", ""))
        return Touches(
            categories=frozenset({category(server)}),
            # Unknown connector: judged as itself (the call will fail).
            acts_as=read_name(server) if server in self.instances else None,
        )

    async def preview(self, args: Mapping[str, Any]) -> str | None:
        return f"{args.get('connector')} → read {str(args.get('uri'))[:500]}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        inst = self.instances.get(str(args["connector"]))
        if inst is None or not inst.catalog.readable:
            return ToolResult.error(f"no connector named {args['connector']!r} offers resources")
        session = inst.session
        if inst.state != "running" or session is None:
            return ToolResult.error(inst.unavailable())
        try:
            read = await session.read_resource(str(args["uri"]))
        except McpError as exc:
            return ToolResult.error(inst.scrub(str(exc)))
        await inst.catalog.watch(session, str(args["uri"]), inst.note)
        # The contents as embedded resources: one rendering for pictures and blobs.
        result = CallToolResult(content=[EmbeddedResource(resource=c) for c in read.contents])
        shown = await render(
            result,
            server=inst.name,
            member=self.member,
            conversation_id=ctx.conversation_id,
            call_id=ctx.call_id,
        )
        text = inst.scrub(shown.text)[:RESULT_CHARS]
        return ToolResult(content=text or "(empty)", images=tuple(shown.images))


def resource_tools(instances: dict[str, ConnectorInstance], member: Member) -> list[Tool]:
    """The pair, when a switched-on connector offers something to read."""
    if not any(inst.catalog.readable for inst in instances.values()):
        return []
    return [ListResources(instances, member), ReadResource(instances, member)]


def prompt_text(messages: list[Any]) -> str:
    """A prompt's messages as one text for the composer (text blocks only)."""
    parts = []
    for message in messages:
        text = getattr(message.content, "text", None)
        if isinstance(text, str):
            parts.append(text)
        elif isinstance(message.content, EmbeddedResource):
            res = message.content.resource
            parts.append(res.text if isinstance(res.text, str) else f"[resource {res.uri}]")
    return "\n\n".join(parts)
