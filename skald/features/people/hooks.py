"""People: the directory profile, supervision links, and who the assistant is talking with
(`USER_PROFILE`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from skald.core.prompt_blocks import profile_block
from skald.errors import NotFoundError
from skald.plugins import hookimpl
from skald.plugins.specs import WebFiles, feature_folder
from skald.store import people
from skald.store.registry import user_in

if TYPE_CHECKING:
    from skald.plugins.facade import Member
    from skald.store.migrations import Feature
    from skald.store.rows import User


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.people.schema import PEOPLE

    return [PEOPLE] if schema == "registry" else []


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.people.routes import ROUTES

    return list(ROUTES)


@hookimpl
def skald_web_files() -> list[WebFiles]:
    # web/people.js (the People page's editor, the profile's supervision line) and i18n/.
    return [WebFiles("people", feature_folder(__file__, "people"))]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"USER_PROFILE": "who the agent is talking with (profile_block)"}


@hookimpl
async def skald_prompt_blocks(member: Member) -> dict[str, str]:
    user_id = member.id

    def read(c: Any) -> tuple[User, people.Directory, list[str]]:
        # One trip for the whole block (it is built at every turn): the row as it is
        # now (a display name changed since sign-in), the directory, the supervisors.
        user = user_in(c, user_id)
        if user is None:
            raise NotFoundError("no such member")
        supervisors = people.linked_in(c, user_id, "supervisors")
        return user, people.read_directory(c, user_id), [n.name for n in supervisors]

    user, directory, supervisors = await member.server.db.call(read)
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
