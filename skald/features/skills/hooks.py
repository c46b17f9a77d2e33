"""Skills: the capability, the two read-only trees as mounts, SKILLS_LIST, the tools,
the Skills API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from pathlib import Path

    from skald.agent.tools import Tool
    from skald.files.mounts import MemberMount
    from skald.paths import DataLayout
    from skald.plugins.facade import Member, Server
    from skald.store.rows import User


skald_capabilities = lazy.capabilities("skald.features.skills.store:SKILLS_MANAGE")


@hookimpl
def skald_mounts(user: User, layout: DataLayout) -> list[MemberMount]:
    from skald.features.skills.store import mounts

    return mounts(layout, user.id)


@hookimpl
def skald_owned_places(user_id: str, server: Server) -> list[Path]:
    # A member's own skills are copies they made: counted against their quota.
    from skald.features.skills.store import tree_dir

    return [tree_dir(server.layout, "mine", user_id)]


@hookimpl
def skald_private_places(user_id: str, layout: DataLayout) -> list[Path]:
    from skald.features.skills.store import tree_dir

    return [tree_dir(layout, "mine", user_id)]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"SKILLS_LIST": "the installed skills"}


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.skills.store import Listings

    return [Listings(server.layout)]


@hookimpl
async def skald_prompt_blocks(member: Member) -> dict[str, str]:
    from skald.features.skills.store import Listings, prompt_list

    return {"SKILLS_LIST": prompt_list(await member.server.state(Listings).of(member.id))}


@hookimpl
def skald_tools(member: Member) -> list[Tool]:
    from skald.features.skills.tools import SkillDelete, SkillRead, SkillRegister
    from skald.files.tools import FILES

    tools: list[Tool] = [SkillRead(member)]
    if member.can(FILES):  # their home holds what they register
        tools += [SkillRegister(member), SkillDelete(member)]
    return tools


skald_routes = lazy.routes("skald.features.skills.routes")


# Translations in skills/i18n/ (the capability's name and hint for the Roles page).
WEB = FeatureWeb(__file__, "skills")
# Members without `files` (children by default) meet skills in their prompt only.
WEB.page("/skills", "SkillsPage", capability="files", order=44, icon="sparkle")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
