"""Shared folders: the capability, the tables, each member's mounts, SHARED_FOLDERS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    from pathlib import Path

    from skald.files.mounts import MemberMount
    from skald.permissions import Capability
    from skald.plugins.facade import Member, Server
    from skald.store.migrations import Feature
    from skald.store.rows import User


@hookimpl
def skald_capabilities() -> list[Capability]:
    from skald.features.shared_folders.store import FOLDERS_MANAGE

    return [FOLDERS_MANAGE]


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.shared_folders.store import SCHEMA

    return [SCHEMA] if schema == "registry" else []


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.shared_folders.store import SharedFolders

    return [SharedFolders(server)]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    # Who reaches which folder, read once into memory before the sandboxes are looked at
    # (the watcher is order 50); every change reloads it.
    from skald.features.shared_folders.store import SharedFolders

    return [ServiceSpec("shared-folders", server.state(SharedFolders).run, order=5, restart=False)]


@hookimpl
def skald_mounts(user: User, server: Server | None) -> list[MemberMount]:
    from skald.features.shared_folders.store import SharedFolders

    folders = None if server is None else server.state(SharedFolders, None)
    return [] if folders is None else folders.mounts(user.id)


skald_routes = lazy_routes("skald.features.shared_folders.routes")


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"SHARED_FOLDERS": "the shared folders the member can reach"}


@hookimpl
def skald_prompt_blocks(member: Member) -> dict[str, str]:
    from skald.agent.prompts import one_line
    from skald.features.shared_folders.store import SharedFolders

    folders = member.server.state(SharedFolders, None)
    mine = [] if folders is None else folders.of_member(member.id)
    if not mine:
        return {"SHARED_FOLDERS": ""}
    lines = ["Shared folders (other members use them too; ~/shared/<name> in the sandbox):"]
    for folder, access in mine:
        how = "read-write" if access == "write" else "read-only"
        about = f": {one_line(folder.description)}" if folder.description else ""
        lines.append(f"- {folder.path}/ ({one_line(folder.name)}, {how}){about}")
    return {"SHARED_FOLDERS": "\n".join(lines)}


# Translations in shared_folders/i18n/ (the capability's name and hint for the Roles page).
WEB = FeatureWeb(__file__, "shared_folders", "shared-folders")
WEB.page(
    "/admin/shared-folders",
    "SharedFoldersPage",
    module="shared-folders.js",
    capability="folders.manage",
    order=125,
    icon="folder",
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_owned_places(user_id: str, server: Server) -> list[Path]:
    from skald.features.shared_folders.store import SharedFolders

    found = server.state(SharedFolders, None)
    return [] if found is None else found.owned(user_id)
