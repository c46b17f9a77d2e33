"""What to do with calls a turn left unfinished.

Two situations:
- **Recovery** (`AgentLoop.resume()`, after a crash or a deferred approval): a call
  that never started (`pending`) or was waiting for a human (`awaiting_approval`) goes
  through the gate again and runs; a `running` call is re-run only when its tool is a
  `read`/`other` tool that promises `rerun_on_recovery`; every other running call is
  reported as interrupted (its effects are unknown: a command may have half-run).
- **Repair** (a new user message arrives while calls are still open): nothing runs;
  every open call gets an "interrupted" result so the history stays valid and the model
  learns what did not happen.
"""

from __future__ import annotations

from skald.agent.history import CallState, HistoryStore, UnfinishedCall, project
from skald.agent.tools import Tool

EXEC_INTERRUPTED = (
    "The command was interrupted by a restart; it may or may not have completed. "
    "Check its effects before running it again."
)
CALL_INTERRUPTED = "The call was interrupted by a restart; it may or may not have completed."
TOOL_GONE = "The call was interrupted by a restart, and the tool {name} is no longer available."
APPROVAL_SUPERSEDED = (
    "Not run: the approval request was still open when the user sent a new message."
)
NOT_STARTED = "Not run: the turn ended before this call started."


def recovery_action(open_call: UnfinishedCall, tool: Tool | None) -> str | None:
    """None: run the call (through the gate); otherwise the interrupted result's text."""
    if tool is None:
        return TOOL_GONE.format(name=open_call.call.name)
    if open_call.state is not CallState.RUNNING:
        return None
    if tool.kind in ("read", "other") and tool.rerun_on_recovery:
        return None
    return EXEC_INTERRUPTED if tool.kind == "exec" else CALL_INTERRUPTED


def repair_text(open_call: UnfinishedCall, tool: Tool | None) -> str:
    """The result given to an open call when the user moves on with a new message."""
    if open_call.state is CallState.AWAITING_APPROVAL:
        return APPROVAL_SUPERSEDED
    if open_call.state is CallState.PENDING:
        return NOT_STARTED
    if tool is not None and tool.kind == "exec":
        return EXEC_INTERRUPTED
    return CALL_INTERRUPTED


async def needs_resume(history: HistoryStore) -> bool:
    """Whether the conversation has unfinished work: open calls, or no reply yet.

    True after a crash mid-turn, a deferred approval, or a delivered result that the
    model has not seen (the last message is a user or tool message). Also true after a
    turn that failed (the user message is unanswered): the caller decides whether to
    resume those.
    """
    if await history.unfinished_calls():
        return True
    messages = project(await history.load())
    return bool(messages) and messages[-1].role in ("user", "tool")
