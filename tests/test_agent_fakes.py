"""In-memory doubles for the agent library's tests (no tests here).

The agent loop is a pure library whose model source is an interface, so its tests drive
it with a scripted model; the HTTP fake provider is exercised by the provider tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skald.agent import (
    AgentLoop,
    Allow,
    AllowAll,
    ApprovalGate,
    ApprovalOutcome,
    ApprovalRequest,
    Approved,
    CancelScope,
    Decision,
    Event,
    FunctionTool,
    LoopConfig,
    MemoryHistory,
    Tool,
    ToolContext,
    ToolKind,
    ToolResult,
    TurnResult,
)
from skald.llm.types import (
    Finished,
    Message,
    Request,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
    ToolSpec,
    Usage,
)

# -- the scripted model ----------------------------------------------------------------


@dataclass
class Step:
    """One scripted model answer: events in order, optionally an error or a pause."""

    events: list[StreamEvent]
    error: Exception | None = None
    error_after: int = 0  # raise after this many events
    pause: asyncio.Event | None = None
    pause_after: int = 0  # wait on `pause` after this many events


def text(*chunks: str, input_tokens: int = 10, output_tokens: int = 5) -> Step:
    events: list[StreamEvent] = [TextDelta(c) for c in chunks]
    events.append(
        Finished(reason="stop", usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens))
    )
    return Step(events)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="call_0", name=name, arguments=arguments)  # a careless provider's id


def calls(*tool_calls: ToolCall, say: str = "") -> Step:
    events: list[StreamEvent] = [TextDelta(say)] if say else []
    events.extend(ToolCallReady(c) for c in tool_calls)
    events.append(Finished(reason="tool_calls", usage=Usage(input_tokens=10, output_tokens=5)))
    return Step(events)


def failing(error: Exception, *, after: Step | None = None, after_events: int = 0) -> Step:
    base = after.events if after else []
    return Step(list(base), error=error, error_after=after_events)


class ScriptedModel:
    """A `ModelClient` answering from a script, recording every request."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[Request] = []
        self.paused = asyncio.Event()  # set when a step reaches its pause
        self.closed = 0  # streams that were closed (finished or cancelled)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError("the model was called more often than scripted")
        step = self.steps.pop(0)
        try:
            for i, event in enumerate(step.events):
                await self._before(step, i)
                yield event
            await self._before(step, len(step.events))
        finally:
            self.closed += 1

    async def _before(self, step: Step, index: int) -> None:
        if step.error is not None and index == step.error_after:
            raise step.error
        if step.pause is not None and index == step.pause_after:
            self.paused.set()
            await step.pause.wait()


# -- tools, sinks, loops ----------------------------------------------------------------

ToolFn = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]

ANY_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def tool(
    name: str,
    fn: ToolFn,
    *,
    parameters: dict[str, Any] | None = None,
    safe: bool = False,
    kind: ToolKind = "other",
    rerun: bool = False,
) -> FunctionTool:
    spec = ToolSpec(name=name, description=f"the {name} tool", parameters=parameters or ANY_ARGS)
    return FunctionTool(spec, fn, concurrency_safe=safe, kind=kind, rerun_on_recovery=rerun)


def echo_tool(name: str = "echo", **kw: Any) -> FunctionTool:
    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"{name}:{args}")

    return tool(name, run, **kw)


@dataclass
class Sink:
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]

    def types(self) -> list[str]:
        return [type(e).__name__ for e in self.events]


def make_loop(
    model: ScriptedModel,
    tools: Sequence[Tool] | None = None,
    *,
    history: MemoryHistory | None = None,
    gate: ApprovalGate | None = None,
    sink: Sink | None = None,
    cancel: CancelScope | None = None,
    extras: dict[str, object] | None = None,
    joined: Callable[[], Awaitable[Message | None]] | None = None,
    **config: Any,
) -> tuple[AgentLoop, MemoryHistory, Sink]:
    history = history if history is not None else MemoryHistory("conv-1")
    sink = sink if sink is not None else Sink()
    cfg = LoopConfig(model="test-model", retry_backoff_s=0.01, stop_grace_s=1.0, **config)
    gate = gate or AllowAll()
    loop = AgentLoop(
        model, tools or [], history, gate, sink, cfg, cancel=cancel, extras=extras, joined=joined
    )
    return loop, history, sink


async def stopped_mid_stream(loop: AgentLoop, model: ScriptedModel, question: str) -> TurnResult:
    """The turn that asks `question`, stopped (`/stop`) once the model's stream pauses."""
    turn = asyncio.create_task(loop.run_turn(question))
    await model.paused.wait()
    loop.stop()
    return await turn


def results_by_call(messages: list[Message]) -> dict[str, list[Message]]:
    out: dict[str, list[Message]] = {c.id: [] for m in messages for c in m.tool_calls}
    for m in messages:
        if m.role == "tool":
            assert m.tool_call_id in out, f"a result without a call: {m}"
            out[m.tool_call_id].append(m)
    return out


def assert_every_call_answered_once(messages: list[Message]) -> None:
    for call_id, results in results_by_call(messages).items():
        assert len(results) == 1, f"call {call_id} has {len(results)} results"


def tool_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "tool"]


class ScriptedGate:
    """Decides per tool name; `wait` blocks until `release` is set, then answers."""

    def __init__(
        self, decisions: dict[str, Decision | Exception], answer: ApprovalOutcome | None = None
    ) -> None:
        self.decisions = decisions
        self.answer: ApprovalOutcome = answer or Approved()
        self.checked: list[str] = []
        self.requests: list[ApprovalRequest] = []
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision:
        self.checked.append(call.name)
        decision = self.decisions.get(call.name, Allow())
        if isinstance(decision, Exception):
            raise decision
        return decision

    async def wait(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.requests.append(request)
        self.waiting.set()
        await self.release.wait()
        return self.answer
