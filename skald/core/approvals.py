"""The approval gate Skald ships until the rule engine arrives (issue #4).

Decisions, from the tool's `kind` and the note store its `path` argument names:
- reads of `user-memory/…` or `shared-memory/…` (and note-tool reads without a path:
  `memory_search`, `list_files` of both stores) -> Allow;
- writes to `user-memory/…` -> Allow; writes to `shared-memory/…` -> Require;
- anything else -> Require, with a reason that names the tool.

The store is taken from the path only when the path is well formed by the note-path
rules (`parse_note_path` / `parse_note_folder`, the same ones the tools apply). A
malformed path (`user-memory/../shared-memory/x.md`) matches no memory rule and falls to
the catch-all Require, even though the tool would refuse it anyway.

A required call waits for a person: `wait` keeps the request in `pending()`, tells the
hub through `announce` (which shows it on every client), and returns once some client's
`resolve(call_id, …)` decides. Everything here runs on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from skald.agent.approval import (
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Approved,
    Decision,
    Deferred,
    Rejected,
    Require,
)
from skald.agent.note_paths import (
    SHARED_MEMORY,
    USER_MEMORY,
    NoteStoreName,
    parse_note_folder,
    parse_note_path,
    store_of,
)
from skald.agent.subagent import SubAgentTool
from skald.agent.tools import Tool, ToolContext
from skald.errors import InvalidInputError
from skald.files.tools import FileTool
from skald.llm.types import ToolCall
from skald.log import get_logger
from skald.tools.memory import NoteTool

__all__ = ["SHARED_WRITE_REASON", "UNATTENDED_REASON", "Announce", "DefaultGate", "decide"]

log = get_logger("skald.approvals")

SHARED_WRITE_REASON: Final = "writing to the household's shared memory"
UNATTENDED_REASON: Final = "refused automatically: nobody was there to approve it"

Announce = Callable[[ApprovalRequest], Awaitable[None] | None]


def _note_store(path: str) -> NoteStoreName | None:
    """The store a well-formed note or folder path names; None for anything else."""
    try:
        return parse_note_path(path).store
    except InvalidInputError:
        pass
    try:
        return parse_note_folder(path).store
    except InvalidInputError:
        return None


def _notes_touched(call: ToolCall, tool: Tool) -> NoteStoreName | Literal["both"] | None:
    """Which note store a call works on; None when it is not (only) the note stores."""
    path = call.arguments.get("path")
    if isinstance(path, str) and path.strip():
        return _note_store(path)
    if (path is None or isinstance(path, str)) and isinstance(tool, NoteTool):
        return "both"  # memory_search, or list_files of both stores
    return None


def decide(call: ToolCall, tool: Tool) -> Decision:
    """The default rules, without any waiting."""
    place = _notes_touched(call, tool)
    if place is not None and tool.kind == "read":
        return Allow()
    if place == USER_MEMORY and tool.kind == "write":
        return Allow()
    if place == SHARED_MEMORY and tool.kind == "write":
        return Require(SHARED_WRITE_REASON)
    # The file tools only ever reach the member's own places (the router refuses the
    # rest), so only what leaves those places needs a person: household notes.
    if isinstance(tool, FileTool):
        path = call.arguments.get("path", "")
        if tool.kind == "read":
            return Allow()  # the member's own home, the manual, notes they may read
        if tool.kind == "write" and store_of(path) != SHARED_MEMORY:
            return Allow()  # their own home and private notes
        if tool.kind == "write":
            return Require(SHARED_WRITE_REASON)
    if isinstance(tool, SubAgentTool):
        # Handing work to a helper changes nothing by itself; every call the helper makes
        # passes this same gate.
        return Allow()
    return Require(f"using the tool {call.name}")


@dataclass
class _Pending:
    request: ApprovalRequest
    future: asyncio.Future[ApprovalOutcome] | None  # None: deferred, nobody is waiting


class DefaultGate:
    """The rule-based default `ApprovalGate`, holding the requests that wait for a person.

    - `unattended=True` (background runs): every Require is rejected at once.
    - `defer_on_wait=True` (the synchronous chat request): `wait` lists the request and
      answers `Deferred`, so the turn ends `awaiting_approval`; `resolve` then records the
      decision, and the next `wait` for that call (from `AgentLoop.resume()`) returns it.
    """

    def __init__(
        self,
        announce: Announce | None = None,
        *,
        unattended: bool = False,
        defer_on_wait: bool = False,
    ) -> None:
        self._announce = announce
        self.unattended = unattended
        self.defer_on_wait = defer_on_wait
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._decided: dict[tuple[str, str], ApprovalOutcome] = {}

    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision:
        return decide(call, tool)

    async def wait(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Wait for a person's decision (one `wait` per call at a time: the loop's rule)."""
        key = (request.conversation_id, request.call_id)
        decided = self._decided.pop(key, None)
        if decided is not None:
            return decided
        if self.unattended:
            return Rejected(UNATTENDED_REASON)
        if self.defer_on_wait:
            if key not in self._pending:
                self._pending[key] = _Pending(request, None)
                try:
                    await self._tell(request)
                except BaseException:  # cancelled while announcing: leave nothing behind
                    self._pending.pop(key, None)
                    raise
            return Deferred()
        entry = _Pending(request, asyncio.get_running_loop().create_future())
        self._pending[key] = entry
        try:
            await self._tell(request)
            assert entry.future is not None
            return await entry.future
        finally:
            if self._pending.get(key) is entry:
                del self._pending[key]

    def resolve(self, call_id: str, approved: bool, reason: str = "") -> bool:
        """A person's answer from any client; False when no such request is waiting."""
        key = next((k for k in self._pending if k[1] == call_id), None)
        if key is None:
            return False
        entry = self._pending.pop(key)
        outcome: ApprovalOutcome = Approved() if approved else Rejected(reason)
        if entry.future is None:
            self._decided[key] = outcome
            return True
        if entry.future.done():  # its waiter was cancelled a moment ago
            return False
        entry.future.set_result(outcome)
        return True

    def decide_ahead(
        self, conversation_id: str, call_id: str, approved: bool, reason: str = ""
    ) -> None:
        """Record a decision for a call whose request is not (yet) waiting here: after a
        restart the history shows it open before recovery has asked the gate again."""
        if not self.resolve(call_id, approved, reason):
            self._decided[(conversation_id, call_id)] = Approved() if approved else Rejected(reason)

    def pending(self) -> list[ApprovalRequest]:
        """The requests waiting for a person, oldest first."""
        return [entry.request for entry in self._pending.values()]

    def retire(self, call_id: str) -> None:
        """Forget a deferred request or a stored decision whose call was settled otherwise.

        The hub calls it when a call gets its result without asking the gate again (the
        member sent a new message while the request was open). A live waiter is left
        alone: its own turn ends it.
        """
        for key in [k for k, e in self._pending.items() if k[1] == call_id and e.future is None]:
            del self._pending[key]
        for key in [k for k in self._decided if k[1] == call_id]:
            del self._decided[key]

    async def _tell(self, request: ApprovalRequest) -> None:
        if self._announce is None:
            return
        try:
            result = self._announce(request)
            if inspect.isawaitable(result):
                await result
        except Exception:  # the request stays listed in pending(); a client can still answer
            log.exception("announcing an approval request failed", tool=request.tool)
