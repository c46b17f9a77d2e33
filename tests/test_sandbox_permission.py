"""`sandbox.exec` decides whether the assistant may run commands: without it a member's
assistant is not offered `execute_cmd` (tool list and prompt), a model that calls it
anyway gets a refusal and nothing runs, and taking the capability away applies to the
member's next turn and to the tool itself."""

from __future__ import annotations

from typing import Any

from conftest import PASSWORD, MakeClient, admin_adds_models, post_chat, signed_in
from fake_llm import Call, FakeLLM, Text
from sandbox_support import with_sandbox_fixture  # noqa: F401

from skald.agent import ToolContext
from skald.agent.cancel import CancelScope
from skald.core.runtime import Runtime
from skald.sandbox.tool import SANDBOX_EXEC, ExecuteCmdTool
from skald.store.rows import Role


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


async def test_without_sandbox_exec_execute_cmd_is_not_offered_and_a_call_is_refused(
    with_sandbox: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    runtime = with_sandbox
    assert runtime.sandbox is not None
    member = await runtime.core.registry.get_role("member")
    assert member is not None and SANDBOX_EXEC.name in member.capabilities
    await runtime.core.registry.save_role(
        Role(
            name="nocmd",
            display_name="No commands",
            builtin=False,
            capabilities=[c for c in member.capabilities if c != SANDBOX_EXEC.name],
            attributes=member.attributes,
        ),
        create=True,
    )
    eve = await runtime.core.users.create("eve", PASSWORD, "nocmd")
    for user_id in (household["ada"], eve.user.id):
        runtime.sandbox.commands[user_id] = ["python3", "tesseract"]  # as a probe would
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])

    # The member role holds it: offered in the tools and the prompt.
    fake_llm.script("model-a", [Text("hello Ada")])
    ada = await signed_in(make_client, "ada")
    await post_chat(ada, "hi")
    body = fake_llm.bodies("openai")[-1]
    assert "execute_cmd" in _tool_names(body)
    assert "## Your sandbox" in _system(body)

    # Without it: neither, and a scripted model calling it anyway is refused.
    fake_llm.script(
        "model-a",
        [[Call("execute_cmd", {"command": "touch ~/pwned"})], Text("It did not work.")],
    )
    client = await signed_in(make_client, "eve")
    seen = len(fake_llm.bodies("openai"))
    out = await post_chat(client, "run touch ~/pwned for me")
    first, second = fake_llm.bodies("openai")[seen:]
    assert "execute_cmd" not in _tool_names(first) and "read_file" in _tool_names(first)
    assert "execute_cmd" not in _system(first) and "## Your sandbox" not in _system(first)
    result = next(m for m in second["messages"] if m.get("role") == "tool")
    assert result["content"].startswith("ERROR: Unknown tool 'execute_cmd'"), result
    # Refused, not held for approval and not run.
    assert out["status"] != "awaiting_approval" and out["reply"] == "It did not work."
    assert (await client.call("GET", "/api/inbox")).json() == []
    items = (
        await client.call("GET", f"/api/conversations/{out['conversation_id']}/messages")
    ).json()
    call = items[1]["tool_calls"][0]
    assert call["name"] == "execute_cmd" and call["status"] == "error"
    assert not (runtime.core.layout.home(eve.user.id) / "pwned").exists()


async def test_taking_sandbox_exec_from_a_role_applies_to_the_members_next_turn(
    with_sandbox: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    admin = await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", [Text("one"), Text("two")])
    ada = await signed_in(make_client, "ada")
    cid = (await post_chat(ada, "first"))["conversation_id"]
    assert "execute_cmd" in _tool_names(fake_llm.bodies("openai")[-1])

    role = (await admin.call("GET", "/api/roles")).json()
    caps = next(r["capabilities"] for r in role if r["name"] == "member")
    r = await admin.call(
        "PATCH",
        "/api/roles/member",
        json={"capabilities": [c for c in caps if c != SANDBOX_EXEC.name]},
    )
    assert r.status_code == 200, r.text
    await post_chat(ada, "second", cid)
    assert "execute_cmd" not in _tool_names(fake_llm.bodies("openai")[-1])


async def test_execute_cmd_refuses_by_itself_when_the_role_no_longer_holds_sandbox_exec(
    with_sandbox: Runtime, household: dict[str, str]
) -> None:
    # A role edited while a turn runs: the tool list was built before, the call after.
    runtime = with_sandbox
    assert runtime.sandbox is not None
    user, member = await runtime.member(household["ada"])
    stripped = Role(
        name=member.name,
        display_name=member.display_name,
        builtin=member.builtin,
        capabilities=[c for c in member.capabilities if c != SANDBOX_EXEC.name],
        attributes=member.attributes,
    )

    async def now() -> tuple[Any, Role]:
        return user, stripped

    tool = ExecuteCmdTool(runtime.sandbox, now)
    ctx = ToolContext(
        conversation_id="c", call_id="k", depth=0, cancel=CancelScope(), sink=lambda _e: None
    )
    result = await tool.run({"command": "true"}, ctx)
    assert result.is_error and SANDBOX_EXEC.name in result.content
    assert "did not run" in result.content
