"""The Projects page's API (capability `projects.use`).

A project is named by its owner's username and its slug. Whoever is not a member gets
404 (a project's existence is not told); a read-only member who tries to change it gets
403; only the owner deletes.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.errors import NotFoundError
from skald.features.projects.store import (
    PROJECT_AGENT,
    PROJECTS_USE,
    Access,
    Project,
    ProjectOut,
    Projects,
    chat_of,
    remember_chat,
)
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.conversations import Conversation

USE = [requires(PROJECTS_USE)]

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]
Description = Annotated[str, msgspec.Meta(max_length=500)]
Slug = Annotated[str, msgspec.Meta(max_length=40)]


class ProjectIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Description = ""
    slug: Slug | None = None


class ProjectPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name | None = None
    description: Description | None = None


class MemberIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    access: Access


def _projects(server: Server) -> Projects:
    return server.state(Projects)


def _mine(request: AuthRequest, server: Server, owner: str, slug: str) -> Project:
    return _projects(server).find(owner, slug, request.user.user.id)


def _writer(request: AuthRequest, server: Server, owner: str, slug: str) -> Project:
    project = _mine(request, server, owner, slug)
    if project.access_of(request.user.user.id) != "write":
        raise ApiError(403, "forbidden", "only the owner and the project's writers change it")
    return project


@get("/api/projects", guards=USE)
async def list_projects(request: AuthRequest, server: NamedDependency[Server]) -> list[ProjectOut]:
    me = request.user.user.id
    return [ProjectOut.of(p, me) for p in _projects(server).of_member(me)]


@post("/api/projects", guards=USE, status_code=201, responses=errors(400, 409))
async def create_project(
    request: AuthRequest, data: JSONBody[ProjectIn], server: NamedDependency[Server]
) -> ProjectOut:
    me = request.user.user.id
    made = await _projects(server).create(me, data.name, data.description, data.slug)
    return ProjectOut.of(made, me)


@get("/api/projects/{owner:str}/{slug:str}", guards=USE, responses=errors(404))
async def get_project(
    request: AuthRequest, owner: FromPath[str], slug: FromPath[str], server: NamedDependency[Server]
) -> ProjectOut:
    return ProjectOut.of(_mine(request, server, owner, slug), request.user.user.id)


@patch("/api/projects/{owner:str}/{slug:str}", guards=USE, responses=errors(400, 403, 404))
async def patch_project(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    data: JSONBody[ProjectPatch],
    server: NamedDependency[Server],
) -> ProjectOut:
    project = _writer(request, server, owner, slug)
    changed = await _projects(server).update(project, name=data.name, description=data.description)
    return ProjectOut.of(changed, request.user.user.id)


@delete("/api/projects/{owner:str}/{slug:str}", guards=USE, responses=errors(403, 404, 409))
async def trash_project(
    request: AuthRequest, owner: FromPath[str], slug: FromPath[str], server: NamedDependency[Server]
) -> None:
    project = _mine(request, server, owner, slug)
    if project.owner != request.user.user.id:
        raise ApiError(403, "forbidden", "only the project's owner deletes it")
    await _projects(server).trash(project)


@put(
    "/api/projects/{owner:str}/{slug:str}/members/{username:str}",
    guards=USE,
    responses=errors(403, 404, 409),
)
async def set_project_member(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    username: FromPath[str],
    data: JSONBody[MemberIn],
    server: NamedDependency[Server],
) -> ProjectOut:
    project = _writer(request, server, owner, slug)
    changed = await _projects(server).set_member(project, username, data.access)
    return ProjectOut.of(changed, request.user.user.id)


@delete(
    "/api/projects/{owner:str}/{slug:str}/members/{username:str}",
    guards=USE,
    status_code=200,
    responses=errors(403, 404),
)
async def remove_project_member(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    username: FromPath[str],
    server: NamedDependency[Server],
) -> ProjectOut:
    project = _writer(request, server, owner, slug)
    changed = await _projects(server).remove_member(project, username)
    return ProjectOut.of(changed, request.user.user.id)


@post("/api/projects/{owner:str}/{slug:str}/chat", guards=USE, responses=errors(404))
async def open_project_chat(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    server: NamedDependency[Server],
    member: NamedDependency[Member],
) -> Conversation:
    """The caller's own conversation about the project (made the first time)."""
    project = _mine(request, server, owner, slug)
    found = await chat_of(member.db, project.owner, project.slug)
    if found is not None:
        try:
            return await member.conversations.store.get(found)
        except NotFoundError:  # deleted by the member: a new one below
            pass
    made = await member.conversations.new_conversation(project.name, agent_id=PROJECT_AGENT)
    await remember_chat(member.db, made.id, project.owner, project.slug)
    return made


ROUTES = (
    list_projects,
    create_project,
    get_project,
    patch_project,
    trash_project,
    set_project_member,
    remove_project_member,
    open_project_chat,
)
