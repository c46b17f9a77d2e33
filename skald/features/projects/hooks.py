"""Projects: the capability, the tables, members' mounts, PROJECT_CONTEXT."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from pathlib import Path

    from skald.files.changes import FileChange
    from skald.files.mounts import MemberMount
    from skald.plugins.facade import Member, Server
    from skald.store.rows import Role, User


skald_capabilities = lazy.capabilities("skald.features.projects.store:PROJECTS_USE")


skald_migrations = lazy.migrations(
    registry=("skald.features.projects.store:REGISTRY",),
    owner=("skald.features.projects.store:OWNER",),
)


skald_server_state = lazy.built_with_server("skald.features.projects.store:Projects")


@hookimpl
def skald_member_state(member: Member) -> list[object]:
    # Which project each conversation belongs to, kept between turns (PROJECT_CONTEXT).
    from skald.features.projects.store import ChatProjects

    return [ChatProjects(member.db)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.projects.store import Projects

    return [ServiceSpec("projects", server.state(Projects).run, order=5, restart=False)]


@hookimpl
def skald_mounts(user: User, role: Role, server: Server | None) -> list[MemberMount]:
    from skald.features.projects.store import PROJECTS_USE, Projects
    from skald.permissions import can

    projects = None if server is None else server.state(Projects, None)
    if projects is None or not can(role, PROJECTS_USE):
        return []
    return projects.mounts(user.id)


skald_routes = lazy.routes("skald.features.projects.routes")


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"PROJECT_CONTEXT": "the project a project conversation belongs to"}


@hookimpl
async def skald_prompt_blocks(member: Member, conversation_id: str | None) -> dict[str, str]:
    from skald.features.projects.store import PROJECTS_USE, ChatProjects, Projects, context

    projects = member.server.state(Projects, None)
    if projects is None or conversation_id is None:
        return {"PROJECT_CONTEXT": ""}
    found = await member.state(ChatProjects).of(conversation_id)
    if found is None:
        return {"PROJECT_CONTEXT": ""}
    owner, slug = found
    project = next(
        (p for p in projects.of_member(member.id) if p.owner == owner and p.slug == slug), None
    )
    if project is not None and not member.can(PROJECTS_USE):
        project = None
    return {"PROJECT_CONTEXT": context(project, member.id)}


WEB = FeatureWeb(__file__, "projects")
WEB.page("/projects", "ProjectsPage", capability="projects.use", order=42, icon="folder")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_owned_places(user_id: str, server: Server) -> list[Path]:
    from skald.features.projects.store import Projects

    found = server.state(Projects, None)
    return [] if found is None else found.owned(user_id)


@hookimpl
async def skald_files_changed(server: Server, user_id: str, change: FileChange) -> None:
    # A write inside a project keeping history: committed, authored by the writer.
    from skald.features.projects.history import author_of
    from skald.features.projects.store import Projects

    projects = server.state(Projects, None)
    project = None if projects is None else projects.of_mount(change.mount)
    if projects is None or project is None or not project.history:
        return
    user, _ = await server.fetch(user_id)
    author = author_of(user.display_name, user.username)
    await projects.history.record(projects, project, change.summary, author)
