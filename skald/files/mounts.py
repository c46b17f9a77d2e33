"""A member's mounts: every place their agent paths and their sandbox reach, in one list.

Each `MemberMount` says how agent paths name it (`prefix`), where its files are on the
host (`host_path`; None for a virtual place such as a note store), where the sandbox
mounts it (`container_path`; None: not in the sandbox) and whether it is read-only. The
path router (`skald.files.router`) and the sandbox (`skald.sandbox.manager`) both take
the member's list, so adding a place is one registration (the `skald_mounts` hook,
`skald.plugins`); nothing else keeps its own table of places.

Rules:
- Exactly one mount is the home: prefix `~`, at `CONTAINER_HOME` in the sandbox.
- Every other prefix is one plain name (`docs`, `user-memory`), or a place of one of
  the `GROUPS` (`shared/photos`, `projects/ada/kitchen`, `skills/mine`; never a virtual
  one). It names the mount at the top of agent paths (`docs/x`, `~/docs/x`,
  `shared/photos/x`; the longest prefix wins) and so shadows a home folder of that
  path, which the sandbox hides too when it mounts something there. No prefix may lie
  inside another.
- A group's name (`shared`, `projects`, `skills`) is never the member's own folder:
  every path under it names a place of that group, and one the member has no mount
  for is refused by the router ("you have no access to the shared folder 'x'"), never
  written in the home. The sandbox binds a read-only folder of mountpoints over each
  group (`skald.sandbox.manager`), so nothing lands in the home's own folder of that
  name there either; `skald.files.homes.move_out_of_groups` moves what older versions
  left there to `<group> (own)`.

Trap: a container path inside the home (`/home/skald/x`) needs its mountpoint made on
the host by us before Docker sees it, or Docker creates it as root (the manager does
it, from this list).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import msgspec

from skald.paths import CONTAINER_HOME
from skald.store.note_paths import SHARED_MEMORY, USER_MEMORY

__all__ = [
    "CONTAINER_HOME",
    "DOCS_MOUNT",
    "GROUPS",
    "HOME_MOUNT",
    "HOME_PREFIX",
    "MemberMount",
    "check_mounts",
    "docs_mount",
    "folder_mount",
    "home_mount",
    "note_mounts",
]

HOME_MOUNT: Final = "home"
# A prefix is one name (`docs`) or a group and a name (`shared/photos`,
# `projects/<owner>/<slug>`): at most this many.
MAX_PREFIX_NAMES: Final = 3


class Group(msgspec.Struct, frozen=True):
    """Top-level names that hold shared places, never a member's own files."""

    noun: str  # what one place of the group is called: "shared folder"
    names: int  # how many names below the group's name one place takes
    pattern: str  # how a place is written, for messages: "shared/<name>/"


# The groups of places (see the module docstring). A grouped prefix must be one of
# their places; their names are reserved at the top of every home.
GROUPS: Final[dict[str, Group]] = {
    "shared": Group("shared folder", 1, "shared/<name>/"),
    "projects": Group("project", 2, "projects/<owner>/<name>/"),
    "skills": Group("skill tree", 1, "skills/shared/, skills/mine/"),
}
HOME_PREFIX: Final = "~"
DOCS_MOUNT: Final = "docs"


class MemberMount(msgspec.Struct, frozen=True, kw_only=True):
    """One place of a member (see the module docstring)."""

    name: str  # shown in the Files API and in resolved paths: "home", "docs"
    prefix: str  # how agent paths name its root: "~", "docs", "user-memory"
    label: str  # for people: "Home", "Manual"
    host_path: Path | None  # None: virtual (a note store), no folder on the host
    container_path: str | None  # where the sandbox mounts it; None: not in the sandbox
    read_only: bool
    # The rules of a note store (virtual mounts; the file tools follow them):
    # `indexed`: a write keeps the store's index.md, appending a line for a new note (the
    # full-text index moves with every write in the same transaction, in the store).
    indexed: bool = False
    # `approval`: every write waits for a member's yes. The seeded approval rules say so
    # for this prefix (`skald.approvals.rules`, default.shared-memory-write);
    # tests/test_mounts.py checks that the two agree.
    approval: bool = False
    # `sandbox_only`: bound in the sandbox, never routed (a signpost: `~/user-memory` in
    # the container holds a README saying notes are not files; the router keeps sending
    # `user-memory/…` to the note store).
    sandbox_only: bool = False
    # (name, text) the sandbox manager writes into `host_path` at every ensure.
    files: tuple[tuple[str, str], ...] = ()
    # Whose storage quota a write here counts against (None: the member's own). A
    # project's owner; a shared folder's creator.
    quota_owner: str | None = None

    @property
    def virtual(self) -> bool:
        return self.host_path is None

    @property
    def is_home(self) -> bool:
        return self.prefix == HOME_PREFIX


