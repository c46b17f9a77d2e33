"""The shipped default approval gate: its rules, and requests that wait for a person."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from test_agent_fakes import ScriptedModel, call, calls, make_loop, text

from skald.agent import (
    Allow,
    ApprovalRequest,
    Approved,
    CancelScope,
    Deferred,
    Deny,
    FunctionTool,
    Rejected,
    Require,
    Tool,
    ToolContext,
    ToolKind,
    ToolResult,
)
from skald.agent.events import Event
from skald.agent.tools import EXEC as EXEC_CATEGORY
from skald.agent.tools import Touches
from skald.approvals.rules import Rule
from skald.config import SandboxConfig
from skald.core.approvals import SHARED_WRITE_REASON, UNATTENDED_REASON, DefaultGate, decide
from skald.core.users import UserManager
from skald.files.router import PathRouter
from skald.files.tools import file_tools, memory_tools
from skald.llm.types import ToolCall, ToolSpec
from skald.sandbox.manager import SandboxManager
from skald.sandbox.tool import ExecuteCmdTool
from skald.store.owner import OwnerStore
from skald.store.registry import Registry
from skald.store.shared_memory import SharedMemoryStore


def ignore(event: Event) -> None:
    pass


CTX = ToolContext(conversation_id="conv", call_id="c", depth=0, cancel=CancelScope(), sink=ignore)

# The note tools never touch their stores until they run.
NOTE_TOOLS = {
    t.name: t
    for t in memory_tools(cast(OwnerStore, object()), cast(SharedMemoryStore, object()), "u1")
}


def plain(name: str, kind: ToolKind) -> Tool:
    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content="ran")

    spec = ToolSpec(name=name, description=name, parameters={"type": "object"})
    return FunctionTool(spec, run, kind=kind)


OTHER_TOOLS = {
    "execute_cmd": plain("execute_cmd", "exec"),
    "execute_task": plain("execute_task", "other"),
    "fs_read": plain("fs_read", "read"),  # a future file tool, not a note tool
    "fs_write": plain("fs_write", "write"),
}
ALL_TOOLS = NOTE_TOOLS | OTHER_TOOLS

ALLOW = Allow()
SHARED = Require(SHARED_WRITE_REASON)
EXEC = Require("running a command in your sandbox")


def named(tool: str) -> Require:
    return Require(f"using the tool {tool}")


CASES: list[tuple[str, dict[str, Any], Any]] = [
    # the member's own memory: read and write freely
    ("read_file", {"path": "user-memory/people/ada.md"}, ALLOW),
    ("write_file", {"path": "user-memory/people/ada.md", "content": "x"}, ALLOW),
    ("edit_file", {"path": "user-memory/index.md", "old_text": "a", "new_text": "b"}, ALLOW),
    ("list_files", {"path": "user-memory/people"}, ALLOW),
    # the household's memory: reading is free, writing needs a person
    ("read_file", {"path": "shared-memory/house/heating.md"}, ALLOW),
    ("list_files", {"path": "shared-memory/"}, ALLOW),
    ("write_file", {"path": "shared-memory/house/heating.md", "content": "x"}, SHARED),
    ("edit_file", {"path": "shared-memory/index.md", "old_text": "a", "new_text": "b"}, SHARED),
    # note reads without a path cover both stores
    ("list_files", {}, ALLOW),
    ("memory_search", {"query": "bread"}, ALLOW),
    ("memory_search", {"query": "bread", "store": "shared-memory"}, ALLOW),
    # malformed or foreign paths match no memory rule
    ("write_file", {"path": "user-memory/../shared-memory/x.md", "content": "x"}, "write_file"),
    ("read_file", {"path": "/etc/passwd"}, "read_file"),
    ("write_file", {"path": "shared-memory/../../x.md", "content": "x"}, "write_file"),
    ("write_file", {"path": "user-memory/a/../../b.md", "content": "x"}, "write_file"),
    ("write_file", {"path": "   ", "content": "x"}, "write_file"),
    ("write_file", {"content": "x"}, "write_file"),
    ("read_file", {"path": 7}, "read_file"),
    # commands ask, whatever their arguments say; helpers run (their calls pass the gate)
    ("execute_cmd", {"command": "ls"}, EXEC),
    ("execute_cmd", {"path": "user-memory/x.md"}, EXEC),
    ("execute_task", {"task": "plan a trip"}, ALLOW),
    # a tool that is neither a file nor a note tool is no @fs_read/@fs_write: it asks
    ("fs_read", {"path": "shared-memory/house/heating.md"}, "fs_read"),
    ("fs_write", {"path": "user-memory/x.md"}, "fs_write"),
    ("fs_write", {"path": "shared-memory/x.md"}, "fs_write"),
    ("fs_read", {"path": "docs/manual.md"}, "fs_read"),
    ("fs_read", {}, "fs_read"),
]


@pytest.mark.parametrize(("tool", "args", "expected"), CASES)
async def test_default_decisions(tool: str, args: dict[str, Any], expected: Any) -> None:
    gate = DefaultGate()
    decision = await gate.check(
        ToolCall(id="call_1", name=tool, arguments=args), ALL_TOOLS[tool], CTX
    )
    assert decision == (named(expected) if isinstance(expected, str) else expected)


# -- waiting for a person ----------------------------------------------------------------


def request(call_id: str = "call_1", conversation: str = "conv") -> ApprovalRequest:
    return ApprovalRequest(
        conversation_id=conversation,
        call_id=call_id,
        tool="write_file",
        arguments={"path": "shared-memory/x.md", "content": "x"},
        kind="write",
        reason=SHARED_WRITE_REASON,
        depth=0,
    )


async def settle() -> None:
    """Let freshly created tasks run up to their first real wait."""
    for _ in range(5):
        await asyncio.sleep(0)


class Announcements:
    """An async announce callback that lets a test wait for the announcement."""

    def __init__(self) -> None:
        self.seen: list[ApprovalRequest] = []
        self.event = asyncio.Event()

    async def __call__(self, req: ApprovalRequest) -> None:
        self.seen.append(req)
        self.event.set()


async def test_wait_returns_the_decision_made_from_another_task() -> None:
    told = Announcements()
    gate = DefaultGate(told)
    waiter = asyncio.create_task(gate.wait(request()))
    await told.event.wait()
    assert told.seen == [request()]
    assert gate.pending() == [request()]

    async def client() -> bool:
        return gate.resolve("call_1", True)

    assert await asyncio.create_task(client())
    assert await waiter == Approved()
    assert gate.pending() == []
    assert not gate.resolve("call_1", True)  # already answered


async def test_a_rejection_carries_the_reason_and_unknown_ids_are_refused() -> None:
    seen: list[ApprovalRequest] = []
    gate = DefaultGate(seen.append)  # a synchronous announce works too
    waiter = asyncio.create_task(gate.wait(request("call_a")))
    other = asyncio.create_task(gate.wait(request("call_b", conversation="conv2")))
    await settle()
    assert [r.call_id for r in seen] == ["call_a", "call_b"]

    assert not gate.resolve("call_nope", True)
    assert gate.resolve("call_a", False, "not today")
    assert await waiter == Rejected("not today")
    assert [r.call_id for r in gate.pending()] == ["call_b"]
    assert gate.resolve("call_b", True)
    assert await other == Approved()


async def test_a_failing_announce_still_leaves_the_request_answerable() -> None:
    def broken(req: ApprovalRequest) -> None:
        raise RuntimeError("hub is down")

    gate = DefaultGate(broken)
    waiter = asyncio.create_task(gate.wait(request()))
    await settle()
    assert len(gate.pending()) == 1
    assert gate.resolve("call_1", True)
    assert await waiter == Approved()


async def test_unattended_runs_reject_at_once() -> None:
    told = Announcements()
    gate = DefaultGate(told, unattended=True)
    assert await asyncio.wait_for(gate.wait(request()), 1) == Rejected(UNATTENDED_REASON)
    assert gate.pending() == [] and told.seen == []


async def test_cancelling_the_waiter_leaves_no_pending_entry() -> None:
    told = Announcements()
    gate = DefaultGate(told)
    waiter = asyncio.create_task(gate.wait(request()))
    await told.event.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.pending() == []
    assert not gate.resolve("call_1", True)


async def test_cancelling_during_a_slow_announce_leaves_no_pending_entry() -> None:
    started = asyncio.Event()

    async def slow(req: ApprovalRequest) -> None:
        started.set()
        await asyncio.sleep(3600)

    for defer in (False, True):
        gate = DefaultGate(slow, defer_on_wait=defer)
        started.clear()
        waiter = asyncio.create_task(gate.wait(request()))
        await started.wait()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate.pending() == []


async def test_deferred_requests_stay_listed_until_resolved_then_answer_the_next_wait() -> None:
    told = Announcements()
    gate = DefaultGate(told, defer_on_wait=True)
    assert await gate.wait(request()) == Deferred()
    assert gate.pending() == [request()]
    assert await gate.wait(request()) == Deferred()  # asked again before anyone answered
    assert len(told.seen) == 1 and gate.pending() == [request()]

    assert gate.resolve("call_1", False, "ask me later")
    assert gate.pending() == []
    assert not gate.resolve("call_1", True)  # one answer per request
    assert await gate.wait(request()) == Rejected("ask me later")
    # The decision is used once; a new wait for the same call is a new question.
    assert await gate.wait(request()) == Deferred()
    assert gate.resolve("call_1", True)
    assert await gate.wait(request()) == Approved()


async def test_retire_forgets_deferred_requests_and_stored_decisions() -> None:
    gate = DefaultGate(defer_on_wait=True)
    await gate.wait(request("call_a"))
    await gate.wait(request("call_b"))
    assert gate.resolve("call_b", True)
    gate.retire("call_a")
    gate.retire("call_b")
    assert gate.pending() == []
    assert not gate.resolve("call_a", True)
    assert await gate.wait(request("call_b")) == Deferred()  # the old decision is gone


# -- with the real loop and the real note tools --------------------------------------------


async def test_a_shared_write_ends_the_turn_awaiting_approval_then_runs_once_approved(
    users: UserManager, registry: Registry
) -> None:
    created = await users.create("ada", "correct horse battery", "member")
    handle = await users.unlock("ada", "correct horse battery")
    shared = SharedMemoryStore(registry.db)
    tools = memory_tools(handle.store, shared, created.user.id)
    gate = DefaultGate(defer_on_wait=True)
    model = ScriptedModel(
        calls(call("write_file", path="shared-memory/house/bins.md", content="# Bins\nMonday")),
        text("Saved for everyone."),
    )
    loop, _history, _sink = make_loop(model, tools, gate=gate)

    first = await loop.run_turn("note that the bins go out on Monday")
    assert first.status == "awaiting_approval"
    (pending,) = gate.pending()
    assert pending.tool == "write_file" and pending.reason == SHARED_WRITE_REASON
    assert await shared.note_list() == []

    assert gate.resolve(pending.call_id, True)
    resumed = await loop.resume()
    assert resumed.status == "done"
    assert await shared.note_get("house/bins.md") == "# Bins\nMonday"
    assert gate.pending() == []


async def test_a_fifteen_minute_bypass_covers_that_tool_only_and_expires() -> None:
    now = [1000.0]
    gate = DefaultGate(clock=lambda: now[0])
    gate.grant("c1", "execute_cmd", 15 * 60)
    assert await gate.bypassing("c1", "execute_cmd")
    # Not another tool (a shared-memory write still asks), not another conversation.
    assert not await gate.bypassing("c1", "write_file")
    assert not await gate.bypassing("c2", "execute_cmd")
    now[0] += 15 * 60 - 1
    assert await gate.bypassing("c1", "execute_cmd")
    now[0] += 2
    assert not await gate.bypassing("c1", "execute_cmd")


# -- the tool contract: each tool says what a call touches -----------------------------

FILE_TOOLS = {t.name: t for t in file_tools(PathRouter(Path("/nonexistent/home"), None))}
EXEC_TOOL = ExecuteCmdTool(cast(SandboxManager, SimpleNamespace(config=SandboxConfig())), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tool", "args", "categories", "paths", "expected"),
    [
        ("read_file", {"path": "~/notes.txt"}, {"@fs_read"}, ("~/notes.txt",), ALLOW),
        ("list_files", {}, {"@fs_read"}, (), ALLOW),
        ("grep", {"pattern": "x", "path": "docs"}, {"@fs_read"}, ("docs",), ALLOW),
        ("write_file", {"path": "~/a.txt", "content": "x"}, {"@fs_write"}, ("~/a.txt",), ALLOW),
        (
            "edit_file",
            {"path": "shared-memory/a.md"},
            {"@fs_write"},
            ("shared-memory/a.md",),
            SHARED,
        ),
        (
            "write_file",
            {"path": "/etc/x", "content": "x"},
            {"@fs_write"},
            ("/etc/x",),
            "write_file",
        ),
    ],
)
async def test_file_tools_describe_their_categories_and_paths_to_the_rules(
    tool: str, args: dict[str, Any], categories: set[str], paths: tuple[str, ...], expected: Any
) -> None:
    touches = FILE_TOOLS[tool].touches(args)
    assert touches.categories == categories and touches.paths == paths
    decision = await DefaultGate().check(
        ToolCall(id="c", name=tool, arguments=args), FILE_TOOLS[tool], CTX
    )
    assert decision == (named(expected) if isinstance(expected, str) else expected)


def test_execute_cmd_is_exec_and_names_no_path() -> None:
    touches = EXEC_TOOL.touches({"command": "cat ~/x", "workdir": "~/y"})
    assert touches.categories == {"@exec"} and touches.paths == ()
    # A rule on the category decides it whatever the tool is called.
    rule = Rule(1, "default", "@exec", None, "deny", 1, "no commands here")
    call = ToolCall(id="c", name="execute_cmd", arguments={"command": "ls"})
    assert decide(call, EXEC_TOOL, [rule]) == Deny("no commands here")


def _cmd(call_id: str = "x1") -> ToolCall:
    return ToolCall(id=call_id, name="execute_cmd", arguments={"command": "ls"})


async def test_a_members_bypass_never_turns_an_administrators_deny_into_an_allow() -> None:
    from skald.agent import Deny
    from skald.approvals.rules import Rule

    deny = Rule(1, "default", "execute_cmd", None, "deny", 10, "commands are off here")
    ask = Rule(2, "default", "*", None, "require", 100, "using the tool {tool}")

    async def rules_of(group: str) -> list[Rule]:
        return rules

    async def conversation_bypass(conversation_id: str, tool: str) -> bool:
        return True  # "approve for this conversation" was chosen for every tool

    rules = [deny, ask]
    for bypassed in (None, conversation_bypass):
        gate = DefaultGate(rules=rules_of, bypassed=bypassed)
        gate.grant("conv", "execute_cmd", 15 * 60)  # and "approve for 15 minutes"
        decision = await gate.check(_cmd(), OTHER_TOOLS["execute_cmd"], CTX)
        assert decision == Deny("commands are off here")
    # The same bypasses do skip asking where the rules only require a person.
    rules = [ask]
    gate = DefaultGate(rules=rules_of)
    assert isinstance(await gate.check(_cmd(), OTHER_TOOLS["execute_cmd"], CTX), Require)
    gate.grant("conv", "execute_cmd", 15 * 60)
    assert await gate.check(_cmd(), OTHER_TOOLS["execute_cmd"], CTX) == ALLOW


async def test_a_helper_is_judged_by_the_group_and_bypasses_of_the_conversation_it_works_for() -> (
    None
):
    asked: list[str] = []

    async def group_of(conversation_id: str) -> str:
        asked.append(conversation_id)
        return "default"

    gate = DefaultGate(group_of=group_of)
    helper = ToolContext(
        conversation_id="conv/call_1/call_2",
        call_id="call_3",
        depth=2,
        cancel=CancelScope(),
        sink=ignore,
    )
    assert isinstance(await gate.check(_cmd(), OTHER_TOOLS["execute_cmd"], helper), Require)
    assert asked == ["conv"]
    gate.grant("conv", "execute_cmd", 15 * 60)
    assert await gate.check(_cmd(), OTHER_TOOLS["execute_cmd"], helper) == ALLOW


async def test_a_root_step_asks_a_person_whatever_the_rules_and_bypasses_allow() -> None:
    from skald.approvals.rules import Rule

    class RootStep(FunctionTool):
        always_ask = True

        def touches(self, args: Mapping[str, Any]) -> Touches:
            return Touches(categories=frozenset({EXEC_CATEGORY}))

    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(content="ran")

    spec = ToolSpec(name="install_packages", description="x", parameters={"type": "object"})
    tool = RootStep(spec, run, kind="exec")
    allow_all = [Rule(1, "default", "*", None, "allow", 1, "everything")]
    deny = [Rule(1, "default", "@exec", None, "deny", 1, "no commands here")]

    async def rules_allow(group: str) -> list[Rule]:
        return allow_all

    async def rules_deny(group: str) -> list[Rule]:
        return deny

    async def bypassed(conversation: str, name: str) -> bool:
        return True

    gate = DefaultGate(rules=rules_allow, bypassed=bypassed)
    gate.grant("conv", "install_packages", 900)
    call_ = ToolCall(id="c", name="install_packages", arguments={"packages": ["gcc"]})
    decision = await gate.check(call_, tool, CTX)
    assert isinstance(decision, Require) and "root" in decision.reason
    # An ordinary exec tool under the same rules is allowed: only the root step asks.
    assert isinstance(await gate.check(call_, plain("execute_cmd", "exec"), CTX), Allow)
    # An administrator's deny still denies.
    denied = await DefaultGate(rules=rules_deny).check(call_, tool, CTX)
    assert type(denied).__name__ == "Deny"
