"""The tool interface the loop runs, and what a tool gets while it runs.

A tool declares how the loop may treat it:
- `concurrency_safe`: may run at the same time as the other safe calls of one model
  response (reads, searches). One unsafe call makes the whole response sequential.
- `kind`: read / write / exec / other. Recovery after a crash never re-runs `exec` or
  `write` calls (their effects are unknown); approval rules may look at it too.
- `rerun_on_recovery`: a `read`/`other` call interrupted by a crash may simply run
  again (idempotent). Off by default: re-running must be a deliberate promise.

A tool also describes a call to whoever decides on it (the tool contract):
- `touches(args)`: the categories (`FS_READ`, `FS_WRITE`, `EXEC`, or a caller's own
  such as `@mcp:<server>`) and the paths, as written, that the call would touch. The
  approval rules see nothing else: no table elsewhere knows tools by name or type.
- `preview(args)`: what the call would change, for the person deciding (a diff), or
  None. Best effort and side-effect free.
- `Touches.acts_as`: a tool that only dispatches to another (`connector_call` runs
  `mcp__<server>__<tool>`) names the tool it really runs; rules, bypasses and the Inbox
  judge that name (`judged_name`). Trap: judged by the dispatcher's own name, one
  "approve for this conversation" approved every tool it can reach.

Trap: a tool that touches files but leaves `touches` at its default (nothing) is matched
by name only, so path rules never see it; declare what it reaches.
- `always_ask`: a person approves every call, whatever the rules allow and whatever
  bypass the member granted (a rule's deny still denies). For steps that run as root.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from skald.agent.cancel import CancelScope
from skald.agent.events import EventSink, ToolOutput, deliver
from skald.llm.types import ImagePart, ToolSpec

ToolKind = Literal["read", "write", "exec", "other"]

# The categories of the tool contract; a caller may add its own (`@mcp:<server>`).
FS_READ: Final = "@fs_read"  # reads files or notes
FS_WRITE: Final = "@fs_write"  # writes files or notes
FS_APPEND: Final = "@fs_append"  # only adds at the end of a file or note (also @fs_write)
EXEC: Final = "@exec"  # runs commands
PAID: Final = "@paid"  # a request a provider may bill (a picture from an image model)


class Touches(msgspec.Struct, frozen=True, kw_only=True):
    """What one call would touch, as its tool describes it for the given arguments."""

    categories: frozenset[str] = frozenset()
    # The path arguments as the model wrote them (any JSON value: the caller checks).
    paths: tuple[object, ...] = ()
    # The tool this call really runs, when the offered tool only dispatches to it.
    acts_as: str | None = None


def judged_name(name: str, touches: Touches) -> str:
    """The name approvals judge a call by: the tool it really runs (see `acts_as`)."""
    return touches.acts_as or name


def file_touches(kind: str, args: Mapping[str, Any]) -> Touches:
    """What a file-like call touches: `@fs_read`/`@fs_write` by the tool's kind, and its
    `path` argument as written (a listing or search without one names no path)."""
    category = {"read": FS_READ, "write": FS_WRITE}.get(kind)
    raw = args.get("path")
    return Touches(
        categories=frozenset() if category is None else frozenset({category}),
        paths=() if raw is None else (raw,),
    )


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool hands back: text for the model, and metadata for the UI and the store."""

    content: str
    is_error: bool = False
    metadata: dict[str, Any] | None = None
    # Pictures for the model (a connector's image result): they follow the text in the
    # tool message; a model not marked `vision` gets a note instead (`model_select`).
    images: tuple[ImagePart, ...] = ()

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    conversation_id: str
    call_id: str
    depth: int  # 0 in a conversation, 1.. inside sub-agents
    cancel: CancelScope  # the turn's scope: watch it, or hand `cancel.child()` to sub-work
    sink: EventSink  # the turn's event sink (sub-agents forward their events to it)
    extras: Mapping[str, object] = field(default_factory=dict)  # the caller's per-turn state

    async def output(self, chunk: str) -> None:
        """Stream a chunk of output (command output, progress) to every client."""
        await deliver(
            self.sink,
            ToolOutput(
                conversation_id=self.conversation_id,
                depth=self.depth,
                call_id=self.call_id,
                chunk=chunk,
            ),
        )


class Tool(ABC):
    spec: ToolSpec
    concurrency_safe: bool = False
    kind: ToolKind = "other"
    rerun_on_recovery: bool = False
    always_ask: bool = False
    # Offered to chat agents only: a helper's output goes to another agent, not to a
    # person's viewer, and it does its work itself. Every offered tool's schema is sent
    # with every model request, so a tool that cannot help costs tokens each round.
    chat_only: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    def touches(self, args: Mapping[str, Any]) -> Touches:
        """The categories and paths this call would touch (default: nothing declared)."""
        return Touches()

    async def preview(self, args: Mapping[str, Any]) -> str | None:
        """What this call would change, for a person deciding on it (default: none)."""
        return None

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Do the work. Arguments were already checked against `spec.parameters`.

        Raise for failures: the loop turns any exception into an error result for the
        model. Cancellation (`/stop`) arrives as `asyncio.CancelledError`: clean up and
        let it propagate.
        """


class Reads:
    """Mixin for a tool that only reads: safe to run beside others and to run again after
    a crash (list it before the Tool base class)."""

    kind: ToolKind = "read"
    concurrency_safe: bool = True
    rerun_on_recovery: bool = True


class Writes:
    """Mixin for a tool that changes something: runs alone and never twice by itself."""

    kind: ToolKind = "write"
    concurrency_safe: bool = False
    rerun_on_recovery: bool = False


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


class FunctionTool(Tool):
    """A tool from a spec and an async function (small tools, tests)."""

    def __init__(
        self,
        spec: ToolSpec,
        fn: ToolFunction,
        *,
        concurrency_safe: bool = False,
        kind: ToolKind = "other",
        rerun_on_recovery: bool = False,
        touches: Callable[[Mapping[str, Any]], Touches] | None = None,
    ) -> None:
        self.spec = spec
        self._fn = fn
        self._touches = touches
        self.concurrency_safe = concurrency_safe
        self.kind = kind
        self.rerun_on_recovery = rerun_on_recovery

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches() if self._touches is None else self._touches(args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await self._fn(args, ctx)
