"""Projects: a folder a member shares with others, and each member's own conversation.

A project is made by a member whose role holds `projects.use` (its owner): a name, an
immutable slug and a description. Its files live at `data/projects/<owner id>/<slug>/`
and are reached as `projects/<owner username>/<slug>/` (file tools, Files API) and
`~/projects/<owner username>/<slug>` in the sandbox. Rules:
- The owner is always a writer (never a row of `project_members`); members are `read`
  or `write`. The owner and the writers change members, name and description; only the
  owner deletes (to `data/projects/.trash/<owner id>/<slug>`).
- A member reaches the project only while their role holds `projects.use` (the mounts
  hook gets the role).
- Every member keeps their own conversation about it (`project_chats`, in their own
  database), running the project coordinator with PROJECT_CONTEXT filled; nobody sees
  another's. Only the folder is shared.
- Who reaches what is answered from memory (`Snapshot`), reloaded at every change, as
  shared folders do; each member concerned gets their sandbox remade between commands.

Trap: usernames name the path (`projects/ada/holiday`) and never change; the folder on
disk is under the owner's id, so a deleted owner's projects go with their rows
(`ON DELETE CASCADE`) and their folders stay on disk until purged by hand.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import apsw
import msgspec

from skald.agent.prompts import one_line
from skald.errors import ConflictError, NotFoundError
from skald.features.projects.history import ProjectHistory
from skald.files.mounts import MemberMount
from skald.files.places import NewPlace, display_name, path_name
from skald.paths import CONTAINER_HOME
from skald.permissions import declare
from skald.store.database import Database
from skald.store.kept import KeptReads
from skald.store.migrations import Feature, Migration

if TYPE_CHECKING:
    from skald.plugins.facade import Server

PROJECTS_USE = declare("projects.use", "Create and join projects")
PROJECT_AGENT: Final = "project-coordinator"
GROUP: Final = "projects"
TRASH: Final = ".trash"
Access = Literal["read", "write"]

_REGISTRY_V1 = """
CREATE TABLE projects(
    owner TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    slug TEXT NOT NULL CHECK (slug GLOB '[a-z0-9]*' AND length(slug) <= 40),
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    description TEXT NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
    trashed_at TEXT,
    PRIMARY KEY(owner, slug)
) WITHOUT ROWID;
CREATE TABLE project_members(
    owner TEXT NOT NULL,
    slug TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    access TEXT NOT NULL CHECK (access IN ('read', 'write')),
    PRIMARY KEY(owner, slug, user_id),
    FOREIGN KEY(owner, slug) REFERENCES projects(owner, slug) ON DELETE CASCADE
) WITHOUT ROWID;
"""
_OWNER_V1 = """
CREATE TABLE project_chats(
    conversation_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    slug TEXT NOT NULL,
    UNIQUE(owner, slug)
) WITHOUT ROWID;
"""
_REGISTRY_V2 = """
ALTER TABLE projects ADD COLUMN history INTEGER NOT NULL DEFAULT 0 CHECK (history IN (0, 1));
"""
REGISTRY: Final = Feature(
    "projects",
    (
        Migration(1, "projects and their members", _REGISTRY_V1),
        Migration(2, "a project's git history switch", _REGISTRY_V2),
    ),
    after=("accounts",),
)
OWNER: Final = Feature(
    "projects", (Migration(1, "each member's project conversations", _OWNER_V1),)
)


class ProjectMember(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    username: str
    access: Access
    owner: bool = False


class Project(msgspec.Struct, frozen=True, kw_only=True):
    owner: str  # user id
    owner_username: str
    slug: str
    name: str
    description: str
    created_at: str
    trashed_at: str | None
    members: list[ProjectMember]  # the owner first
    history: bool = False  # the owner's switch: commit every change (history.py)

    @property
    def path(self) -> str:
        return f"{GROUP}/{self.owner_username}/{self.slug}"

    def access_of(self, user_id: str) -> Access | None:
        return next((m.access for m in self.members if m.user_id == user_id), None)


class ProjectOut(msgspec.Struct, frozen=True, kw_only=True):
    """A project as its members see it: where it is, and what the caller may do."""

    owner: str
    slug: str
    name: str
    description: str
    path: str
    created_at: str
    members: list[ProjectMember]
    access: Access
    manage: bool
    delete: bool
    history: bool = False

    @classmethod
    def of(cls, p: Project, user_id: str) -> ProjectOut:
        access = p.access_of(user_id) or "read"
        return cls(
            owner=p.owner_username,
            slug=p.slug,
            name=p.name,
            description=p.description,
            path=p.path,
            created_at=p.created_at,
            members=p.members,
            access=access,
            manage=access == "write",
            delete=p.owner == user_id,
            history=p.history,
        )


def _read(c: apsw.Connection) -> list[Project]:
    names: dict[str, str] = {
        str(i): str(u) for i, u in c.execute("SELECT id, username FROM users").fetchall()
    }
    members: dict[tuple[str, str], list[ProjectMember]] = {}
    for owner, slug, user_id, access in c.execute(
        "SELECT owner, slug, user_id, access FROM project_members ORDER BY owner, slug, user_id"
    ):
        members.setdefault((owner, slug), []).append(
            ProjectMember(user_id=user_id, username=names.get(user_id, "?"), access=access)
        )
    out = []
    for owner, slug, name, description, created_at, trashed_at, history in c.execute(
        "SELECT owner, slug, name, description, created_at, trashed_at, history FROM projects "
        "ORDER BY name COLLATE NOCASE, owner, slug"
    ):
        first = ProjectMember(
            user_id=owner, username=names.get(owner, "?"), access="write", owner=True
        )
        out.append(
            Project(
                owner=owner,
                owner_username=names.get(owner, "?"),
                slug=slug,
                name=name,
                description=description,
                created_at=created_at,
                trashed_at=trashed_at,
                members=[first, *members.get((owner, slug), [])],
                history=bool(history),
            )
        )
    return out


class Projects:
    """Every project of the household (one per server: `server.state(Projects)`)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.root = server.layout.root / GROUP
        self._live: list[Project] = []
        self._lock = asyncio.Lock()
        self.history = ProjectHistory(self.root)

    async def load(self) -> None:
        found = await self.server.db.call(_read)
        self._live = [p for p in found if p.trashed_at is None]

    # -- reading (synchronous: the mounts hook and the prompt) ----------------------------

    def of_member(self, user_id: str) -> list[Project]:
        return [p for p in self._live if p.access_of(user_id) is not None]

    def folder(self, project: Project) -> Path:
        return self.root / project.owner / project.slug

    def mounts(self, user_id: str) -> list[MemberMount]:
        return [
            MemberMount(
                name=p.path,
                prefix=p.path,
                label=p.name,
                host_path=self.folder(p),
                container_path=f"{CONTAINER_HOME}/{p.path}",
                read_only=p.access_of(user_id) != "write",
                quota_owner=p.owner,
            )
            for p in self.of_member(user_id)
        ]

    def owned(self, user_id: str) -> list[Path]:
        """The folders counted against `user_id`'s quota: their projects' (in use) and
        those projects' git histories."""
        mine = [p for p in self._live if p.owner == user_id]
        return [self.folder(p) for p in mine] + [
            self.history.git_dir(p.owner, p.slug) for p in mine if p.history
        ]

    def of_mount(self, mount: str) -> Project | None:
        """The project whose folder is the mount named `mount` (`projects/ada/holiday`)."""
        return next((p for p in self._live if p.path == mount), None)

    def find(self, owner_username: str, slug: str, user_id: str) -> Project:
        """The project as `user_id` may see it (a member); anyone else: not found."""
        for p in self._live:
            mine = p.access_of(user_id) is not None
            if p.owner_username == owner_username and p.slug == slug and mine:
                return p
        raise NotFoundError(f"no project {owner_username}/{slug} of yours")

    # -- changing -------------------------------------------------------------------------

    async def create(
        self, owner: str, name: str, description: str = "", slug: str | None = None
    ) -> Project:
        name, description = display_name(name, noun="a project"), one_line(description)
        slug = path_name(name, slug, kind="project", fallback="project")
        place = NewPlace(
            taken=("SELECT 1 FROM projects WHERE owner=? AND slug=?", (owner, slug)),
            insert=(
                "INSERT INTO projects(owner, slug, name, description) VALUES (?, ?, ?, ?)",
                (owner, slug, name, description),
            ),
            remove=("DELETE FROM projects WHERE owner=? AND slug=?", (owner, slug)),
            conflict=f"you already have a project named {slug!r} (or in the trash)",
        )
        async with self._lock:
            await place.make(
                self.server.db,
                lambda: self._make_dir(owner, slug),
                where=f"the folder of project {slug!r}",
            )
            await self.load()
        self.server.remount({owner})
        return self._get(owner, slug)

    def _make_dir(self, owner: str, slug: str) -> None:
        self.root.mkdir(mode=0o700, exist_ok=True)
        (self.root / owner).mkdir(mode=0o700, exist_ok=True)
        (self.root / owner / slug).mkdir(mode=0o700, exist_ok=True)

    def _get(self, owner: str, slug: str) -> Project:
        return next(p for p in self._live if p.owner == owner and p.slug == slug)

    async def update(
        self,
        project: Project,
        *,
        name: str | None,
        description: str | None,
        history: tuple[str, str] | bool | None = None,
    ) -> Project:
        """`history`: the owner's (name, address) to turn it on, False to turn it off."""
        shown = None if name is None else display_name(name, noun="a project")
        if history and not project.history:
            assert isinstance(history, tuple)
            await self.history.start(self, project, history)
        await self._write(
            project,
            "UPDATE projects SET name=coalesce(?, name), description=coalesce(?, description), "
            "history=coalesce(?, history) WHERE owner=? AND slug=?",
            (
                shown,
                None if description is None else one_line(description),
                None if history is None else int(bool(history)),
                project.owner,
                project.slug,
            ),
        )
        return self._get(project.owner, project.slug)

    async def set_member(self, project: Project, username: str, access: Access) -> Project:
        user = await self.server.db.fetch_one("SELECT id FROM users WHERE username=?", (username,))
        if user is None:
            raise NotFoundError(f"no member named {username!r}")
        if user[0] == project.owner:
            raise ConflictError("the owner is always a writer")
        await self._write(
            project,
            "INSERT INTO project_members(owner, slug, user_id, access) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(owner, slug, user_id) DO UPDATE SET access=excluded.access",
            (project.owner, project.slug, user[0], access),
            {user[0]},
        )
        return self._get(project.owner, project.slug)

    async def remove_member(self, project: Project, username: str) -> Project:
        gone = next((m for m in project.members if m.username == username and not m.owner), None)
        if gone is None:
            raise NotFoundError(f"{username!r} is not a member of this project (or is its owner)")
        await self._write(
            project,
            "DELETE FROM project_members WHERE owner=? AND slug=? AND user_id=?",
            (project.owner, project.slug, gone.user_id),
            {gone.user_id},
        )
        return self._get(project.owner, project.slug)

    async def trash(self, project: Project) -> None:
        async with self._lock:
            await asyncio.to_thread(self._move_to_trash, project)
            await self.server.db.transaction(
                lambda c: c.execute(
                    "UPDATE projects SET trashed_at=strftime('%Y-%m-%dT%H:%M:%SZ','now') "
                    "WHERE owner=? AND slug=?",
                    (project.owner, project.slug),
                )
            )
            await self.load()
        self.server.remount({m.user_id for m in project.members})

    def _move_to_trash(self, project: Project) -> None:
        trash = self.root / TRASH / project.owner
        trash.mkdir(mode=0o700, parents=True, exist_ok=True)
        source, target = self.folder(project), trash / project.slug
        if target.exists():
            raise ConflictError(f"a trashed project {project.slug!r} is in the way")
        if source.is_dir() and not source.is_symlink():
            source.rename(target)
        self.history.move_to_trash(project, trash)

    async def _write(
        self, project: Project, sql: str, args: tuple[Any, ...], affected: set[str] | None = None
    ) -> None:
        async with self._lock:
            await self.server.db.transaction(lambda c: c.execute(sql, args))
            await self.load()
        if affected:
            self.server.remount(affected)

    async def run(self) -> None:
        await self.load()


