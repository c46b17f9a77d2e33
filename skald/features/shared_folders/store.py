"""Shared folders: the household's folders several members reach, and who may write.

Each folder lives at `data/shared/<slug>/` (the slug is chosen once and never changes;
the display name can). A member reaches a folder they belong to as `shared/<slug>/` in
the file tools and the Files API, and at `~/shared/<slug>` in their sandbox, read-only
unless their access is `write`. Rules:
- Read-only is enforced twice: the bind mount is read-only, and the member's router marks
  the place not writable (`require_writable`, the write gate every write passes).
- Who reaches what is answered from memory (`Snapshot`): the mounts hook is synchronous
  and runs at every path a member's router parses, so every change reloads the snapshot
  before it answers, and each member whose access changed gets their sandbox ensured
  again (`SandboxManager.ensure` waits for their running commands: never mid-command).
- Deleting moves the folder to `data/shared/.trash/<slug>` and keeps its row and members
  (restorable); purging removes it for good. A trashed slug stays taken until purged.

Trap: the members' rows cascade with the user, but the snapshot does not know a member
was deleted until the next reload; a deleted member has no router or sandbox anyway.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import apsw
import msgspec

from skald import walk
from skald.agent.prompts import one_line
from skald.errors import ConflictError, NotFoundError
from skald.files.mounts import MemberMount, folder_mount
from skald.files.places import NewPlace, checked, display_name, path_name
from skald.log import get_logger
from skald.permissions import declare
from skald.store.migrations import Feature, Migration

if TYPE_CHECKING:
    from skald.plugins.facade import Server

log = get_logger("skald.shared_folders")

FOLDERS_MANAGE = declare("folders.manage", "Manage shared folders and who reaches them")

GROUP: Final = "shared"  # agent paths `shared/<slug>/…`, `~/shared/<slug>` in the sandbox
TRASH: Final = ".trash"
Access = Literal["read", "write"]

_V1 = f"""
CREATE TABLE shared_folders(
    slug TEXT PRIMARY KEY CHECK (slug GLOB '[a-z0-9]*' AND length(slug) <= 40),
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    description TEXT NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- whose storage quota the folder counts against: who made it (NULL: that account
    -- is gone, and the folder counts against nobody until an administrator makes anew)
    owner TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
    trashed_at TEXT
) WITHOUT ROWID;
CREATE TABLE shared_folder_members(
    slug TEXT NOT NULL REFERENCES shared_folders(slug) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    access TEXT NOT NULL CHECK (access IN ('read', 'write')),
    PRIMARY KEY(slug, user_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO capabilities(name, description)
    VALUES ('{FOLDERS_MANAGE.name}', '{FOLDERS_MANAGE.description}');
INSERT OR IGNORE INTO role_capabilities(role, capability)
    SELECT name, '{FOLDERS_MANAGE.name}' FROM roles WHERE name = 'admin';
"""

SCHEMA: Final = Feature(
    "shared_folders",
    (Migration(1, "shared folders, their members; folders.manage for admins", _V1),),
    after=("accounts",),
)


class Member(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    access: Access


class Folder(msgspec.Struct, frozen=True, kw_only=True):
    slug: str
    name: str
    description: str
    owner: str | None  # whose quota it counts against (who made it)
    created_at: str
    trashed_at: str | None
    members: list[Member]

    @property
    def path(self) -> str:
        return f"{GROUP}/{self.slug}"


class Snapshot(msgspec.Struct, frozen=True):
    """Every folder in use, by slug, and each member's folders (what the mounts hook reads)."""

    folders: dict[str, Folder]
    of_member: dict[str, list[tuple[Folder, Access]]]


def _read(c: apsw.Connection) -> list[Folder]:
    members: dict[str, list[Member]] = {}
    for slug, user_id, access in c.execute(
        "SELECT slug, user_id, access FROM shared_folder_members ORDER BY slug, user_id"
    ):
        members.setdefault(slug, []).append(Member(user_id=user_id, access=access))
    return [
        Folder(
            slug=slug,
            name=name,
            description=description,
            owner=owner,
            created_at=created_at,
            trashed_at=trashed_at,
            members=members.get(slug, []),
        )
        for slug, name, description, owner, created_at, trashed_at in c.execute(
            "SELECT slug, name, description, owner, created_at, trashed_at FROM shared_folders "
            "ORDER BY name COLLATE NOCASE, slug"
        )
    ]


def _snapshot(folders: list[Folder]) -> Snapshot:
    live = {f.slug: f for f in folders if f.trashed_at is None}
    of_member: dict[str, list[tuple[Folder, Access]]] = {}
    for folder in live.values():
        for m in folder.members:
            of_member.setdefault(m.user_id, []).append((folder, m.access))
    return Snapshot(live, of_member)


class SharedFolders:
    """The household's shared folders (one per server: `server.state(SharedFolders)`)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.root = server.layout.root / GROUP
        self._snapshot = Snapshot({}, {})
        self._all: list[Folder] = []
        self.loaded = asyncio.Event()
        self._lock = asyncio.Lock()

    # -- reading --------------------------------------------------------------------------

    async def load(self) -> None:
        folders = await self.server.db.call(_read)
        self._all = folders
        self._snapshot = _snapshot(folders)
        self.loaded.set()

    def folder_dir(self, slug: str) -> Path:
        return self.root / checked(slug, kind="folder")

    def of_member(self, user_id: str) -> list[tuple[Folder, Access]]:
        return list(self._snapshot.of_member.get(user_id, []))

    def mounts(self, user_id: str) -> list[MemberMount]:
        """The member's shared folders as mounts (synchronous: from the snapshot)."""
        return [
            folder_mount(
                folder.path,
                folder.name,
                self.root / folder.slug,
                read_only=access != "write",
                quota_owner=folder.owner,
            )
            for folder, access in self.of_member(user_id)
        ]

    def owned(self, user_id: str) -> list[Path]:
        """The folders counted against `user_id`'s quota (in use or in the trash)."""
        return [
            self.root / f.slug if f.trashed_at is None else self.root / TRASH / f.slug
            for f in self._all
            if f.owner == user_id
        ]

    async def all(self) -> list[Folder]:
        return await self.server.db.call(_read)

    async def get(self, slug: str) -> Folder:
        found = next((f for f in await self.all() if f.slug == slug), None)
        if found is None:
            raise NotFoundError(f"no shared folder {slug!r}")
        return found

    # -- changing -------------------------------------------------------------------------

    async def create(
        self, name: str, description: str = "", slug: str | None = None, owner: str | None = None
    ) -> Folder:
        """`owner`: whose storage quota the folder counts against (who makes it)."""
        name, description = display_name(name, noun="a shared folder"), one_line(description)
        slug = path_name(name, slug, kind="folder", fallback="folder")
        place = NewPlace(
            taken=("SELECT 1 FROM shared_folders WHERE slug=?", (slug,)),
            insert=(
                "INSERT INTO shared_folders(slug, name, description, owner) VALUES (?, ?, ?, ?)",
                (slug, name, description, owner),
            ),
            remove=("DELETE FROM shared_folders WHERE slug=?", (slug,)),
            conflict=f"the path name {slug!r} is taken (a folder in use or trashed)",
        )
        async with self._lock:
            await place.make(self.server.db, lambda: self._make_dir(slug), where=f"shared/{slug}")
            await self.load()
        return await self.get(slug)

    def _make_dir(self, slug: str) -> None:
        self.root.mkdir(mode=0o700, exist_ok=True)
        try:
            (self.root / slug).mkdir(mode=0o700)  # a leftover of that name is not adopted
        except FileExistsError:
            raise ConflictError(f"data/shared/{slug} exists already (a leftover?)") from None

    async def update(
        self, slug: str, *, name: str | None = None, description: str | None = None
    ) -> Folder:
        """The display name and description; the path (`shared/<slug>`) never changes."""
        shown = None if name is None else display_name(name, noun="a shared folder")

        def q(c: apsw.Connection) -> int:
            c.execute(
                "UPDATE shared_folders SET name=coalesce(?, name), "
                "description=coalesce(?, description) WHERE slug=?",
                (
                    shown,
                    None if description is None else one_line(description),
                    slug,
                ),
            )
            return c.changes()

        async with self._lock:
            if not await self.server.db.transaction(q):
                raise NotFoundError(f"no shared folder {slug!r}")
            await self.load()
        return await self.get(slug)

    async def set_member(self, slug: str, user_id: str, access: Access) -> Folder:
        def q(c: apsw.Connection) -> None:
            if not c.execute("SELECT 1 FROM users WHERE id=?", (user_id,)).fetchone():
                raise NotFoundError("no such member")
            c.execute(
                "INSERT INTO shared_folder_members(slug, user_id, access) VALUES (?, ?, ?) "
                "ON CONFLICT(slug, user_id) DO UPDATE SET access=excluded.access",
                (slug, user_id, access),
            )

        await self._change(slug, q, {user_id})
        return await self.get(slug)

    async def remove_member(self, slug: str, user_id: str) -> Folder:
        def q(c: apsw.Connection) -> None:
            c.execute(
                "DELETE FROM shared_folder_members WHERE slug=? AND user_id=?", (slug, user_id)
            )
            if not c.changes():
                raise NotFoundError("that member has no access to this folder")

        await self._change(slug, q, {user_id})
        return await self.get(slug)

    async def trash(self, slug: str) -> None:
        """Into `data/shared/.trash/<slug>`, with its members kept (restorable)."""
        folder = await self.get(slug)
        if folder.trashed_at is not None:
            raise ConflictError(f"{slug!r} is already in the trash")

        def q(c: apsw.Connection) -> None:
            c.execute(
                "UPDATE shared_folders SET trashed_at=strftime('%Y-%m-%dT%H:%M:%SZ','now') "
                "WHERE slug=?",
                (slug,),
            )

        await self._change(slug, q, {m.user_id for m in folder.members}, move=(slug, True))

    async def restore(self, slug: str) -> Folder:
        folder = await self.get(slug)
        if folder.trashed_at is None:
            raise ConflictError(f"{slug!r} is not in the trash")

        def q(c: apsw.Connection) -> None:
            c.execute("UPDATE shared_folders SET trashed_at=NULL WHERE slug=?", (slug,))

        await self._change(slug, q, {m.user_id for m in folder.members}, move=(slug, False))
        return await self.get(slug)

    async def purge(self, slug: str) -> None:
        """Remove a trashed folder for good (its files too)."""
        folder = await self.get(slug)
        if folder.trashed_at is None:
            raise ConflictError(f"{slug!r} is in use: move it to the trash first")
        async with self._lock:
            left = await asyncio.to_thread(self._remove_trashed, slug)
            if left:
                raise ConflictError(f"some files could not be removed: {', '.join(left[:5])}")
            await self.server.db.transaction(
                lambda c: c.execute("DELETE FROM shared_folders WHERE slug=?", (slug,))
            )
            await self.load()

    def _remove_trashed(self, slug: str) -> list[str]:
        trash = self.root / TRASH
        if not (trash / slug).exists():
            return []
        with walk.opened(trash) as fd:
            return walk.remove_tree(fd, slug)

    def _move(self, slug: str, to_trash: bool) -> None:
        # Renames within data/shared/ (one file system); the names are ours, not members'.
        trash = self.root / TRASH
        trash.mkdir(mode=0o700, parents=True, exist_ok=True)
        here, there = self.root / slug, trash / slug
        source, target = (here, there) if to_trash else (there, here)
        if target.exists():
            raise ConflictError(f"{target.name} is in the way in {target.parent.name}")
        if source.is_dir() and not source.is_symlink():
            source.rename(target)
        else:
            target.mkdir(mode=0o700)

    async def _change(
        self,
        slug: str,
        q: object,
        affected: set[str],
        move: tuple[str, bool] | None = None,
    ) -> None:
        async with self._lock:
            if not await self.server.db.fetch_one(
                "SELECT 1 FROM shared_folders WHERE slug=?", (slug,)
            ):
                raise NotFoundError(f"no shared folder {slug!r}")
            if move is not None:
                await asyncio.to_thread(self._move, *move)
            try:
                await self.server.db.transaction(q)  # type: ignore[arg-type]
            except BaseException:
                if move is not None:  # put the folder back where its row says it is
                    await asyncio.to_thread(self._move, move[0], not move[1])
                raise
            await self.load()
        self.server.remount(affected)

    async def run(self) -> None:
        """The service: read the snapshot once the server starts (then every change)."""
        await self.load()
