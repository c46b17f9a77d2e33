"""Running the tool calls of one model response.

Rules:
- All calls of a response safe to run together (`concurrency_safe`) run concurrently
  (at most `max_parallel` at a time); otherwise they run one by one in call order.
- `evaluate()` never raises for anything a tool or the gate does: an unknown tool,
  bad arguments, a refusal, an exception or a stop all become an `Outcome` (an error
  result for the model). It returns None only when an approval was deferred.
- Results are persisted by the batch coordinator, outside the cancellable region, so a
  `/stop` can never cut a write in half or race a second result for the same call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from skald.agent.approval import (
    Allow,
    ApprovalGate,
    ApprovalRequest,
    Approved,
    Deferred,
    Deny,
    Rejected,
    refusal_text,
    rejection_text,
)
from skald.agent.cancel import CancelScope, Stopped
from skald.agent.events import CallStatus, Emitter
from skald.agent.history import CallState, HistoryStore, tool_result_message
from skald.agent.schema import validate_arguments
from skald.agent.tools import Tool, ToolContext, ToolResult, judged_name
from skald.llm.types import ToolCall
from skald.log import get_logger

log = get_logger("skald.agent")


@dataclass(frozen=True)
class Outcome:
    result: ToolResult
    state: CallState


class _Defer:
    pass


DEFER: Final = _Defer()

_FINAL_STATUS: dict[CallState, CallStatus] = {
    CallState.DONE: "done",
    CallState.ERROR: "error",
    CallState.DENIED: "denied",
    CallState.INTERRUPTED: "interrupted",
}


def interrupted(text: str) -> Outcome:
    return Outcome(ToolResult.error(text), CallState.INTERRUPTED)


def _refused(text: str) -> Outcome:
    return Outcome(ToolResult.error(text), CallState.DENIED)


@dataclass(eq=False, kw_only=True)
class CallRunner:
    tools: Mapping[str, Tool]
    gate: ApprovalGate
    history: HistoryStore
    emit: Emitter
    scope: CancelScope
    extras: Mapping[str, object]
    max_parallel: int
    max_result_chars: int
    # call id -> how it was settled (this turn)
    outcomes: dict[str, Outcome] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.max_parallel = max(1, self.max_parallel)

    async def run_batch(self, calls: Sequence[ToolCall]) -> bool:
        """Run and settle the calls; False when an approval was deferred (turn pauses)."""
        if len(calls) > 1 and all(self._safe(call) for call in calls):
            return await self._concurrent(calls)
        return await self._sequential(calls)

    async def _sequential(self, calls: Sequence[ToolCall]) -> bool:
        for call in calls:
            outcome = await self.evaluate(call)
            if outcome is None:
                return False  # later calls stay pending; resume() picks them up
            await self.settle(call, outcome)
        return True

    async def _concurrent(self, calls: Sequence[ToolCall]) -> bool:
        limit = asyncio.Semaphore(self.max_parallel)

        async def one(call: ToolCall) -> tuple[ToolCall, Outcome | None]:
            async with limit:
                return call, await self.evaluate(call)

        tasks = [asyncio.ensure_future(one(call)) for call in calls]
        complete = True
        try:
            for next_done in asyncio.as_completed(tasks):
                call, outcome = await next_done
                if outcome is None:
                    complete = False
                else:
                    await self.settle(call, outcome)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return complete

    def _safe(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        return tool is None or tool.concurrency_safe  # an unknown tool only yields an error

    async def evaluate(self, call: ToolCall) -> Outcome | None:
        """Check, gate and run one call; None when its approval was deferred."""
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "none"
            return Outcome(
                ToolResult.error(f"Unknown tool '{call.name}'. Available tools: {names}."),
                CallState.ERROR,
            )
        problems = validate_arguments(call.arguments, tool.spec.parameters)
        if problems:
            text = f"Invalid arguments for {call.name}: {'; '.join(problems)}. Fix them and call again."
            return Outcome(ToolResult.error(text), CallState.ERROR)
        if self.scope.cancelled:
            return interrupted("Not run: the user stopped the turn before this call started.")
        ctx = self.context(call)
        try:
            verdict = await self._ask_gate(call, tool, ctx)
        except Stopped:
            return interrupted(
                "Not run: the user stopped the turn while this call waited for approval."
            )
        if verdict is DEFER:
            return None
        if isinstance(verdict, Outcome):
            return verdict
        try:
            return await self._run_tool(call, tool, ctx)
        except Stopped:
            return interrupted("Stopped by the user while running; it may not have completed.")

    async def _ask_gate(
        self, call: ToolCall, tool: Tool, ctx: ToolContext
    ) -> Outcome | _Defer | None:
        try:
            decision = await self.scope.run(self.gate.check(call, tool, ctx))
        except Stopped:
            raise
        except Exception as exc:
            log.exception("approval check failed", tool=call.name)
            return _refused(
                refusal_text(call.name, f"the approval check failed ({type(exc).__name__})")
            )
        if isinstance(decision, Allow):
            return None
        if isinstance(decision, Deny):
            return _refused(refusal_text(call.name, decision.reason))
        await self.history.mark_call(call.id, CallState.AWAITING_APPROVAL)
        await self.emit.call(call, "awaiting_approval")
        await self.emit.approval(call, tool.kind, decision.reason)
        judged = judged_name(call.name, tool.touches(call.arguments))
        request = ApprovalRequest(
            conversation_id=ctx.conversation_id,
            call_id=call.id,
            tool=judged,
            via=None if judged == call.name else call.name,
            arguments=call.arguments,
            kind=tool.kind,
            reason=decision.reason,
            depth=ctx.depth,
        )
        answer = await self.scope.run(self.gate.wait(request))
        if isinstance(answer, Approved):
            return None
        if isinstance(answer, Rejected):
            return _refused(rejection_text(call.name, answer.reason))
        assert isinstance(answer, Deferred)
        return DEFER

    async def _run_tool(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Outcome:
        await self.history.mark_call(call.id, CallState.RUNNING)
        await self.emit.call(call, "running")
        try:
            result = await self.scope.run(tool.run(dict(call.arguments), ctx))
        except Stopped:
            raise
        except Exception as exc:
            log.warning("tool raised", tool=call.name, error=repr(exc))
            result = ToolResult.error(
                f"The tool {call.name} failed: {type(exc).__name__}: {str(exc)[:300]}"
            )
        if not isinstance(result, ToolResult):
            result = ToolResult.error(f"The tool {call.name} returned no result.")
        return Outcome(
            self._truncate(result), CallState.ERROR if result.is_error else CallState.DONE
        )

    async def settle(self, call: ToolCall, outcome: Outcome) -> None:
        """Persist the one result of `call`, then tell the clients."""
        result = outcome.result
        message = tool_result_message(
            call.id, result.content, is_error=result.is_error, images=result.images
        )
        await self.history.append_result(message, outcome.state, result.metadata)
        self.outcomes[call.id] = outcome
        status = _FINAL_STATUS[outcome.state]
        await self.emit.call(call, status)
        await self.emit.result(call, status, result.content, result.is_error, result.metadata)

    def context(self, call: ToolCall) -> ToolContext:
        return ToolContext(
            conversation_id=self.history.conversation_id,
            call_id=call.id,
            depth=self.emit.depth,
            cancel=self.scope,
            sink=self.emit.sink,
            extras=self.extras,
        )

    def _truncate(self, result: ToolResult) -> ToolResult:
        if len(result.content) <= self.max_result_chars:
            return result
        cut = result.content[: self.max_result_chars]
        note = f"\n\n[output truncated: {len(result.content)} characters, the first {self.max_result_chars} shown]"
        return msgspec.structs.replace(result, content=cut + note)
