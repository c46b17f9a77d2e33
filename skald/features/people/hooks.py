"""People: the directory profile, supervision links, and who the assistant is talking with
(`USER_PROFILE`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from skald.core.prompt_blocks import profile_block
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb
from skald.store import people

if TYPE_CHECKING:
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(registry=("skald.features.people.schema:PEOPLE",))


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    # The profile each turn's USER_PROFILE shows, kept between turns (store/people.py).
    return [people.ProfileNow(server.db)]


skald_routes = lazy.routes("skald.features.people.routes")


# web/people.js (the People page's editor, the profile's supervision line) and i18n/.
WEB = FeatureWeb(__file__, "people")
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"USER_PROFILE": "who the agent is talking with (profile_block)"}


@hookimpl
async def skald_prompt_blocks(member: Member) -> dict[str, str]:
    user, directory, supervisors = await member.server.state(people.ProfileNow).read(member.id)
    household = member.server.instance.current.household_name
    block = profile_block(
        user.display_name,
        user.profile,
        member.locale,
        household=household,
        directory=directory,
        # The member's own date: the age changes on their birthday where they are.
        today=datetime.now(member.timezone()).date(),
        supervisors=supervisors,
    )
    return {"USER_PROFILE": block}
