"""The Projects page's API (capability `projects.use`).

A project is named by its owner's username and its slug. Whoever is not a member gets
404 (a project's existence is not told); a read-only member who tries to change it gets
403; only the owner deletes.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import msgspec
from litestar import delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.api.places import PlaceIn, PlacePatch
from skald.errors import NotFoundError
from skald.features.projects.history import (
    Commit,
    CommitDiff,
    author_of,
    checked_path,
    checked_revision,
)
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
from skald.files.changes import FileChange
from skald.files.tools import write_within
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.conversations import Conversation

# Every route's guard: the group in ROUTES gives it.
USE = [requires(PROJECTS_USE)]


class ProjectIn(PlaceIn, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class ProjectPatch(PlacePatch, frozen=True, kw_only=True, forbid_unknown_fields=True):
    history: bool | None = None  # the owner's switch


class RestoreIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]


class HistoryOut(msgspec.Struct, frozen=True, kw_only=True):
    on: bool
    commits: list[Commit]  # newest first, at most MAX_LOG


class Restored(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    revision: str


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


@get("/api/projects")
async def list_projects(request: AuthRequest, server: NamedDependency[Server]) -> list[ProjectOut]:
    me = request.user.user.id
    return [ProjectOut.of(p, me) for p in _projects(server).of_member(me)]


@post("/api/projects", status_code=201, responses=errors(400, 409))
async def create_project(
    request: AuthRequest, data: JSONBody[ProjectIn], server: NamedDependency[Server]
) -> ProjectOut:
    me = request.user.user.id
    made = await _projects(server).create(me, data.name, data.description, data.slug)
    return ProjectOut.of(made, me)


@get("/api/projects/{owner:str}/{slug:str}", responses=errors(404))
async def get_project(
    request: AuthRequest, owner: FromPath[str], slug: FromPath[str], server: NamedDependency[Server]
) -> ProjectOut:
    return ProjectOut.of(_mine(request, server, owner, slug), request.user.user.id)


@patch("/api/projects/{owner:str}/{slug:str}", responses=errors(400, 403, 404))
async def patch_project(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    data: JSONBody[ProjectPatch],
    server: NamedDependency[Server],
) -> ProjectOut:
    project = _writer(request, server, owner, slug)
    me = request.user.user
    history: tuple[str, str] | bool | None = data.history
    if data.history is not None and project.owner != me.id:
        raise ApiError(403, "forbidden", "only the project's owner turns its history on or off")
    if data.history:
        history = author_of(me.display_name, me.username)
    changed = await _projects(server).update(
        project, name=data.name, description=data.description, history=history
    )
    return ProjectOut.of(changed, me.id)


@delete("/api/projects/{owner:str}/{slug:str}", responses=errors(403, 404, 409))
async def trash_project(
    request: AuthRequest, owner: FromPath[str], slug: FromPath[str], server: NamedDependency[Server]
) -> None:
    project = _mine(request, server, owner, slug)
    if project.owner != request.user.user.id:
        raise ApiError(403, "forbidden", "only the project's owner deletes it")
    await _projects(server).trash(project)


@put("/api/projects/{owner:str}/{slug:str}/members/{username:str}", responses=errors(403, 404, 409))
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


@post("/api/projects/{owner:str}/{slug:str}/chat", responses=errors(404))
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


@get("/api/projects/{owner:str}/{slug:str}/history", responses=errors(404))
async def project_history(
    request: AuthRequest, owner: FromPath[str], slug: FromPath[str], server: NamedDependency[Server]
) -> HistoryOut:
    """The last commits (newest first), for every member of the project."""
    project = _mine(request, server, owner, slug)
    projects = _projects(server)
    return HistoryOut(on=project.history, commits=await projects.history.log(projects, project))


@get("/api/projects/{owner:str}/{slug:str}/history/{rev:str}", responses=errors(400, 404))
async def project_commit(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    rev: FromPath[str],
    server: NamedDependency[Server],
) -> CommitDiff:
    """One commit: who, when, what, the files it changed and its diff (cut at 1 MiB)."""
    project = _mine(request, server, owner, slug)
    projects = _projects(server)
    return await projects.history.show(projects, project, rev)


@post(
    "/api/projects/{owner:str}/{slug:str}/history/{rev:str}/restore",
    status_code=200,
    responses=errors(400, 403, 404, 409, 413, 507),
)
async def restore_file(
    request: AuthRequest,
    owner: FromPath[str],
    slug: FromPath[str],
    rev: FromPath[str],
    data: JSONBody[RestoreIn],
    server: NamedDependency[Server],
    member: NamedDependency[Member],
) -> Restored:
    """Put one file back as it was at `rev`: a write through the caller's own router, so
    a read-only member meets its write gate (403) and the owner's quota decides."""
    project = _mine(request, server, owner, slug)
    projects = _projects(server)
    checked_revision(rev)
    inside = checked_path(data.path)
    found = await asyncio.to_thread(member.router.writable, f"{project.path}/{inside}")
    content = await projects.history.blob(projects, project, rev, inside)
    source = member.budget
    budget = None if source is None else await source(owner=found.quota_owner)
    await asyncio.to_thread(write_within, budget, found, content)
    change = FileChange(mount=found.mount, paths=(inside,), action=f"restore from {rev[:12]}")
    await server.files_changed(member.id, change)
    return Restored(path=found.agent_path, revision=rev)


ROUTES = (
    group(
        list_projects,
        create_project,
        get_project,
        patch_project,
        trash_project,
        set_project_member,
        remove_project_member,
        open_project_chat,
        project_history,
        project_commit,
        restore_file,
        guards=USE,
    ),
)