# -- each member's own project conversation ---------------------------------------------


async def chat_of(db: Database, owner: str, slug: str) -> str | None:
    return await db.fetch_text(
        "SELECT conversation_id FROM project_chats WHERE owner=? AND slug=?", (owner, slug)
    )


class ChatProjects:
    """Which project a conversation of the member's belongs to, as each turn's
    PROJECT_CONTEXT asks: kept while `project_chats` is not written (skald/store/kept.py;
    most conversations belong to none, and that answer is kept too). One per unlocked
    member (`skald_member_state`), over their database."""

    def __init__(self, db: Database) -> None:
        self.kept: KeptReads[str, tuple[str, str] | None] = KeptReads(
            db, frozenset({"project_chats"})
        )

    async def of(self, conversation_id: str) -> tuple[str, str] | None:
        def q(c: apsw.Connection) -> tuple[str, str] | None:
            row = c.execute(
                "SELECT owner, slug FROM project_chats WHERE conversation_id=?", (conversation_id,)
            ).fetchone()
            return None if row is None else (str(row[0]), str(row[1]))

        return await self.kept.get(conversation_id, q)


async def remember_chat(db: Any, conversation_id: str, owner: str, slug: str) -> None:
    await db.transaction(
        lambda c: c.execute(
            "INSERT INTO project_chats(conversation_id, owner, slug) VALUES (?, ?, ?) "
            "ON CONFLICT(owner, slug) DO UPDATE SET conversation_id=excluded.conversation_id",
            (conversation_id, owner, slug),
        )
    )


def context(project: Project | None, member_id: str) -> str:
    """PROJECT_CONTEXT: the project, its members and their access, its root path."""
    if project is None:
        return (
            "## The project\nThis conversation belonged to a project that is no longer "
            "available to this member (deleted, or their access was removed)."
        )
    lines = [
        "## The project",
        f"Name: {one_line(project.name)}",
        f"Folder: {project.path}/ (in the sandbox: ~/{project.path})",
        f"This member's access: {'read-write' if project.access_of(member_id) == 'write' else 'read-only'}",
        "This conversation is this member's own: the other members do not see it.",
    ]
    if project.description:
        lines.append(f"About: {one_line(project.description)}")
    lines.append("Members:")
    for m in project.members:
        role = "owner" if m.owner else ("read-write" if m.access == "write" else "read-only")
        lines.append(f"- {m.username} ({role})")
    return "\n".join(lines)
