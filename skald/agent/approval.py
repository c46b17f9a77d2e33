"""The approval gate: may this call run, and if a human must say so, wait for them.

The loop asks `check` before every call. `Require` makes the loop record the call as
awaiting approval, emit `approval_requested`, and await `wait(request)`; the gate
implementation (Skald's lives in the core) shows the request wherever it wants (every
client, the Inbox) and resolves it. The wait is cancelled by `/stop`.

`wait` may also answer `Deferred`: the request stays open beyond this turn (the gate
decided not to hold the conversation, or the process is shutting down). The call then
stays unfinished in state `awaiting_approval`, the turn ends with status
`awaiting_approval`, and `AgentLoop.resume()` later asks the gate again for the same
call id (the gate recognises it and answers from the human's decision).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from skald.agent.tools import Tool, ToolContext
from skald.llm.types import ToolCall


class Allow(msgspec.Struct, frozen=True, tag="allow"):
    pass


class Deny(msgspec.Struct, frozen=True, tag="deny"):
    reason: str


class Require(msgspec.Struct, frozen=True, tag="require"):
    reason: str = ""  # shown to the human with the request


Decision = Allow | Deny | Require


class Approved(msgspec.Struct, frozen=True, tag="approved"):
    pass


class Rejected(msgspec.Struct, frozen=True, tag="rejected"):
    reason: str = ""


class Deferred(msgspec.Struct, frozen=True, tag="deferred"):
    pass


ApprovalOutcome = Approved | Rejected | Deferred


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str
    call_id: str
    tool: str  # the tool the person approves: the one really run (`judged_name`)
    arguments: dict[str, Any]
    kind: str
    reason: str
    depth: int
    via: str | None = None  # the offered tool that dispatches to `tool` (`connector_call`)


class ApprovalGate(Protocol):
    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision: ...

    async def wait(self, request: ApprovalRequest) -> ApprovalOutcome: ...


class AllowAll:
    """Every call runs (tests, trusted ephemeral sub-agents)."""

    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision:
        return Allow()

    async def wait(self, request: ApprovalRequest) -> ApprovalOutcome:
        return Approved()


def refusal_text(tool: str, reason: str) -> str:
    why = f": {reason}" if reason else ""
    return f"The call to {tool} was refused by the approval rules{why}. It did not run; do not retry it unchanged."


def rejection_text(tool: str, reason: str) -> str:
    why = f" ({reason})" if reason else ""
    return f"The user declined the call to {tool}{why}. It did not run."
