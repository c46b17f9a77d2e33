"""Admin API for approval rules and security groups, and the dry run of the rules."""

from __future__ import annotations

from conftest import MakeClient, signed_in

from skald.approvals.rules import SEED_RULES
from skald.core.runtime import Runtime


async def test_rules_and_groups_round_trip(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    mum = await signed_in(make_client, "mum")
    rules = (await mum.call("GET", "/api/approvals/rules")).json()
    assert len(rules) == len(SEED_RULES)
    assert set(rules[0]) == {
        "id", "group", "tool_pattern", "path_pattern", "action", "priority", "description"
    }  # fmt: skip
    groups = (await mum.call("GET", "/api/approvals/groups")).json()
    assert groups == [
        {"name": "default", "display_name": "Default", "description": groups[0]["description"]}
    ]

    # a dry run names the rule that decides and why
    r = await mum.call(
        "POST", "/api/approvals/test",
        json={"group": "default", "tool": "write_file",
              "arguments": {"path": "shared-memory/x.md", "content": "x"}},
    )  # fmt: skip
    assert r.status_code == 200
    out = r.json()
    assert out["action"] == "require" and isinstance(out["rule_id"], int)
    assert "shared-memory/**" in out["explanation"]
    r = await mum.call(
        "POST", "/api/approvals/test",
        json={"group": "default", "tool": "read_file", "arguments": {"path": "~/a.txt"}},
    )  # fmt: skip
    assert r.json()["action"] == "allow"

    # a new group with a rule that denies commands
    r = await mum.call(
        "POST", "/api/approvals/groups", json={"name": "strict", "display_name": "Strict"}
    )
    assert r.status_code == 201
    r = await mum.call(
        "POST", "/api/approvals/groups", json={"name": "strict", "display_name": "Again"}
    )
    assert r.status_code == 409
    r = await mum.call(
        "POST", "/api/approvals/rules",
        json={"group": "strict", "tool_pattern": "@exec", "action": "deny", "priority": 1},
    )  # fmt: skip
    assert r.status_code == 201
    rule = r.json()
    assert rule["path_pattern"] is None and rule["group"] == "strict"
    r = await mum.call(
        "POST", "/api/approvals/test",
        json={"group": "strict", "tool": "execute_cmd", "arguments": {"command": "ls"}},
    )  # fmt: skip
    assert r.json()["action"] in ("deny", "require")  # deny when the sandbox tool exists
    r = await mum.call(
        "POST", "/api/approvals/test",
        json={"group": "strict", "tool": "web_fetch", "arguments": {}},
    )  # fmt: skip
    assert r.json() == {
        "action": "require",
        "rule_id": None,
        "explanation": "no rule of group 'strict' matched, so a person decides",
    }

    # bad input
    for body in (
        {"group": "nope", "tool_pattern": "x", "action": "allow"},
        {"group": "strict", "tool_pattern": "a*b", "action": "allow"},
        {"group": "strict", "tool_pattern": "x", "action": "maybe"},
    ):
        assert (await mum.call("POST", "/api/approvals/rules", json=body)).status_code == 400

    r = await mum.call(
        "PATCH", f"/api/approvals/rules/{rule['id']}",
        json={"tool_pattern": "execute_*", "path_pattern": "~/x/**"},
    )  # fmt: skip
    assert r.status_code == 200
    assert r.json()["tool_pattern"] == "execute_*" and r.json()["action"] == "deny"
    r = await mum.call("PATCH", f"/api/approvals/rules/{rule['id']}", json={"path_pattern": None})
    assert r.json()["path_pattern"] is None
    assert (await mum.call("PATCH", "/api/approvals/rules/99999", json={})).status_code == 404

    r = await mum.call("PATCH", "/api/approvals/groups/strict", json={"description": "no commands"})
    assert r.json() == {"name": "strict", "display_name": "Strict", "description": "no commands"}
    # the default group is some role's default: it stays
    assert (await mum.call("DELETE", "/api/approvals/groups/default")).status_code == 409
    assert (await mum.call("DELETE", f"/api/approvals/rules/{rule['id']}")).status_code == 204
    assert (await mum.call("DELETE", f"/api/approvals/rules/{rule['id']}")).status_code == 404
    assert (await mum.call("DELETE", "/api/approvals/groups/strict")).status_code == 204
    assert (await mum.call("DELETE", "/api/approvals/groups/strict")).status_code == 404
    # the per-call decision route still answers next to the static paths
    r = await mum.call("POST", "/api/approvals/x1", json={"decision": "approve"})
    assert r.status_code == 404
