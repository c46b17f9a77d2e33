"""Shared folders: the capability, the tables, each member's mounts, SHARED_FOLDERS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from pathlib import Path

    from skald.files.mounts import MemberMount
    from skald.plugins.facade import Member, Server
    from skald.store.rows import User


skald_capabilities = lazy.capabilities("skald.features.shared_folders.store:FOLDERS_MANAGE")


skald_migrations = lazy.migrations(registry=("skald.features.shared_folders.store:SCHEMA",))


skald_server_state = lazy.built_with_server("skald.features.shared_folders.store:SharedFolders")


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


skald_routes = lazy.routes("skald.features.shared_folders.routes")


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