def check_mounts(mounts: Iterable[MemberMount]) -> list[MemberMount]:
    """The list with the home first; ValueError for a list no member could use."""
    found = list(mounts)
    homes = [m for m in found if m.is_home]
    if len(homes) != 1:
        raise ValueError(f"a member needs exactly one home mount (prefix ~), got {len(homes)}")
    home = homes[0]
    if home.virtual or home.container_path != CONTAINER_HOME or home.read_only:
        raise ValueError(f"the home mount must be a writable folder at {CONTAINER_HOME}")
    for label, values in (
        ("name", [m.name for m in found]),
        ("prefix", [m.prefix for m in found]),
        ("container path", [m.container_path for m in found if m.container_path]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"two mounts share the {label} {', '.join(twice)}")
    for m in found:
        if m.is_home:
            continue
        if not _plain_prefix(m.prefix) or (m.virtual and "/" in m.prefix):
            raise ValueError(f"mount {m.name!r}: the prefix must be one plain name")
        head, *below = m.prefix.split("/")
        group = GROUPS.get(head)
        if (group is None and below) or (group is not None and len(below) != group.names):
            raise ValueError(
                f"mount {m.name!r}: a prefix of several names must be a place of a group "
                f"({', '.join(g.pattern for g in GROUPS.values())}), and a group's name "
                "alone is no mount"
            )
        if any(o.prefix.startswith(m.prefix + "/") for o in found):
            raise ValueError(f"mount {m.name!r}: another mount's prefix lies inside it")
        if m.indexed and not m.virtual:
            raise ValueError(f"mount {m.name!r}: only a note store keeps an index")
        if m.sandbox_only and (m.virtual or m.container_path is None or not m.read_only):
            raise ValueError(f"mount {m.name!r}: a sandbox-only mount is a read-only folder")
        if m.container_path is not None:
            if m.virtual:
                raise ValueError(f"mount {m.name!r} is virtual and cannot be in the sandbox")
            norm = posixpath.normpath(m.container_path)
            if norm != m.container_path or not norm.startswith("/") or norm == "/":
                raise ValueError(f"mount {m.name!r}: the container path must be absolute")
    return [home, *(m for m in found if not m.is_home)]


def _plain_prefix(prefix: str) -> bool:
    """One plain name, or a few (`shared/photos`: a place grouped under a folder name)."""
    names = prefix.split("/")
    return len(names) <= MAX_PREFIX_NAMES and all(
        n and n not in (".", "..") and n[0] not in "~." for n in names
    )


def home_mount(home: Path) -> MemberMount:
    """The member's home folder (the `files` feature registers it)."""
    return MemberMount(
        name=HOME_MOUNT,
        prefix=HOME_PREFIX,
        label="Home",
        host_path=Path(home),
        container_path=CONTAINER_HOME,
        read_only=False,
    )


def docs_mount(docs: Path) -> MemberMount:
    """Skald's manual, read-only (the `files` feature registers it)."""
    return folder_mount(DOCS_MOUNT, "Manual", Path(docs), read_only=True)


def folder_mount(
    path: str, label: str, host_path: Path, *, read_only: bool, quota_owner: str | None = None
) -> MemberMount:
    """A folder on the host that stands at `path` in agent paths and at `~/path` in the
    sandbox alike, named by that path: the manual, a skill tree, a shared folder."""
    return MemberMount(
        name=path,
        prefix=path,
        label=label,
        host_path=host_path,
        container_path=f"{CONTAINER_HOME}/{path}",
        read_only=read_only,
        quota_owner=quota_owner,
    )


def note_mounts() -> list[MemberMount]:
    """The two note stores, virtual (the `memory` feature registers them)."""
    return [
        MemberMount(
            name=store,
            prefix=store,
            label=label,
            host_path=None,
            container_path=None,
            read_only=False,
            indexed=True,
            approval=store == SHARED_MEMORY,
        )
        for store, label in ((USER_MEMORY, "My notes"), (SHARED_MEMORY, "Household notes"))
    ]
