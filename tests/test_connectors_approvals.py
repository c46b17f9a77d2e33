"""Approvals of connector calls hold per connector and per tool, whichever shape the
model gets the tools in: direct `mcp__<server>__<tool>` (2 connectors) or the catalogue's
`connector_call` (5 connectors, `catalogue_above` 3). Real SDK server processes, real
chat turns through a scripted model, decisions through the member's Inbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Literal, cast

import pytest
from conftest import add_models
from connector_support import installed_for_ada, pending, running, simple_feed
from fake_llm import Call, FakeLLM
from test_connectors_runtime import _tool_results

from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.supervisor import ConnectorInstance
from skald.features.connectors.tools import ConnectorCall, offered
from skald.mcp import Tool, tool_specs
from skald.plugins.facade import Member

Outcome = Literal["ran", "refused", "asked"]
Answer = Literal["reject", "approve", "conversation", "15m"]


class Chat:
    """One member's conversations with the connectors, in one tool shape."""

    def __init__(self, runtime: Runtime, fake: FakeLLM, ada: str, catalogue: bool) -> None:
        self.runtime = runtime
        self.fake = fake
        self.ada = ada
        self.catalogue = catalogue

    def call(self, connector: str, tool: str) -> Call:
        if self.catalogue:
            args = {"connector": connector, "tool": tool, "arguments": {}}
            return Call("connector_call", args)
        return Call(f"mcp__{connector}__{tool}", {})

    async def attempt(
        self, conversation: str, connector: str, tool: str, answer: Answer = "reject"
    ) -> Outcome:
        """Let the model call `connector.tool`; a request for approval gets `answer`."""
        svc = self.runtime.conversations
        self.fake.script("m", [[self.call(connector, tool)], "ok"])
        sent = await svc.send(self.ada, conversation, f"{connector} {tool}")
        assert isinstance(sent, Sent)
        reply = await svc.wait(self.ada, sent)
        if reply.status == "awaiting_approval":
            [item] = await pending(self.runtime, self.ada)
            # The Inbox shows (and a bypass is kept for) the real tool, in both shapes.
            assert item.tool == f"mcp__{connector}__{tool}"
            assert item.preview == f"{connector} → {tool}({{}})"
            bypass: Literal["15m", "conversation"] | None = None
            if answer == "15m" or answer == "conversation":
                bypass = answer
            await svc.decide(self.ada, item.id, answer != "reject", bypass)
            await asyncio.wait_for(sent.done, 20)
            return "asked"
        await asyncio.wait_for(sent.done, 20)
        result = _tool_results(self.fake)[-1]
        if "was refused by the approval rules" in result:
            return "refused"
        assert "12:34" in result or "key" in result, result
        return "ran"


