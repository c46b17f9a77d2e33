"""Connector tools for the model: `mcp__<server>__<tool>`, or a short catalogue.

Rule: with few running connectors (at most `catalogue_above`) every tool is offered
directly, described from the server's schema (checked by `skald.mcp.tool_spec`; a
malformed or oversized one is refused and shown to administrators). With more, the
model sees only one line per connector in the prompt and two tools: `activate_tools`
(returns a connector's tools with their parameters) and `connector_call` (calls one).
Either way every call carries the `@mcp:<server>` category and is judged by the name
`mcp__<server>__<tool>` (`connector_call` says so in `Touches.acts_as`), so rules,
"approve for this conversation" and the Inbox see the same tool in both shapes.

Trap: judged by its own name, `connector_call` was one tool for every connector: one
approval for this conversation let any other connector's tools run without asking, and
a rule naming `mcp__<server>__<tool>` never matched it.

Trap: the agent loop's tool set is fixed for a turn (and `skald_tools` does not know the
conversation), so "activating" cannot add real tools mid-turn; it hands the model the
schemas and the call goes through `connector_call`, which the server validates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skald.agent.tools import Reads, Tool, ToolContext, ToolResult, Touches
from skald.features.connectors.content import render
from skald.features.connectors.resources import (
    CONNECTOR_PARAM,
    ByConnector,
    category,
    resource_tools,
)
from skald.llm.types import ToolSpec, tool_spec
from skald.mcp import McpError, SessionExpired, model_tool_name

if TYPE_CHECKING:
    from skald.features.connectors.supervisor import ConnectorInstance, Supervisor
    from skald.plugins.facade import Member

RESULT_CHARS = 50_000
# How long a call the server refused for an unknown session waits for the new session.
RESESSION_WAIT_S = 30.0


async def _call(
    inst: ConnectorInstance, member: Member, tool: str, args: dict[str, Any], ctx: ToolContext
) -> ToolResult:
    from skald.features.connectors.supervisor import CallSite

    if inst.refusal is not None:
        return ToolResult.error(f"connector '{inst.name}' is refused: {inst.refusal.problem}")
    session = inst.session
    if inst.state != "running" or session is None:
        return ToolResult.error(inst.unavailable())

    async def progress(done: float, total: float | None, message: str | None) -> None:
        of = f"/{total:g}" if total else ""
        await ctx.output(f"{message or 'progress'}: {done:g}{of}\n")

    site = CallSite(member=member, conversation_id=ctx.conversation_id, call_id=ctx.call_id)
    inst.calls.append(site)
    try:
        try:
            result = await session.call_tool(tool, args, on_progress=progress, context=site)
        except SessionExpired:
            # The server forgot the session and did not run the call: once more, on the
            # session the supervisor starts next (a fresh initialize), never on the old id.
            fresh = await inst.next_session(session, RESESSION_WAIT_S)
            if fresh is None:
                return ToolResult.error(inst.unavailable())
            result = await fresh.call_tool(tool, args, on_progress=progress, context=site)
    except McpError as exc:
        return ToolResult.error(inst.scrub(str(exc)))
    finally:
        inst.calls.remove(site)
    shown = await render(
        result,
        server=inst.name,
        member=member,
        conversation_id=ctx.conversation_id,
        call_id=ctx.call_id,
    )
    text = inst.scrub(shown.text)[:RESULT_CHARS]
    return ToolResult(
        content=text or "(no output)", is_error=result.is_error, images=tuple(shown.images)
    )


class ConnectorTool(Tool):
    """One MCP tool offered directly."""

    kind = "other"
    concurrency_safe = False

    def __init__(self, spec: ToolSpec, inst: ConnectorInstance, tool: str, member: Member) -> None:
        self.spec = spec
        self.inst = inst
        self.tool = tool
        self.member = member

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches(categories=frozenset({category(self.inst.name)}))

    async def preview(self, args: Mapping[str, Any]) -> str | None:
        return f"{self.inst.name} → {self.tool}({json.dumps(dict(args))[:500]})"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await _call(self.inst, self.member, self.tool, args, ctx)


_ACTIVATE = tool_spec(
    "activate_tools",
    "List a connector's tools with their parameters (the connectors are named in the "
    "system prompt). Call it before `connector_call` for that connector.",
    {"connector": CONNECTOR_PARAM},
    ["connector"],
)

_CALL = tool_spec(
    "connector_call",
    "Call one tool of a connector, after `activate_tools` listed it: `connector`, "
    "`tool` (its name as listed) and `arguments` (an object matching its parameters).",
    {
        "connector": CONNECTOR_PARAM,
        "tool": {"type": "string", "minLength": 1, "maxLength": 128},
        "arguments": {"type": "object"},
    },
    ["connector", "tool"],
)


class ActivateTools(Reads, ByConnector):
    spec = _ACTIVATE

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        inst = self.named(args)
        if inst is None:
            return ToolResult.error(
                f"no connector named {args.get('connector')!r}; available: "
                + ", ".join(sorted(self.instances))
            )
        lines = [f"Tools of {inst.name} (call them with connector_call):"]
        names = offered(inst)
        for tool in inst.tools:
            if tool.name in names:
                schema = json.dumps(tool.input_schema, separators=(",", ":"))
                lines.append(f"- {tool.name}: {tool.description.strip()[:500]}\n  {schema}")
        return ToolResult(content="\n".join(lines))


class ConnectorCall(ByConnector):
    spec = _CALL
    kind = "other"

    def touches(self, args: Mapping[str, Any]) -> Touches:
        inst = self.named(args)
        tool = str(args.get("tool", ""))
        return Touches(
            categories=frozenset({category(str(args.get("connector", "")))}),
            # Unknown connector or tool: judged as `connector_call` (the call will fail).
            acts_as=None if inst is None else offered(inst).get(tool),
        )

    async def preview(self, args: Mapping[str, Any]) -> str | None:
        body = json.dumps(args.get("arguments") or {})[:500]
        return f"{args.get('connector')} → {args.get('tool')}({body})"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        inst = self.instances.get(str(args["connector"]))
        if inst is None:
            return ToolResult.error(f"no connector named {args['connector']!r}")
        if args["tool"] not in offered(inst):
            return ToolResult.error(f"{inst.name} has no tool {args['tool']!r}")
        return await _call(inst, self.member, str(args["tool"]), args.get("arguments") or {}, ctx)


def offered(inst: ConnectorInstance) -> dict[str, str]:
    """The server's tool names that are offered, each with its `mcp__<server>__<tool>`.

    Only tools whose schema passed (`inst.specs`), and of two names that sanitise alike
    only the first (as `tool_specs` offers it): one judged name never stands for two."""
    unclaimed = {s.name for s in inst.specs}
    out = {}
    for tool in inst.tools:
        try:
            name = model_tool_name(inst.name, tool.name)
        except McpError:
            continue
        if name in unclaimed:
            unclaimed.discard(name)
            out[tool.name] = name
    return out


def member_instances(
    sup: Supervisor, user_id: str, names: set[str]
) -> dict[str, ConnectorInstance]:
    out = {}
    for (owner, name), inst in sup.instances.items():
        if name in names and owner in ("", user_id):
            out[name] = inst
    return out


def tools_for(
    instances: dict[str, ConnectorInstance], member: Member, catalogue_above: int
) -> list[Tool]:
    # Resources: one generic pair in both shapes (judged per server: `resources.py`).
    out: list[Tool] = resource_tools(instances, member)
    if len(instances) > catalogue_above:
        return [ActivateTools(instances, member), ConnectorCall(instances, member), *out]
    for inst in instances.values():
        by_model_name = {name: tool for tool, name in offered(inst).items()}
        for spec in inst.specs:
            tool = by_model_name.get(spec.name)
            if tool is not None:
                out.append(ConnectorTool(spec, inst, tool, member))
    return out


def prompt_block(instances: dict[str, ConnectorInstance], catalogue_above: int) -> str:
    """The `MCP_LIST` block: one line per connector (and how to reach its tools)."""
    if not instances:
        return ""
    lines = ["## Connectors", ""]
    catalogue = len(instances) > catalogue_above
    for name in sorted(instances):
        inst = instances[name]
        about = " ".join(inst.connector.description.split())[:160]
        state = "" if inst.state == "running" else f" ({inst.state})"
        if inst.refusal is not None:
            state = f" (refused: {inst.refusal.problem})"
        readable = len(inst.catalog.resources) + len(inst.catalog.templates)
        extra = f", {readable} resources" if readable else ""
        lines.append(f"- {name}{state}: {about} [{len(inst.specs)} tools{extra}]")
    lines.append("")
    if catalogue:
        lines.append(
            "Call `activate_tools` with a connector's name to see its tools, then "
            "`connector_call` to use one."
        )
    else:
        lines.append("Their tools are named `mcp__<connector>__<tool>`.")
    if any(inst.catalog.readable for inst in instances.values()):
        lines.append(
            "Those with resources: `connector_resources` lists them, "
            "`connector_read_resource` reads one."
        )
    return "\n".join(lines)
