"""Files: the member's home and the manual as mounts, the file tools, the Files API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.assets import asset_dir
from skald.core.services import ServiceSpec
from skald.files.mounts import MemberMount, docs_mount, home_mount
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.paths import DataLayout
    from skald.plugins.facade import Member, Server
    from skald.store.rows import User


@hookimpl
def skald_mounts(user: User, layout: DataLayout) -> list[MemberMount]:
    return [home_mount(layout.home(user.id)), docs_mount(asset_dir("docs"))]


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    # Members with the `files` capability work on their home and the manual too; the
    # others (children by default) keep to their notes (the memory feature's tools).
    from skald.files.tools import FILES

    if not member.can(FILES):
        return None
    from skald.files.tools import workspace_tools
    from skald.sandbox.files import ContainerFiles
    from skald.sandbox.tool import SANDBOX_EXEC
    from skald.store.owner import OwnerStore
    from skald.tools.memory import MEMORY_SHARED

    # Paths only the member's sandbox has (`/tmp/…`) go through it; each call checks the
    # role again (`sandbox.exec` taken away mid-turn stops the very next one).
    sandbox = member.sandbox
    container = (
        ContainerFiles(sandbox, member.fetch)
        if sandbox is not None and member.can(SANDBOX_EXEC)
        else None
    )
    return workspace_tools(
        OwnerStore(member.db),
        member.server.shared_memory,
        member.id,
        member.router,
        shared_readable=member.can(MEMORY_SHARED),
        budget=member.budget,
        container=container,
        # After each write: features watching a place (a project's git history).
        on_change=lambda change: member.server.files_changed(member.id, change),
    )


skald_routes = lazy.routes("skald.features.files.routes")


WEB = FeatureWeb(__file__, "files")
WEB.page("/files", "FilesPage", capability="files", order=40, icon="folder", dock=True)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities("skald.files.tools:FILES")


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    # Free disk and every home's usage: refuses writes and pauses sandboxes when low.
    from skald.core.storage_guard import StorageGuard

    return [ServiceSpec("storage-guard", server.state(StorageGuard).run_forever)]