@pytest.fixture(params=[2, 5], ids=["direct-2", "catalogue-5"])
async def chat(
    request: pytest.FixtureRequest,
    runtime: Runtime,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> Chat:
    names = tuple(f"c{i}" for i in range(request.param))
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(catalogue_above=3)
    ada = await installed_for_ada(runtime, household, simple_feed(tmp_path / "feed", names), *names)
    await asyncio.gather(*(running(runtime, "", n, failed_ends=True) for n in names))
    await add_models(runtime, fake_llm, "m")
    catalogue = request.param > 3
    fake_llm.script("m", ["hello"])
    conversation = await runtime.conversations.create(ada)
    sent = await runtime.conversations.send(ada, conversation.id, "hi")
    assert isinstance(sent, Sent)
    await runtime.conversations.wait(ada, sent)
    names_offered = {t["function"]["name"] for t in fake_llm.bodies()[-1]["tools"]}
    assert ("connector_call" in names_offered) is catalogue
    assert ("mcp__c1__now" in names_offered) is not catalogue
    return Chat(runtime, fake_llm, ada, catalogue)


async def _conversation(chat: Chat) -> str:
    return (await chat.runtime.conversations.create(chat.ada)).id


async def _rule(chat: Chat, pattern: str, action: Literal["allow", "deny"]) -> Rule:
    rule = Rule(0, "default", pattern, None, action, 5, f"{action} {pattern}")
    return await chat.runtime.core.registry.save_rule(rule, create=True)


@pytest.mark.parametrize("answer", ["conversation", "15m"])
async def test_approving_one_connectors_tool_for_the_conversation_approves_nothing_else(
    chat: Chat, answer: Answer
) -> None:
    conversation = await _conversation(chat)
    assert await chat.attempt(conversation, "c0", "now", answer) == "asked"
    assert await chat.attempt(conversation, "c0", "now") == "ran"
    # Not connector Y's tool of the same name, not another tool of X.
    assert await chat.attempt(conversation, "c1", "now") == "asked"
    assert await chat.attempt(conversation, "c0", "has_key") == "asked"
    # Not the same tool in another conversation.
    assert await chat.attempt(await _conversation(chat), "c0", "now") == "asked"


async def test_a_plain_approval_covers_that_one_call_only(chat: Chat) -> None:
    conversation = await _conversation(chat)
    assert await chat.attempt(conversation, "c0", "now", "approve") == "asked"
    assert "12:34" in _tool_results(chat.fake)[-1]
    assert await chat.attempt(conversation, "c0", "now") == "asked"


async def test_rules_naming_one_connectors_tool_decide_that_tool_only(chat: Chat) -> None:
    conversation = await _conversation(chat)
    allow = await _rule(chat, "mcp__c0__now", "allow")
    assert await chat.attempt(conversation, "c0", "now") == "ran"
    assert await chat.attempt(conversation, "c1", "now") == "asked"
    assert await chat.attempt(conversation, "c0", "has_key") == "asked"
    await chat.runtime.core.registry.delete_rule(allow.id)
    await _rule(chat, "mcp__c0__now", "deny")
    assert await chat.attempt(conversation, "c0", "now") == "refused"
    assert await chat.attempt(conversation, "c1", "now") == "asked"
    assert await chat.attempt(conversation, "c0", "has_key") == "asked"


async def test_a_deny_rule_holds_against_a_bypass_of_another_connector(chat: Chat) -> None:
    conversation = await _conversation(chat)
    await _rule(chat, "@mcp:c1", "deny")
    assert await chat.attempt(conversation, "c0", "now", "conversation") == "asked"
    assert await chat.attempt(conversation, "c0", "now") == "ran"
    assert await chat.attempt(conversation, "c1", "now") == "refused"


async def test_a_rule_for_a_connector_covers_its_tools_and_no_other_connectors(
    chat: Chat,
) -> None:
    conversation = await _conversation(chat)
    await _rule(chat, "@mcp:c0", "allow")
    assert await chat.attempt(conversation, "c0", "now") == "ran"
    assert await chat.attempt(conversation, "c0", "has_key") == "ran"
    assert await chat.attempt(conversation, "c1", "now") == "asked"


def test_two_tool_names_that_sanitise_alike_are_never_judged_as_one() -> None:
    # `a.b` and `a_b` both become `mcp__x__a_b`: only the first is offered (as the
    # direct shape offers it), so an approval of that name never covers the other tool.
    tools = [Tool(name=n, input_schema={"type": "object"}) for n in ("a.b", "a_b", "c")]
    specs, refused = tool_specs("x", tools)
    inst = cast("ConnectorInstance", SimpleNamespace(name="x", tools=tools, specs=specs))
    assert len(refused) == 1
    assert offered(inst) == {"a.b": "mcp__x__a_b", "c": "mcp__x__c"}
    call = ConnectorCall({"x": inst}, cast("Member", None))
    assert call.touches({"connector": "x", "tool": "a.b"}).acts_as == "mcp__x__a_b"
    assert call.touches({"connector": "x", "tool": "a_b"}).acts_as is None
    assert call.touches({"connector": "y", "tool": "c"}).acts_as is None
