"""Files: the member's home and the manual as mounts, the file tools, the Files API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.assets import asset_dir
from skald.core.services import ServiceSpec
from skald.files.mounts import MemberMount, docs_mount, home_mount
from skald.permissions import can
from skald.plugins import hookimpl
from skald.plugins.specs import Page

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime
    from skald.paths import DataLayout
    from skald.permissions import Capability
    from skald.store.rows import User


@hookimpl
def skald_mounts(user: User, layout: DataLayout) -> list[MemberMount]:
    return [home_mount(layout.home(user.id)), docs_mount(asset_dir("docs"))]


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool] | None:
    # Members with the `files` capability work on their home and the manual too; the
    # others (children by default) keep to their notes (the memory feature's tools).
    from skald.files.tools import FILES

    if not can(member.role, FILES):
        return None
    from skald.files.tools import workspace_tools

    return workspace_tools(
        member.handle.store,
        member.shared,
        member.user.id,
        member.router,
        shared_readable=member.shared_readable,
        budget=member.budget,
    )


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.files import routes as files

    return list(files.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/files", title="nav.files", capability="files", order=40)]


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.files.tools import FILES

    return [FILES]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    # Free disk and every home's usage: refuses writes and pauses sandboxes when low.
    return [ServiceSpec("storage-guard", runtime.storage_guard.run_forever)]
