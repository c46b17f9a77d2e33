"""The approval gate: the rule engine decides each call; some wait for a person.

`check` finds the conversation's security group (`group_of`), loads that group's rules
(`rules`, from the registry in production; the seeded defaults when not given) and lets
`skald.approvals.rules.evaluate` pick the first matching rule: allow, deny, or require with
the rule's description as the reason shown to the person.

A required call waits for a person: `wait` keeps the request in `pending()`, tells the
hub through `announce` (which shows it on every client), and returns once some client's
`resolve(call_id, …)` decides. Everything here runs on the event loop's thread.

A helper (sub-agent) asks through the same gate under its own conversation id
(`<conversation>/<call>`). Trap: rules and bypasses must use the conversation it works
for (`root_of`), or a helper would fall back to the role's default group and ignore the
group and bypasses chosen for the conversation on screen.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from skald.agent.approval import (
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Approved,
    Decision,
    Deferred,
    Deny,
    Rejected,
    Require,
)
from skald.agent.subagent import root_of
from skald.agent.tools import Tool, ToolContext, judged_name
from skald.approvals.rules import (
    DEFAULT_GROUP,
    SEED_RULES,
    SHARED_WRITE_REASON,
    CallFacts,
    Rule,
    Verdict,
    evaluate,
    normalise_path,
)
from skald.llm.types import ToolCall
from skald.log import get_logger

__all__ = [
    "SHARED_WRITE_REASON",
    "UNATTENDED_REASON",
    "Announce",
    "DefaultGate",
    "ExtraFacts",
    "decide",
    "default_rules",
    "explain",
    "facts_of",
]

log = get_logger("skald.approvals")

UNATTENDED_REASON: Final = "refused automatically: nobody was there to approve it"

Announce = Callable[[ApprovalRequest], Awaitable[None] | None]
RuleSource = Callable[[str], Awaitable[list[Rule]]]  # group -> its rules
GroupOf = Callable[[str], Awaitable[str]]  # conversation id -> its security group
Bypassed = Callable[[str, str], Awaitable[bool]]  # (conversation id, tool) -> skip asking?
# Categories that plugins add to a call beyond what its tool declares (the approval-facts hook).
ExtraFacts = Callable[[ToolCall, Tool], frozenset[str]]


def facts_of(call: ToolCall, tool: Tool, extra: ExtraFacts | None = None) -> CallFacts:
    """What the rules see of a call: its name (the tool it really runs: `judged_name`),
    and the categories and path its tool says it touches (`Tool.touches`), plus any
    categories `extra` adds.

    One path per call: the first the tool names (no tool names more today); none is
    `NO_PATH`, a malformed one matches no path pattern.
    """
    touches = tool.touches(call.arguments)
    categories = touches.categories | (extra(call, tool) if extra is not None else frozenset())
    path = normalise_path(touches.paths[0] if touches.paths else None)
    return CallFacts(judged_name(call.name, touches), categories, path)


def _decision(verdict: Verdict, tool_name: str) -> Decision:
    reason = verdict.rule.description if verdict.rule is not None else verdict.explanation
    reason = reason.replace("{tool}", tool_name)
    if verdict.action == "allow":
        return Allow()
    if verdict.action == "deny":
        return Deny(reason or f"the rules refuse the tool {tool_name}")
    return Require(reason)


def default_rules() -> list[Rule]:
    """The seeded rules as a fresh registry holds them (ids in seeding order)."""
    return [
        Rule(i, r.group, r.tool_pattern, r.path_pattern, r.action, r.priority, r.description)
        for i, r in enumerate(SEED_RULES, start=1)
    ]


def explain(
    call: ToolCall, tool: Tool, rules: list[Rule], group: str, extra: ExtraFacts | None = None
) -> Verdict:
    return evaluate(rules, group, facts_of(call, tool, extra))


def decide(
    call: ToolCall, tool: Tool, rules: list[Rule] | None = None, group: str = DEFAULT_GROUP
) -> Decision:
    """The rules' decision, without any waiting (the shipped defaults unless given)."""
    verdict = explain(call, tool, default_rules() if rules is None else rules, group)
    return _decision(verdict, judged_name(call.name, tool.touches(call.arguments)))


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
        rules: RuleSource | None = None,
        group_of: GroupOf | None = None,
        bypassed: Bypassed | None = None,
        extra_facts: ExtraFacts | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bypassed = bypassed
        self.extra_facts = extra_facts
        self._clock = clock
        self._timed: dict[tuple[str, str], float] = {}  # (conversation, tool) -> until
        self._announce = announce
        self._rules = rules
        self._group_of = group_of
        self.unattended = unattended
        self.defer_on_wait = defer_on_wait
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._decided: dict[tuple[str, str], ApprovalOutcome] = {}

    async def check(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> Decision:
        conversation_id, _ = root_of(ctx.conversation_id)
        group = DEFAULT_GROUP if self._group_of is None else await self._group_of(conversation_id)
        rules = default_rules() if self._rules is None else await self._rules(group)
        facts = facts_of(call, tool, self.extra_facts)
        verdict = evaluate(rules, group, facts)
        log.debug("approval rule", tool=facts.tool, action=verdict.action, rule=verdict.rule_id)
        decision = _decision(verdict, facts.tool)
        if tool.always_ask and not isinstance(decision, Deny):
            # Root steps: a person every time; no rule or bypass turns this into an allow.
            reason = decision.reason if isinstance(decision, Require) else ""
            return Require(reason or f"{call.name} runs as root in your sandbox")
        # A bypass only ever skips asking: it never turns a rule's Deny into an Allow. It
        # is keyed on the tool really run (`connector_call` is no tool of its own here).
        if isinstance(decision, Require) and await self.bypassing(conversation_id, facts.tool):
            return Allow()
        return decision

    def grant(self, conversation_id: str, tool: str, seconds: float) -> None:
        """Let `tool` run without asking in this conversation for a while (in memory)."""
        self._timed[(conversation_id, tool)] = self._clock() + seconds

    async def bypassing(self, conversation_id: str, tool: str) -> bool:
        """Has the member said this exact tool may run here without asking?"""
        until = self._timed.get((conversation_id, tool))
        if until is not None:
            if until > self._clock():
                return True
            del self._timed[(conversation_id, tool)]
        return self._bypassed is not None and await self._bypassed(conversation_id, tool)

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
