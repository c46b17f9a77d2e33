"""The People API: directory profiles and supervision links (administrators, capability
`admin.users`), and each member's own view of both (`/api/people/me`, any signed-in member).

Thin: parse, authorise, call `skald.store.people`, serialise. A member reads only their
own profile and links; every other route is the People page's and needs `admin.users`.

Trap: the notes are shown to the member they are about (on their profile and, through
the prompt, by their assistant): an administrator writes nothing there they would not
tell them.
"""

from __future__ import annotations

from datetime import date, datetime

import msgspec
from litestar import delete, get, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.core.users import ADMIN_USERS
from skald.plugins.facade import Server  # Litestar reads the routes' annotations
from skald.store import people

# The guard of the group in ROUTES.
ADMIN = [requires(ADMIN_USERS)]


class ProfileIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A directory profile as the People page saves it: the whole of it (None / "": unset).
    Lengths and dates are checked by `check_profile`, for a message that says which."""

    date_of_birth: str | None = None
    sex: str = ""
    notes: str = ""


class ProfileOut(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    date_of_birth: str | None
    age: int | None  # on the household's date today; None: unknown
    sex: str
    notes: str


class Person(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    username: str
    display_name: str


class LinkOut(msgspec.Struct, frozen=True, kw_only=True):
    supervisor_id: str
    supervised_id: str
    created_at: str


class MineOut(msgspec.Struct, frozen=True, kw_only=True):
    """The caller's own directory profile, who supervises them, and whom they supervise."""

    profile: ProfileOut
    supervised_by: list[Person]
    supervising: list[Person]


def household_today(server: Server) -> date:
    return datetime.now(server.instance.timezone()).date()


def _profile_out(p: people.MemberProfile) -> ProfileOut:
    born = p.date_of_birth.isoformat() if p.date_of_birth else None
    return ProfileOut(user_id=p.user_id, date_of_birth=born, age=p.age, sex=p.sex, notes=p.notes)


def _person(n: people.Named) -> Person:
    return Person(id=n.user_id, username=n.username, display_name=n.name)


@get("/api/people/me")
async def my_people(request: AuthRequest, server: NamedDependency[Server]) -> MineOut:
    me = request.user.user.id
    profile = await people.profile_of(server.db, me, household_today(server))
    links = await people.supervision_of(server.db, me)
    return MineOut(
        profile=_profile_out(profile),
        supervised_by=[_person(n) for n in links.supervisors],
        supervising=[_person(n) for n in links.supervising],
    )


@get("/api/people/{user_id:str}/profile", responses=errors(404))
async def get_profile(user_id: FromPath[str], server: NamedDependency[Server]) -> ProfileOut:
    return _profile_out(await people.profile_of(server.db, user_id, household_today(server)))


@put("/api/people/{user_id:str}/profile", responses=errors(400, 404))
async def put_profile(
    user_id: FromPath[str], data: JSONBody[ProfileIn], server: NamedDependency[Server]
) -> ProfileOut:
    today = household_today(server)
    checked = people.check_profile(data.date_of_birth, data.sex, data.notes, today)
    await people.set_directory(server.db, user_id, checked)
    return _profile_out(await people.profile_of(server.db, user_id, today))


@get("/api/people/links")
async def list_links(server: NamedDependency[Server]) -> list[LinkOut]:
    return [LinkOut(**vars(link)) for link in await people.links(server.db)]


@put("/api/people/links/{supervisor_id:str}/{supervised_id:str}", responses=errors(400, 404))
async def put_link(
    supervisor_id: FromPath[str], supervised_id: FromPath[str], server: NamedDependency[Server]
) -> LinkOut:
    """Idempotent: linking again answers the existing link."""
    return LinkOut(**vars(await people.link(server.db, supervisor_id, supervised_id)))


@delete("/api/people/links/{supervisor_id:str}/{supervised_id:str}", status_code=204)
async def delete_link(
    supervisor_id: FromPath[str], supervised_id: FromPath[str], server: NamedDependency[Server]
) -> None:
    """Idempotent: no link (any more) is 204 too."""
    await people.unlink(server.db, supervisor_id, supervised_id)


ROUTES = [
    my_people,
    group(get_profile, put_profile, list_links, put_link, delete_link, guards=ADMIN),
]
