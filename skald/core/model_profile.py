"""What a chat turn offers the model it goes to: the full prompt and every tool, the
compact profile, or no tools at all.

Rule: the turn's profile follows the model AUTO (or the member) puts first. A model not
marked with the `tools` capability gets no tools and a prompt without their
descriptions (and says what it cannot do). The compact profile (a model set to
`compact`, or `auto` with a context window of at most COMPACT_WINDOW tokens) gets the
short fragments of `agents/common/compact/`, the CORE_TOOLS with their schemas, and
`more_tools`, which lists the member's other tools and their parameters on demand; the
model then calls them by their own names. A full turn is composed exactly as before.

Trap: a catalogue that *called* other tools under its own name would hide them from the
approval rules (written for `write_file`, not for a wrapper): here every call still
runs as the real tool, through the gate, under its own name. And a fallback model in
a turn with tools that cannot use them gets none on the wire (`_with_model`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from skald.agent.tools import FS_READ, Reads, Tool, ToolContext, ToolResult, Touches
from skald.llm.types import tool_spec
from skald.store.llm import ModelRow

TurnProfile = Literal["full", "compact", "no_tools"]

# The context window (tokens) at and below which `auto` means compact.
COMPACT_WINDOW: Final = 8192
# What a small model is shown with their schemas: reading and writing files and notes,
# and reminders (each schema costs a small model seconds of reading on every first turn).
CORE_TOOLS: Final = frozenset({"read_file", "write_file", "schedule"})
# Prompt blocks that describe tools (connectors, helpers, commands): a compact or
# tool-less prompt leaves them out.
TOOL_BLOCKS: Final = frozenset({"MCP_LIST", "TASK_AGENTS", "SANDBOX_COMMANDS", "SKILLS_LIST"})
# The fragment folders under agents/common/ each profile reads first.
VARIANTS: Final[Mapping[TurnProfile, tuple[str, ...]]] = {
    "full": (),
    "compact": ("compact",),
    "no_tools": ("no-tools", "compact"),
}
MORE_TOOLS: Final = "more_tools"


def turn_profile(model: ModelRow) -> TurnProfile:
    """The profile a turn answered by `model` gets."""
    if "tools" not in model.capabilities:
        return "no_tools"
    if model.prompt_profile == "compact":
        return "compact"
    small = model.context_window is not None and model.context_window <= COMPACT_WINDOW
    return "compact" if model.prompt_profile == "auto" and small else "full"


def prompt_values(profile: TurnProfile, values: Mapping[str, str]) -> Mapping[str, str]:
    """The prompt blocks for `profile`: all of them for a full turn."""
    if profile == "full":
        return values
    return {k: v for k, v in values.items() if k not in TOOL_BLOCKS}


def _first_sentence(text: str) -> str:
    line = " ".join(text.split())
    cut = line.find(". ")
    return (line if cut < 0 else line[: cut + 1])[:160]


class MoreTools(Reads, Tool):
    """The catalogue of the tools a compact turn does not describe up front."""

    spec = tool_spec(
        MORE_TOOLS,
        "Lists more tools (with `names`: their parameters); then call them by name.",
        {
            "names": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 128},
                "maxItems": 10,
            }
        },
    )

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = {t.name: t for t in tools}

    def touches(self, args: Mapping[str, Any]) -> Touches:
        # A listing of the member's own tools, read from Skald itself: the rules treat it
        # as a listing without a path (allowed by default, no Inbox item for a catalogue).
        return Touches(categories=frozenset({FS_READ}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        names = args.get("names") or []
        if not names:
            lines = [f"- {n}: {_first_sentence(t.spec.description)}" for n, t in self.tools.items()]
            return ToolResult(content="\n".join(lines) or "(no more tools)")
        unknown = [n for n in names if n not in self.tools]
        if unknown:
            return ToolResult.error(
                f"no tool named {', '.join(unknown)}; available: {', '.join(self.tools)}"
            )
        out = []
        for name in names:
            spec = self.tools[name].spec
            schema = json.dumps(spec.parameters, separators=(",", ":"))
            out.append(f"- {name}: {spec.description.strip()}\n  parameters: {schema}")
        return ToolResult(content="\n".join(out))


def offered(
    profile: TurnProfile, tools: Sequence[Tool]
) -> tuple[list[Tool], frozenset[str] | None]:
    """The tools a turn holds and the names whose schemas go with each request (None:
    all). A compact turn holds every tool plus `more_tools`, describing only the core."""
    if profile == "no_tools":
        return [], None
    if profile == "full":
        return list(tools), None
    rest = [t for t in tools if t.name not in CORE_TOOLS]
    if not rest:
        return list(tools), None
    core = frozenset(t.name for t in tools if t.name in CORE_TOOLS)
    return [*tools, MoreTools(rest)], core | {MORE_TOOLS}
