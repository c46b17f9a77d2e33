"""The Skills page's API: members with `files` read both trees and import into and
delete from their own; the household's tree needs `skills.manage` to change."""

from __future__ import annotations

import asyncio

from litestar import delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath

from skald.api.deps import AuthRequest, requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.errors import InvalidInputError
from skald.features.skills import store
from skald.files.tools import FILES
from skald.permissions import can
from skald.plugins.facade import Server  # Litestar reads the annotations

# Members without `files` (children by default) meet skills in their prompt only.
READ = WRITE = [requires(FILES, store.SKILLS_MANAGE)]


class SkillText(store.Skill, frozen=True, kw_only=True):
    text: str


def _writable(request: AuthRequest, tree: str) -> store.Tree:
    if tree not in ("shared", "mine"):
        raise ApiError(404, "not_found", "the trees are shared and mine")
    role = request.user.role
    need = store.SKILLS_MANAGE if tree == "shared" else FILES
    if not can(role, need):
        raise ApiError(403, "forbidden", f"changing this tree needs {need.name}")
    return "shared" if tree == "shared" else "mine"


@get("/api/skills", guards=READ)
async def list_skills(request: AuthRequest, server: NamedDependency[Server]) -> list[store.Skill]:
    return await asyncio.to_thread(store.list_all, server.layout, request.user.user.id)


@get("/api/skills/{tree:str}/{skill_id:str}", guards=READ, responses=errors(400, 404))
async def read_skill(
    request: AuthRequest,
    tree: FromPath[str],
    skill_id: FromPath[str],
    server: NamedDependency[Server],
) -> SkillText:
    if tree not in ("shared", "mine"):
        raise ApiError(404, "not_found", "the trees are shared and mine")
    me = request.user.user.id
    skill = await asyncio.to_thread(store.find, server.layout, me, f"{tree}/{skill_id}")
    base = store.tree_dir(server.layout, skill.tree, me)

    def text() -> str:
        from skald import walk

        with walk.opened(base) as fd:
            return store._read_skill_md(fd, skill.id) or ""

    body = await asyncio.to_thread(text)
    return SkillText(
        id=skill.id, tree=skill.tree, name=skill.name, description=skill.description, text=body
    )


@post(
    "/api/skills/{tree:str}/{skill_id:str}/zip",
    guards=WRITE,
    status_code=201,
    responses=errors(400, 403, 409, 413),
)
async def import_skill(
    request: AuthRequest,
    tree: FromPath[str],
    skill_id: FromPath[str],
    server: NamedDependency[Server],
) -> store.Skill:
    """The request body is the ZIP itself (`Content-Type: application/zip`)."""
    which = _writable(request, tree)
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > store.MAX_ZIP_BYTES:
            raise ApiError(
                413, "too_large", f"a skill ZIP is at most {store.MAX_ZIP_BYTES // 1048576} MiB"
            )
    if not data:
        raise InvalidInputError("send the ZIP as the request body")
    me = request.user.user.id
    budget = await server.budget(me)
    listings = server.state(store.Listings)
    await listings.write(
        store.import_zip, server.layout, which, me, skill_id, bytes(data), budget.fresh_check
    )
    if which == "mine":
        budget.wrote(await asyncio.to_thread(store.skill_size, server.layout, which, me, skill_id))
    return await asyncio.to_thread(store.find, server.layout, me, f"{which}/{skill_id}")


@delete("/api/skills/{tree:str}/{skill_id:str}", guards=WRITE, responses=errors(403, 404))
async def delete_skill(
    request: AuthRequest,
    tree: FromPath[str],
    skill_id: FromPath[str],
    server: NamedDependency[Server],
) -> None:
    which = _writable(request, tree)
    await server.state(store.Listings).write(
        store.delete, server.layout, which, request.user.user.id, skill_id
    )


ROUTES = (list_skills, read_skill, import_skill, delete_skill)
