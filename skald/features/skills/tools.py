"""The skill tools: `skill_read` for every member; `skill_register` and `skill_delete` for
members with `files` (their own tree; the household's with `skills.manage`, checked at
every call against the role as it is then)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from skald import walk
from skald.agent.tools import Reads, Tool, ToolContext, ToolResult, Writes
from skald.errors import InvalidInputError, SkaldError
from skald.features.skills import store
from skald.files.router import open_read
from skald.llm.types import tool_spec
from skald.permissions import can

if TYPE_CHECKING:
    from skald.plugins.facade import Member
    from skald.quota import Budget

MAX_READ = 256 * 1024


class _SkillTool(Tool):
    """A skill tool works for one member: their own tree, and the household's."""

    def __init__(self, member: Member) -> None:
        self.member = member


class SkillRead(Reads, _SkillTool):
    spec = tool_spec(
        "skill_read",
        "Read a skill's SKILL.md (or one of its files): skill is shared/<id>, mine/<id> "
        "or <id> as SKILLS_LIST names it.",
        {
            "skill": {"type": "string", "description": "shared/<id>, mine/<id> or <id>"},
            "file": {"type": "string", "description": "A file in the skill (default SKILL.md)."},
        },
        ["skill"],
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        layout = self.member.server.layout
        try:
            skill = await asyncio.to_thread(store.find, layout, self.member.id, str(args["skill"]))
            path = f"{skill.path}/{args.get('file') or store.SKILL_FILE}"
            return ToolResult(content=await asyncio.to_thread(self._read, path))
        except SkaldError as exc:
            return ToolResult.error(str(exc))

    def _read(self, path: str) -> str:
        found = self.member.router.physical(path)
        handle, _ = open_read(found)
        with handle:
            data = handle.read(MAX_READ + 1)
        if b"\0" in data[:8192]:
            raise InvalidInputError(f"{found.agent_path} is not text")
        text = data[:MAX_READ].decode("utf-8", "replace")
        return text + ("\n[cut at 256 KiB]" if len(data) > MAX_READ else "")


async def _tree(member: Member, household: bool) -> store.Tree:
    _, role = await member.fetch()  # the role as it is now (a capability taken away)
    if household and not can(role, store.SKILLS_MANAGE):
        raise InvalidInputError(
            "only a role with skills.manage changes the household's skills; "
            "leave household out to use your own"
        )
    return "shared" if household else "mine"


_HOUSEHOLD = {
    "type": "boolean",
    "description": "The household's tree (every member's prompt) instead of your own.",
}


class SkillRegister(Writes, _SkillTool):
    spec = tool_spec(
        "skill_register",
        "Make a folder of your home (it must hold SKILL.md: name, when to use it, the "
        "steps) a skill: it is copied into your skills (read-only from then on).",
        {
            "path": {"type": "string", "description": "The folder, e.g. ~/drafts/weekly-shop"},
            "id": {"type": "string", "description": "The skill's id (default: the folder name)"},
            "household": _HOUSEHOLD,
        },
        ["path"],
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            tree = await _tree(self.member, bool(args.get("household")))
            found = await asyncio.to_thread(self.member.router.physical, str(args["path"]))
            if found.mount != "home" or found.is_root:
                raise InvalidInputError("register a folder of your home (~/…)")
            skill_id = store.checked_id(str(args.get("id") or found.parts[-1]))
            budget = await self.member.server.budget(self.member.id)
            listings = self.member.server.state(store.Listings)
            await listings.write(self._copy, tree, skill_id, found.root, found.parts, budget)
        except (SkaldError, OSError) as exc:
            return ToolResult.error(f"not registered: {exc}")
        return ToolResult(content=f"Registered skills/{tree}/{skill_id}.")

    def _copy(
        self, tree: store.Tree, skill_id: str, root: Any, parts: tuple[str, ...], budget: Budget
    ) -> None:
        # A copy takes space again: within the member's quota and the disk's reserve
        # (their own tree counts against their quota; the household's is checked alike).
        size = walk.usage(root, parts).allocated
        budget.fresh_check(size)
        with walk.opened(root, parts) as source:
            store.register(self.member.server.layout, tree, self.member.id, skill_id, source)
        if tree == "mine":
            budget.wrote(size)


class SkillDelete(Writes, _SkillTool):
    spec = tool_spec(
        "skill_delete",
        "Delete one of your skills (or, with skills.manage, a household one).",
        {"id": {"type": "string"}, "household": _HOUSEHOLD},
        ["id"],
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            tree = await _tree(self.member, bool(args.get("household")))
            skill_id = store.checked_id(str(args["id"]))
            layout = self.member.server.layout
            listings = self.member.server.state(store.Listings)
            await listings.write(store.delete, layout, tree, self.member.id, skill_id)
        except SkaldError as exc:
            return ToolResult.error(f"not deleted: {exc}")
        return ToolResult(content=f"Deleted skills/{tree}/{skill_id}.")
