"""The model's tools called straight, as the loop would call them: one context whose
events go nowhere, and `RunsTools`, what a test's member holds to run a tool by name
(its arguments checked against the tool's schema first), expect it to answer or to
fail."""

from __future__ import annotations

from typing import Any

from skald.agent import CancelScope, Tool, ToolContext, ToolResult
from skald.agent.events import Event
from skald.agent.schema import validate_arguments


def ignore(event: Event) -> None:
    pass


CTX = ToolContext(
    conversation_id="conv", call_id="call_1", depth=0, cancel=CancelScope(), sink=ignore
)


class RunsTools:
    """For a dataclass with a `tools` field: the tools by name."""

    tools: dict[str, Tool]

    async def run(self, name: str, *, check_schema: bool = True, **args: Any) -> ToolResult:
        tool = self.tools[name]
        if check_schema:  # what the loop would let through
            assert validate_arguments(args, tool.spec.parameters) == []
        return await tool.run(args, CTX)

    async def ok(self, name: str, **args: Any) -> str:
        result = await self.run(name, **args)
        assert not result.is_error, result.content
        return result.content

    async def fails(self, name: str, **args: Any) -> str:
        result = await self.run(name, **args)
        assert result.is_error, result.content
        return result.content
