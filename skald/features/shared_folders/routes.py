"""The Shared folders page's API (capability `folders.manage`, administrators by default).

Thin: parse, authorise, call `SharedFolders`, serialise. Members reach the folders
themselves through the Files API (`shared/<slug>/…`), never through these routes.
"""

from __future__ import annotations

import msgspec
from litestar import delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.api.places import PlaceIn, PlacePatch
from skald.features.shared_folders.store import FOLDERS_MANAGE, Access, Folder, SharedFolders
from skald.plugins.facade import Server  # Litestar reads the annotations

# Every route's guard: the group in ROUTES gives it.
MANAGE = [requires(FOLDERS_MANAGE)]


class FolderIn(PlaceIn, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class FolderPatch(PlacePatch, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class MemberIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    access: Access


def _folders(server: Server) -> SharedFolders:
    return server.state(SharedFolders)


@get("/api/shared-folders")
async def list_folders(server: NamedDependency[Server]) -> list[Folder]:
    return await _folders(server).all()


@post("/api/shared-folders", status_code=201, responses=errors(400, 409))
async def create_folder(
    request: AuthRequest, data: JSONBody[FolderIn], server: NamedDependency[Server]
) -> Folder:
    """The folder counts against the storage quota of whoever makes it."""
    me = request.user.user.id
    return await _folders(server).create(data.name, data.description, data.slug, owner=me)


@patch("/api/shared-folders/{slug:str}", responses=errors(400, 404))
async def patch_folder(
    slug: FromPath[str], data: JSONBody[FolderPatch], server: NamedDependency[Server]
) -> Folder:
    return await _folders(server).update(slug, name=data.name, description=data.description)


@delete("/api/shared-folders/{slug:str}", responses=errors(404, 409))
async def trash_folder(slug: FromPath[str], server: NamedDependency[Server]) -> None:
    """Into the trash (restorable); `DELETE …/trash` removes it for good."""
    await _folders(server).trash(slug)


@post("/api/shared-folders/{slug:str}/restore", responses=errors(404, 409))
async def restore_folder(slug: FromPath[str], server: NamedDependency[Server]) -> Folder:
    return await _folders(server).restore(slug)


@delete("/api/shared-folders/{slug:str}/trash", responses=errors(404, 409))
async def purge_folder(slug: FromPath[str], server: NamedDependency[Server]) -> None:
    await _folders(server).purge(slug)


@put("/api/shared-folders/{slug:str}/members/{user_id:str}", responses=errors(400, 404))
async def set_member(
    slug: FromPath[str],
    user_id: FromPath[str],
    data: JSONBody[MemberIn],
    server: NamedDependency[Server],
) -> Folder:
    return await _folders(server).set_member(slug, user_id, data.access)


@delete(
    "/api/shared-folders/{slug:str}/members/{user_id:str}",
    status_code=200,
    responses=errors(404),
)
async def remove_member(
    slug: FromPath[str], user_id: FromPath[str], server: NamedDependency[Server]
) -> Folder:
    return await _folders(server).remove_member(slug, user_id)


ROUTES = (
    group(
        list_folders,
        create_folder,
        patch_folder,
        trash_folder,
        restore_folder,
        purge_folder,
        set_member,
        remove_member,
        guards=MANAGE,
    ),
)
