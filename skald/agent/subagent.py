"""Sub-agents as a tool: `execute_task` runs a nested loop and returns its final answer.

The child gets its own model, prompt, tools and gate from a factory the caller provides,
an in-memory history (the child's session is ephemeral: after a crash its call is
reported as interrupted, never re-run), the parent call's cancellation scope (so
`/stop` on the parent stops the child and everything under it), and the parent's event
sink (its events carry its own conversation id and depth). Nesting stops at depth 5.
Only synchronous delegation is offered: the parent waits for the child's answer.

A child's conversation id is `<parent conversation>/<parent call id>` (nested:
`<root>/<call>/<call>...`); `root_of` takes it apart. Trap: that id names no stored
conversation and its calls live only in memory, so anything durable about a child (an
Inbox row, a bypass, the security group) must be keyed by the root conversation and the
root call that started it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skald.agent.approval import ApprovalGate
from skald.agent.events import SubagentFinished, SubagentStarted, deliver
from skald.agent.history import MemoryHistory
from skald.agent.loop import AgentLoop, LoopConfig, TurnResult
from skald.agent.tools import Tool, ToolContext, ToolResult
from skald.llm.client import ModelClient
from skald.llm.types import ToolSpec

MAX_DEPTH = 5


def child_conversation_id(conversation_id: str, call_id: str) -> str:
    return f"{conversation_id}/{call_id}"


def root_of(conversation_id: str) -> tuple[str, str | None]:
    """(the stored conversation, the call in it that started this helper, or None for a
    conversation that is not a helper's)."""
    root, _, rest = conversation_id.partition("/")
    return root, (rest.partition("/")[0] or None)


@dataclass(frozen=True, kw_only=True)
class ChildAgent:
    """Everything a sub-agent runs with; its config carries its own prompt and model id."""

    model: ModelClient
    config: LoopConfig
    tools: Sequence[Tool]
    gate: ApprovalGate  # should wait in-process: a deferred approval ends the child


# (requested agent id or None for the default, the parent call's context) -> the child,
# or None when no such agent exists.
ChildFactory = Callable[[str | None, ToolContext], Awaitable[ChildAgent | None]]

DESCRIPTION = (
    "Hand a self-contained task to a sub-agent, which returns its final answer. It sees "
    "nothing of this conversation: put everything it needs in `task`."
)


class SubAgentTool(Tool):
    kind = "other"
    rerun_on_recovery = False
    chat_only = True

    def __init__(
        self,
        factory: ChildFactory,
        *,
        agents: Mapping[str, str] | None = None,
        name: str = "execute_task",
        max_depth: int = MAX_DEPTH,
        concurrency_safe: bool = True,
    ) -> None:
        """`agents`: id -> one-line description of the agents the model may pick (empty
        when the system prompt already describes them: each tool spec is sent every round)."""
        self._factory = factory
        self.max_depth = max_depth
        self.concurrency_safe = concurrency_safe
        self.spec = ToolSpec(name=name, description=DESCRIPTION, parameters=_parameters(agents))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        depth = ctx.depth + 1
        if depth > self.max_depth:
            return ToolResult.error(
                f"Sub-agents cannot nest more than {self.max_depth} levels deep; do this task yourself."
            )
        agent = args.get("agent")
        child = await self._factory(agent, ctx)
        if child is None:
            return ToolResult.error(f"There is no agent named {agent!r}.")
        child_id = child_conversation_id(ctx.conversation_id, ctx.call_id)
        base: dict[str, Any] = {
            "conversation_id": ctx.conversation_id,
            "depth": ctx.depth,
            "call_id": ctx.call_id,
        }
        await deliver(
            ctx.sink, SubagentStarted(**base, child_conversation_id=child_id, agent=agent)
        )
        loop = AgentLoop(
            child.model,
            child.tools,
            MemoryHistory(child_id),
            child.gate,
            ctx.sink,
            child.config,
            cancel=ctx.cancel,
            depth=depth,
            extras=ctx.extras,
        )
        result = await loop.run_turn(args["task"])
        await deliver(
            ctx.sink,
            SubagentFinished(
                **base, child_conversation_id=child_id, status=result.status, error=result.error
            ),
        )
        return _as_tool_result(result, child_id)


def _as_tool_result(result: TurnResult, child_id: str) -> ToolResult:
    metadata: dict[str, Any] = {
        "child_conversation_id": child_id,
        "status": result.status,
        "rounds": result.rounds,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
    }
    if result.status == "done":
        text = result.text or "The sub-agent finished without a final answer."
        return ToolResult(content=text, metadata=metadata)
    if result.status == "stopped":
        text = "The sub-agent was stopped before it finished."
    elif result.status == "awaiting_approval":
        text = "The sub-agent gave up: one of its calls needed an approval that was not given."
    else:
        text = f"The sub-agent failed: {result.error}"
    if result.text:
        text += f"\nIts last words: {result.text}"
    return ToolResult(content=text, is_error=True, metadata=metadata)


def _parameters(agents: Mapping[str, str] | None) -> dict[str, Any]:
    props: dict[str, Any] = {
        "task": {
            "type": "string",
            "description": "The complete brief: goal, facts, paths, the answer wanted.",
        }
    }
    if agents:
        listing = "; ".join(f"{key}: {text}" if text else key for key, text in agents.items())
        props["agent"] = {
            "type": "string",
            "enum": list(agents),
            "description": f"Which agent does the task (default: the general one). {listing}",
        }
    return {
        "type": "object",
        "properties": props,
        "required": ["task"],
        "additionalProperties": False,
    }
