"""Approval rules and security groups, and a dry run of the rules (capability `admin.roles`).

The per-call decision route (`POST /api/approvals/{call_id}`) lives with the chat routes;
the static paths here take precedence over it. The handlers see the facade only: the
rules and groups are the approvals feature's registry tables (`Registry(server.db)`), and
the dry run reads the caller's tool through `member.tool_named`.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import group, requires
from skald.api.openapi import errors
from skald.approvals.rules import (
    Action,
    CallFacts,
    Rule,
    evaluate,
    normalise_path,
    valid_tool_pattern,
)
from skald.core.approvals import facts_of
from skald.errors import InvalidInputError, NotFoundError
from skald.llm.types import ToolCall
from skald.permissions import ADMIN_ROLES
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.registry import Registry, SecurityGroup

# Every route's guard: the group in ROUTES gives it.
ADMIN = [requires(ADMIN_ROLES)]
GroupName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Pattern = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
PathPattern = Annotated[str, msgspec.Meta(min_length=1, max_length=400)]
Text = Annotated[str, msgspec.Meta(max_length=500)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


# A rule as the API shows it: the stored fields, under this schema name (no docstring:
# it would become the schema's description).
class RuleOut(Rule, frozen=True, kw_only=True):
    pass


class RuleIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    group: GroupName
    tool_pattern: Pattern
    path_pattern: PathPattern | None = None
    action: Action
    priority: int = 100
    description: Text = ""


class RulePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    group: GroupName | None = None
    tool_pattern: Pattern | None = None
    # Absent: unchanged; null: any path.
    path_pattern: PathPattern | msgspec.UnsetType | None = msgspec.UNSET
    action: Action | None = None
    priority: int | None = None
    description: Text | None = None


class GroupIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: GroupName
    display_name: Name
    description: Text = ""


class GroupPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    display_name: Name | None = None
    description: Text | None = None


class TestIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    group: GroupName
    tool: Name
    arguments: dict[str, Any] = {}


class TestOut(msgspec.Struct, frozen=True, kw_only=True):
    action: Action
    rule_id: int | None
    explanation: str


def _out(rule: Rule) -> RuleOut:
    # The stored rule under its API name: the same fields, in the same order.
    return msgspec.convert(rule, RuleOut, from_attributes=True)


def _registry(server: Server) -> Registry:
    # The queries on the approvals feature's registry tables (stateless over the db).
    return Registry(server.db)


def _check(rule: Rule) -> Rule:
    if not valid_tool_pattern(rule.tool_pattern):
        raise InvalidInputError(
            "tool_pattern must be a tool name, a prefix ending in *, *, @fs_read, @fs_write, "
            "@fs_append, @exec, @paid or @mcp:<server>"
        )
    return rule


@get("/api/approvals/rules")
async def list_rules(server: NamedDependency[Server]) -> list[RuleOut]:
    return [_out(r) for r in await _registry(server).approval_rules()]


@post("/api/approvals/rules", status_code=201, responses=errors(400))
async def create_rule(data: JSONBody[RuleIn], server: NamedDependency[Server]) -> RuleOut:
    rule = Rule(
        0, data.group, data.tool_pattern, data.path_pattern, data.action, data.priority,
        data.description,
    )  # fmt: skip
    return _out(await _registry(server).save_rule(_check(rule), create=True))


def _rule_id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise NotFoundError("no such rule")
    return int(raw)


@patch("/api/approvals/rules/{rule_id:str}", responses=errors(400, 404))
async def patch_rule(
    rule_id: FromPath[str], data: JSONBody[RulePatch], server: NamedDependency[Server]
) -> RuleOut:
    old = await _registry(server).get_rule(_rule_id(rule_id))
    if old is None:
        raise NotFoundError("no such rule")
    rule = Rule(
        old.id,
        data.group or old.group,
        data.tool_pattern or old.tool_pattern,
        old.path_pattern if data.path_pattern is msgspec.UNSET else data.path_pattern,
        data.action or old.action,
        old.priority if data.priority is None else data.priority,
        old.description if data.description is None else data.description,
    )
    return _out(await _registry(server).save_rule(_check(rule), create=False))


@delete("/api/approvals/rules/{rule_id:str}", status_code=204, responses=errors(404))
async def delete_rule(rule_id: FromPath[str], server: NamedDependency[Server]) -> None:
    await _registry(server).delete_rule(_rule_id(rule_id))


@get("/api/approvals/groups")
async def list_groups(server: NamedDependency[Server]) -> list[SecurityGroup]:
    return await _registry(server).security_groups()


@post("/api/approvals/groups", status_code=201, responses=errors(409))
async def create_group(data: JSONBody[GroupIn], server: NamedDependency[Server]) -> SecurityGroup:
    group = SecurityGroup(
        name=data.name, display_name=data.display_name, description=data.description
    )
    await _registry(server).save_group(group, create=True)
    return group


@patch("/api/approvals/groups/{name:str}", responses=errors(404))
async def patch_group(
    name: FromPath[str], data: JSONBody[GroupPatch], server: NamedDependency[Server]
) -> SecurityGroup:
    old = next((g for g in await _registry(server).security_groups() if g.name == name), None)
    if old is None:
        raise NotFoundError(f"no security group named {name!r}")
    group = SecurityGroup(
        name=name,
        display_name=data.display_name or old.display_name,
        description=old.description if data.description is None else data.description,
    )
    await _registry(server).save_group(group, create=False)
    return group


@delete("/api/approvals/groups/{name:str}", status_code=204, responses=errors(404, 409))
async def delete_group(name: FromPath[str], server: NamedDependency[Server]) -> None:
    await _registry(server).delete_group(name)


@post("/api/approvals/test", status_code=200)
async def test_rules(
    data: JSONBody[TestIn], server: NamedDependency[Server], member: NamedDependency[Member]
) -> TestOut:
    """What the rules of `group` would decide for this call (nothing runs)."""
    call = ToolCall(id="dry-run", name=data.tool, arguments=data.arguments)
    tool = member.tool_named(data.tool)
    facts = (
        # The plugins' facts, as the member's gate adds them (`DefaultGate.extra_facts`).
        facts_of(call, tool, server.plugins.approval_facts)
        if tool is not None
        else CallFacts(data.tool, frozenset(), normalise_path(data.arguments.get("path")))
    )
    verdict = evaluate(await _registry(server).approval_rules(data.group), data.group, facts)
    return TestOut(action=verdict.action, rule_id=verdict.rule_id, explanation=verdict.explanation)


ROUTES = [
    group(
        list_rules,
        create_rule,
        patch_rule,
        delete_rule,
        list_groups,
        create_group,
        patch_group,
        delete_group,
        test_rules,
        guards=ADMIN,
    )
]
