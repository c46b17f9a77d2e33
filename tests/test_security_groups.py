"""Security groups: a conversation's chosen rule set, checked against the role on every call."""

from __future__ import annotations

import json

from conftest import Client, MakeClient, admin_adds_models, post_chat, signed_in
from fake_llm import Call, FakeLLM, Text

from skald.core.runtime import Runtime


async def _allow_groups(runtime: Runtime, role: str, groups: list[str]) -> None:
    await runtime.core.registry.db.call(
        lambda c: c.execute(
            "UPDATE role_attributes SET value=? WHERE role=? AND key='allowed_security_groups'",
            (json.dumps(groups), role),
        )
    )


async def _add_trusted_group(runtime: Runtime) -> None:
    def q(c: object) -> None:
        c.execute(  # type: ignore[attr-defined]
            "INSERT INTO security_groups VALUES ('trusted', 'Trusted', 'writes shared notes')"
        )
        c.execute(  # type: ignore[attr-defined]
            "INSERT INTO approval_rules(grp, tool_pattern, path_pattern, action, priority, "
            "description) VALUES ('trusted', '*', NULL, 'allow', 1, 'everything runs')"
        )

    await runtime.core.registry.db.call(q)


async def test_a_conversation_runs_under_its_group_while_the_role_allows_it(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    await _add_trusted_group(runtime)
    await _allow_groups(runtime, "member", ["default", "trusted"])
    write = Call("write_file", {"path": "shared-memory/wifi.md", "content": "fridge"})
    fake_llm.script("model-a", [Text("hi"), [write], Text("Saved."), [write], Text("Saved?")])
    ada = await signed_in(make_client, "ada")

    r = await ada.call("GET", "/api/my/security-groups")
    assert r.status_code == 200
    assert r.json() == {
        "allowed": [
            {"name": "default", "display_name": "Default"},
            {"name": "trusted", "display_name": "Trusted"},
        ],
        "default": "default",
    }
    cid = (await post_chat(ada, "hello"))["conversation_id"]
    convs = (await ada.call("GET", "/api/conversations")).json()
    assert convs[0]["security_group"] is None  # the role's default

    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "nope"})
    assert r.status_code == 400
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "trusted"})
    assert r.status_code == 200 and r.json()["security_group"] == "trusted"
    # another member cannot touch it
    mum = await signed_in(make_client, "mum")
    r = await mum.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "default"})
    assert r.status_code == 404

    out = await post_chat(ada, "save the wifi note", cid)
    assert out["status"] == "done" and out["reply"] == "Saved."
    assert await runtime.shared_memory.note_get("wifi.md") == "fridge"

    # The role stops allowing the group: the very next call falls back to the default.
    await _allow_groups(runtime, "member", ["default"])
    out = await post_chat(ada, "save it again", cid)
    assert out["status"] == "awaiting_approval"
    await _wait_idle_or_waiting(ada, cid)
    groups = (await ada.call("GET", "/api/my/security-groups")).json()
    assert [g["name"] for g in groups["allowed"]] == ["default"]


async def _wait_idle_or_waiting(client: Client, cid: str) -> None:
    convs = {c["id"]: c for c in (await client.call("GET", "/api/conversations")).json()}
    assert convs[cid]["status"] in ("idle", "awaiting_approval")


async def test_null_goes_back_to_the_role_default(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={"title": "t"})).json()["id"]
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "default"})
    assert r.json()["security_group"] == "default"
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": None})
    assert r.status_code == 200 and r.json()["security_group"] is None
