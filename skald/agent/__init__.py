"""The agent loop, as a library.

It knows nothing about HTTP, users, databases or Docker: the caller hands it a model
source (`skald.llm.client.ModelClient`, already doing any fallback), a tool set
(`Tool`), a history store (`HistoryStore`), an approval gate (`ApprovalGate`) and an
event sink (a callable receiving `Event`s). Rules and traps: `docs/dev/agent-loop.md`.
"""

from skald.agent.approval import (
    Allow,
    AllowAll,
    ApprovalGate,
    ApprovalOutcome,
    ApprovalRequest,
    Approved,
    Decision,
    Deferred,
    Deny,
    Rejected,
    Require,
)
from skald.agent.cancel import CancelScope, Stopped
from skald.agent.compaction import (
    SUMMARY_PREFIX,
    CompactionError,
    CompactionResult,
    compact,
    estimate_tokens,
)
from skald.agent.events import (
    AgentEvent,
    ApprovalRequested,
    CallStatus,
    Compacted,
    Event,
    EventSink,
    ModelSwitched,
    ReasoningStreamed,
    SubagentFinished,
    SubagentStarted,
    TokenDelta,
    ToolCallUpdate,
    ToolFinished,
    ToolOutput,
    TurnDone,
    TurnStarted,
    TurnStatus,
    UsageReport,
)
from skald.agent.history import CallState, HistoryStore, MemoryHistory, UnfinishedCall, project
from skald.agent.loop import AgentLoop, LoopConfig, TurnResult
from skald.agent.recovery import needs_resume
from skald.agent.subagent import ChildAgent, ChildFactory, SubAgentTool
from skald.agent.tools import FunctionTool, Tool, ToolContext, ToolKind, ToolResult, Touches

__all__ = [
    "SUMMARY_PREFIX",
    "AgentEvent",
    "AgentLoop",
    "Allow",
    "AllowAll",
    "ApprovalGate",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalRequested",
    "Approved",
    "CallState",
    "CallStatus",
    "CancelScope",
    "ChildAgent",
    "ChildFactory",
    "Compacted",
    "CompactionError",
    "CompactionResult",
    "Decision",
    "Deferred",
    "Deny",
    "Event",
    "EventSink",
    "FunctionTool",
    "HistoryStore",
    "LoopConfig",
    "MemoryHistory",
    "ModelSwitched",
    "ReasoningStreamed",
    "Rejected",
    "Require",
    "Stopped",
    "SubAgentTool",
    "SubagentFinished",
    "SubagentStarted",
    "TokenDelta",
    "Tool",
    "ToolCallUpdate",
    "ToolContext",
    "ToolFinished",
    "ToolKind",
    "ToolOutput",
    "ToolResult",
    "Touches",
    "TurnDone",
    "TurnResult",
    "TurnStarted",
    "TurnStatus",
    "UnfinishedCall",
    "UsageReport",
    "compact",
    "estimate_tokens",
    "needs_resume",
    "project",
]
