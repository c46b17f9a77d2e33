"""Skills: a folder holding `SKILL.md` (its name, when to use it, the steps) and any
files it needs, in one of two trees:

- the household's, `data/skills/shared/<id>/`: changed only by roles holding
  `skills.manage` (granted to no role by default: a household skill is text that enters
  every member's prompt);
- each member's own, `data/skills/members/<user id>/<id>/`.

Both are read-only places for the member (`skills/shared/…`, `skills/mine/…` in the file
tools; `~/skills/shared`, `~/skills/mine` in the sandbox, mounted read-only), so the only
writers are `register`, `delete` and `import_zip` here, all by descriptor. SKILLS_LIST
holds each skill's name and one line. A bare id names the skill in whichever tree has
it; in both, the call fails and names both (never a silent pick).

Trap: a registered folder comes from the member's home, which their sandbox changes at
will: it is copied by descriptor (`walk.copy_tree_into`: no link, FIFO or device is
copied or followed) into a temporary folder, then renamed into place.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import secrets
import stat
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, ParamSpec

import msgspec

from skald import walk
from skald.agent.prompts import one_line
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.files.mounts import MemberMount, folder_mount
from skald.files.router import checked_name
from skald.paths import DataLayout
from skald.permissions import declare
from skald.quota import tree_size
from skald.store.kept import KEPT_S

SKILLS_MANAGE = declare(
    "skills.manage", "Add and remove the household's skills (they reach every member's prompt)"
)
Tree = Literal["shared", "mine"]
SKILL_FILE: Final = "SKILL.md"
P = ParamSpec("P")
ID: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
MAX_SKILL_MD: Final = 64 * 1024
MAX_ZIP_BYTES: Final = 8 * 1024 * 1024
MAX_ZIP_FILES: Final = 200
MAX_UNPACKED: Final = 32 * 1024 * 1024


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    tree: Tree
    name: str
    description: str

    @property
    def path(self) -> str:
        return f"skills/{self.tree}/{self.id}"


def tree_dir(layout: DataLayout, tree: Tree, user_id: str) -> Path:
    base = layout.root / "skills"
    return base / "shared" if tree == "shared" else base / "members" / user_id


def mounts(layout: DataLayout, user_id: str) -> list[MemberMount]:
    return [
        folder_mount(f"skills/{tree}", label, tree_dir(layout, tree, user_id), read_only=True)
        for tree, label in TREES
    ]


TREES: Final[tuple[tuple[Tree, str], ...]] = (
    ("shared", "Household skills"),
    ("mine", "My skills"),
)


def checked_id(skill_id: str) -> str:
    if not ID.fullmatch(skill_id):
        raise InvalidInputError(
            f"invalid skill id {skill_id[:60]!r}: 1-48 lowercase letters, digits and dashes"
        )
    return skill_id


def describe(text: str, skill_id: str) -> tuple[str, str]:
    """(name, one line) from SKILL.md: front matter `name:`/`description:`, else the
    first heading and the first line of text after it."""
    name = description = ""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            key, _, value = line.partition(":")
            if key.strip() == "name":
                name = value.strip().strip("\"'")
            elif key.strip() == "description":
                description = value.strip().strip("\"'")
    for line in lines:
        s = line.strip()
        if not name and s.startswith("# "):
            name = s[2:]
        elif not description and s and not s.startswith(("#", "---")) and ":" not in s[:20]:
            description = s
    return one_line(name or skill_id)[:80], one_line(description)[:200]


def _read_skill_md(tree_fd: int, skill_id: str) -> str | None:
    try:
        fd = walk.open_dir_at(tree_fd, skill_id)
    except OSError:
        return None
    try:
        ffd = walk.open_file_at(fd, SKILL_FILE)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(ffd, "rb") as f:
        return f.read(MAX_SKILL_MD).decode("utf-8", "replace")


def list_tree(layout: DataLayout, tree: Tree, user_id: str) -> list[Skill]:
    """The skills of one tree (blocking), by id; folders without SKILL.md are left out."""
    base = tree_dir(layout, tree, user_id)
    if not base.is_dir():
        return []
    out = []
    with walk.opened(base) as fd:
        for name in sorted(os.listdir(fd)):  # noqa: PTH208 (by descriptor)
            if not ID.fullmatch(name):
                continue
            text = _read_skill_md(fd, name)
            if text is not None:
                title, line = describe(text, name)
                out.append(Skill(id=name, tree=tree, name=title, description=line))
    return out


def skill_size(layout: DataLayout, tree: Tree, user_id: str, skill_id: str) -> int:
    """Bytes the installed skill takes (blocking)."""
    return tree_size(tree_dir(layout, tree, user_id) / checked_id(skill_id))


def list_all(layout: DataLayout, user_id: str) -> list[Skill]:
    return list_tree(layout, "shared", user_id) + list_tree(layout, "mine", user_id)


class Listings:
    """What SKILLS_LIST shows each member, kept between turns (`server.state(Listings)`):
    listing both trees is a thread's work that every turn's prompt waited for.

    Rule: the writers below are the only ones (the trees are read-only places), and each
    runs through `write`, which counts a change once it is done; a listing is kept while
    no change was counted since it was started, and for at most `max_age` seconds.
    Trap: the age bound is what covers a tree changed by hand on the host (or by another
    process): a skill copied in there shows within `max_age`, not at once.
    """

    def __init__(
        self,
        layout: DataLayout,
        *,
        max_age: float = KEPT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.layout = layout
        self.max_age = max_age
        self.clock = clock
        self._changes = 0
        self._kept: dict[str, tuple[int, float, list[Skill]]] = {}

    async def of(self, user_id: str) -> list[Skill]:
        """Both trees' skills for `user_id`: the kept listing while it is good."""
        kept = self._kept.get(user_id)
        now = self.clock()
        if kept is not None and kept[0] == self._changes and now - kept[1] < self.max_age:
            return kept[2]
        # Taken before the listing starts: a write finished meanwhile makes it stale.
        changes = self._changes
        found = await asyncio.to_thread(list_all, self.layout, user_id)
        self._kept[user_id] = (changes, now, found)
        return found

    async def write(self, fn: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run one of the writers in a thread, then count the change (even when it failed
        half-way: what it left may already show)."""
        try:
            await asyncio.to_thread(fn, *args, **kwargs)
        finally:
            self._changes += 1


def find(layout: DataLayout, user_id: str, ref: str) -> Skill:
    """`shared/<id>`, `mine/<id>` or a bare id (which must be in one tree only)."""
    tree, _, skill_id = ref.strip().strip("/").rpartition("/")
    if tree.startswith("skills/"):
        tree = tree[len("skills/") :]
    if tree not in ("", "shared", "mine"):
        raise InvalidInputError(f"a skill is shared/<id>, mine/<id> or <id>, not {ref[:80]!r}")
    checked_id(skill_id)
    found = [s for s in list_all(layout, user_id) if s.id == skill_id and tree in ("", s.tree)]
    if not found:
        raise NotFoundError(f"no skill {ref[:80]!r}")
    if len(found) > 1:
        both = " and ".join(s.path for s in found)
        raise ConflictError(
            f"{skill_id!r} is both {both}: name one (shared/{skill_id} or mine/{skill_id})"
        )
    return found[0]


def prompt_list(skills: list[Skill]) -> str:
    if not skills:
        return ""
    lines = ["Skills (read one with skill_read before following it; files at ~/skills/…):"]
    for s in skills:
        about = f": {s.description}" if s.description else ""
        lines.append(f"- {s.tree}/{s.id} ({s.name}){about}")
    return "\n".join(lines)


# -- writing (blocking; the only writers of the trees) ----------------------------------


def _tree_fd(layout: DataLayout, tree: Tree, user_id: str) -> int:
    base = tree_dir(layout, tree, user_id)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return walk.open_tree(base)


def _install(tree_fd: int, skill_id: str, fill: object) -> None:
    """Make `.new-<random>`, let `fill(fd)` write it, check SKILL.md, rename into place."""
    if stat.S_ISDIR(_lstat_mode(tree_fd, skill_id)):
        raise ConflictError(f"a skill {skill_id!r} exists already in this tree; delete it first")
    temp = f".new-{secrets.token_hex(8)}"
    os.mkdir(temp, 0o755, dir_fd=tree_fd)
    try:
        fd = walk.open_dir_at(tree_fd, temp)
        try:
            fill(fd)  # type: ignore[operator]
            if _read_skill_md(tree_fd, temp) is None:
                raise InvalidInputError(f"a skill needs a {SKILL_FILE} at the top of its folder")
        finally:
            os.close(fd)
        os.rename(temp, skill_id, src_dir_fd=tree_fd, dst_dir_fd=tree_fd)
    except BaseException:
        walk.remove_tree(tree_fd, temp)
        raise


def _lstat_mode(fd: int, name: str) -> int:
    st = walk.lstat_at(fd, name)
    return 0 if st is None else st.st_mode


def register(layout: DataLayout, tree: Tree, user_id: str, skill_id: str, source_fd: int) -> None:
    """Copy the open folder `source_fd` (from the member's home) in as `skill_id`."""
    checked_id(skill_id)
    tfd = _tree_fd(layout, tree, user_id)
    try:
        _install(tfd, skill_id, lambda fd: walk.copy_tree_into(source_fd, fd, max_depth=8))
    finally:
        os.close(tfd)


def delete(layout: DataLayout, tree: Tree, user_id: str, skill_id: str) -> None:
    checked_id(skill_id)
    base = tree_dir(layout, tree, user_id)
    if not (base / skill_id).is_dir():
        raise NotFoundError(f"no skill {tree}/{skill_id}")
    with walk.opened(base) as fd:
        left = walk.remove_tree(fd, skill_id)
    if left:
        raise ConflictError(f"some files of the skill could not be removed: {left[:3]}")


def import_zip(
    layout: DataLayout,
    tree: Tree,
    user_id: str,
    skill_id: str,
    data: bytes,
    room: Callable[[int], None] = lambda _: None,
) -> None:
    """A skill from a ZIP: SKILL.md at its top or in its one top folder. Refused: links,
    absolute or `..` names, more than MAX_ZIP_FILES files or MAX_UNPACKED bytes, and
    whatever `room` refuses, given the unpacked size before anything is written (the
    member's quota)."""
    checked_id(skill_id)
    if len(data) > MAX_ZIP_BYTES:
        raise InvalidInputError(f"the ZIP is larger than {MAX_ZIP_BYTES // 1048576} MiB")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise InvalidInputError("not a ZIP file") from None
    with archive:
        files = _zip_entries(archive)
        room(sum(info.file_size for _, info in files))

        def fill(fd: int) -> None:
            for parts, info in files:
                here = walk.makedirs_at(fd, parts[:-1]) if len(parts) > 1 else os.dup(fd)
                try:
                    with archive.open(info) as source:
                        walk.write_file_at(here, parts[-1], source.read(MAX_UNPACKED + 1))
                finally:
                    os.close(here)

        tfd = _tree_fd(layout, tree, user_id)
        try:
            _install(tfd, skill_id, fill)
        finally:
            os.close(tfd)


def _zip_entries(archive: zipfile.ZipFile) -> list[tuple[list[str], zipfile.ZipInfo]]:
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if len(infos) > MAX_ZIP_FILES:
        raise InvalidInputError(f"more than {MAX_ZIP_FILES} files in the ZIP")
    if sum(i.file_size for i in infos) > MAX_UNPACKED:
        raise InvalidInputError(f"the ZIP unpacks to more than {MAX_UNPACKED // 1048576} MiB")
    out = []
    for info in infos:
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidInputError(f"{info.filename[:80]!r} is a link; skills hold files only")
        parts = info.filename.replace("\\", "/").split("/")
        if info.filename.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise InvalidInputError(f"unsafe name in the ZIP: {info.filename[:80]!r}")
        parts = [checked_name(p) for p in parts]  # the one rule for names (router.py)
        out.append((parts, info))
    tops = {p[0] for p, _ in out}
    if len(tops) == 1 and all(len(p) > 1 for p, _ in out):  # one top folder: strip it
        out = [(p[1:], i) for p, i in out]
    if not any(p == [SKILL_FILE] for p, _ in out):
        raise InvalidInputError(f"the ZIP has no {SKILL_FILE} at its top")
    return out
