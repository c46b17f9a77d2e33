"""A project's git history (#26 item 3): each write of the file tools or the Files API
inside a project whose owner turned history on is committed with the host's `git`,
authored by the member who wrote; members read the log and a commit's diff, and writers
restore one file from a revision (through their router's write gate).

Rules:
- The repository is outside the project folder (`data/projects/.history/<owner id>/
  <slug>.git`, `--git-dir` + `--work-tree`): the folder is writable from members'
  sandboxes, and a `.git/config` planted there could name commands for git to run.
- Every git call is an argument list (never a shell string) with a timeout, in a
  thread, with a fixed environment: no system or user configuration
  (`GIT_CONFIG_NOSYSTEM=1`, `HOME` an empty folder), no hooks (`core.hooksPath=
  /dev/null`), no fsmonitor, no automatic gc (it would outlive the timeout).
- A revision is 7-64 hex digits before it reaches git (400 otherwise); output is read
  up to a cap and the log shows the last MAX_LOG commits.
- Commits of one project are serialised (one lock each); `add -A` takes everything, so
  what a sandbox command changed meanwhile joins the next commit.

Trap: the history keeps every version of every file; its folder counts against the
owner's quota (`owned`), like the project's own folder.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.log import get_logger

if TYPE_CHECKING:
    from skald.features.projects.store import Project, Projects

log = get_logger("skald.projects")

HISTORY: Final = ".history"
MAX_LOG: Final = 200
TIMEOUT_S: Final = 30.0
MAX_OUTPUT: Final = 1024 * 1024  # a diff shown; longer is cut
MAX_RESTORE: Final = 10 * 1024 * 1024
REVISION: Final = re.compile(r"[0-9a-f]{7,64}")
_FIELDS: Final = "%H%x1f%an%x1f%ae%x1f%aI%x1f%P%x1f%s"
_SAFE: Final = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "commit.gpgSign=false",
    "-c", "core.quotePath=false",
)  # fmt: skip


class GitFailed(ConflictError):
    """git answered an error, timed out or is missing (a 409 for the caller)."""

    code = "git_failed"


class Commit(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    author: str
    email: str
    date: str
    parent: str | None
    message: str


class CommitDiff(msgspec.Struct, frozen=True, kw_only=True):
    commit: Commit
    files: list[str]  # status and path, as `--name-status` says (`M\tnotes.md`)
    diff: str
    truncated: bool


def checked_revision(raw: str) -> str:
    rev = raw.strip().lower()
    if not REVISION.fullmatch(rev):
        raise InvalidInputError("a revision is 7 to 64 hexadecimal digits")
    return rev


def checked_path(raw: str) -> str:
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts or any("\0" in p or p == ".git" for p in parts):
        raise InvalidInputError("name a file of the project by its path inside it")
    return "/".join(parts)


def author_of(display_name: str, username: str) -> tuple[str, str]:
    """A name and address git accepts (no `<`, `>`, control characters)."""
    name = "".join(c for c in display_name if c.isprintable() and c not in "<>")
    return (name.strip() or username), f"{username}@skald.local"


class Git:
    """One project's repository; every method blocks (call it through a thread)."""

    def __init__(self, git_dir: Path, work_tree: Path, home: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.home = home

    def _env(self, author: tuple[str, str] | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "TZ": "UTC",
            "GIT_COMMITTER_NAME": "Skald",
            "GIT_COMMITTER_EMAIL": "skald@skald.local",
        }
        if author is not None:
            env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"] = author
        return env

    def run(
        self,
        *args: str,
        author: tuple[str, str] | None = None,
        ok: tuple[int, ...] = (0,),
        limit: int = MAX_OUTPUT,
    ) -> tuple[int, bytes, bool]:
        """(exit code, stdout up to `limit`, whether it was cut); GitFailed otherwise."""
        command = [
            "git", "-C", str(self.work_tree), *_SAFE,
            f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}", *args,
        ]  # fmt: skip
        try:
            proc = subprocess.Popen(  # noqa: S603 (an argument list, no shell)
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env(author),
                cwd=self.home,
            )
        except FileNotFoundError:
            raise GitFailed("git is not installed on the server") from None
        # The timer kills a git that hangs; reading stops at `limit` (then git is killed).
        timer = threading.Timer(TIMEOUT_S, proc.kill)
        timer.start()
        assert proc.stdout is not None and proc.stderr is not None
        with proc.stdout, proc.stderr:
            try:
                out = proc.stdout.read(limit + 1)
                cut = len(out) > limit
                if cut:
                    proc.kill()
                err = proc.stderr.read(4096)
                code = proc.wait()
            finally:
                timer.cancel()
        if not cut and code not in ok:
            if code < 0:
                raise GitFailed(f"git {args[0]} took longer than {TIMEOUT_S:.0f} s")
            text = err.decode("utf-8", "replace").strip().splitlines()
            raise GitFailed(f"git {args[0]} failed: {(text or ['?'])[-1][:200]}")
        return code, out[:limit], cut

    def init(self) -> None:
        self.git_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            self.run("init", "--quiet")

    def commit(self, message: str, author: tuple[str, str], allow_empty: bool = False) -> bool:
        """Commit everything in the folder; False when nothing changed."""
        self.run("add", "--all", "--", ".")
        code, _, _ = self.run("diff", "--cached", "--quiet", ok=(0, 1))
        if code == 0 and not allow_empty and self.head() is not None:
            return False
        extra = ("--allow-empty",) if code == 0 else ()
        self.run("commit", "--quiet", "--no-verify", *extra, "-m", message[:500], author=author)
        return True

    def head(self) -> str | None:
        code, out, _ = self.run("rev-parse", "--verify", "--quiet", "HEAD", ok=(0, 1))
        return out.decode().strip() if code == 0 else None

    def log(self) -> list[Commit]:
        if self.head() is None:
            return []
        _, out, _ = self.run("log", f"-n{MAX_LOG}", f"--format={_FIELDS}", "HEAD")
        return [_commit(line) for line in out.decode("utf-8", "replace").splitlines() if line]

    def resolve(self, rev: str) -> str:
        code, out, _ = self.run(
            "rev-parse", "--verify", "--quiet", f"{checked_revision(rev)}^{{commit}}", ok=(0, 1)
        )
        if code != 0:
            raise NotFoundError(f"no revision {rev[:64]} in this project's history")
        return out.decode().strip()

    def show(self, rev: str) -> CommitDiff:
        full = self.resolve(rev)
        _, head, _ = self.run("show", "-s", f"--format={_FIELDS}", full)
        _, names, _ = self.run("show", "--format=", "--name-status", "--no-renames", full)
        _, diff, cut = self.run(
            "show", "--format=", "--no-color", "--no-ext-diff", "--no-textconv", "--patch", full
        )
        return CommitDiff(
            commit=_commit(head.decode("utf-8", "replace").strip()),
            files=[n for n in names.decode("utf-8", "replace").splitlines() if n],
            diff=diff.decode("utf-8", "replace"),
            truncated=cut,
        )

    def blob(self, rev: str, path: str) -> bytes:
        """A regular file's bytes as they were at `rev` (links and folders refused)."""
        full = self.resolve(rev)
        _, listed, _ = self.run("ls-tree", "-z", full, "--", checked_path(path))
        mode, _, rest = listed.decode("utf-8", "replace").partition(" ")
        if not listed:
            raise NotFoundError(f"{path[:200]} is not in revision {full[:12]}")
        if mode not in ("100644", "100755"):
            raise InvalidInputError(f"{path[:200]} was not a plain file in that revision")
        blob_id = rest.split(" ", 1)[1].split("\t", 1)[0]
        _, data, cut = self.run("cat-file", "blob", blob_id, limit=MAX_RESTORE)
        if cut:
            raise InvalidInputError(f"{path[:200]} is larger than {MAX_RESTORE // 1048576} MiB")
        return data


def _commit(line: str) -> Commit:
    sha, name, email, date, parents, subject = (line.split("\x1f") + [""] * 6)[:6]
    return Commit(
        id=sha,
        author=name,
        email=email,
        date=date,
        parent=parents.split(" ")[0] or None,
        message=subject,
    )


class ProjectHistory:
    """The git histories of every project (one per server: `server.state(ProjectHistory)`)."""

    def __init__(self, root: Path) -> None:
        self.root = root  # data/projects
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def git_dir(self, owner: str, slug: str) -> Path:
        return self.root / HISTORY / owner / f"{slug}.git"

    def git(self, projects: Projects, project: Project) -> Git:
        home = self.root / HISTORY / ".home"  # git's HOME: empty, so no user config
        return Git(self.git_dir(project.owner, project.slug), projects.folder(project), home)

    def lock(self, project: Project) -> asyncio.Lock:
        return self._locks.setdefault((project.owner, project.slug), asyncio.Lock())

    async def start(self, projects: Projects, project: Project, author: tuple[str, str]) -> None:
        """History turned on: a repository (kept if it exists) and a first commit."""
        if shutil.which("git") is None:
            raise ConflictError("git is not installed on the server; history cannot be kept")
        git = self.git(projects, project)

        def first() -> None:
            git.home.mkdir(mode=0o700, parents=True, exist_ok=True)
            git.init()
            git.commit("history turned on", author, allow_empty=git.head() is None)

        async with self.lock(project):
            await asyncio.to_thread(first)

    async def record(
        self, projects: Projects, project: Project, message: str, author: tuple[str, str]
    ) -> None:
        git = self.git(projects, project)
        async with self.lock(project):
            if not (git.git_dir / "HEAD").exists():
                return  # turned on, but its repository is gone: nothing to add to
            await asyncio.to_thread(git.commit, message, author)

    async def log(self, projects: Projects, project: Project) -> list[Commit]:
        git = self.git(projects, project)
        if not (git.git_dir / "HEAD").exists():
            return []
        return await asyncio.to_thread(git.log)

    async def show(self, projects: Projects, project: Project, rev: str) -> CommitDiff:
        checked_revision(rev)
        git = self._existing(projects, project)
        return await asyncio.to_thread(git.show, rev)

    async def blob(self, projects: Projects, project: Project, rev: str, path: str) -> bytes:
        checked_revision(rev)
        checked_path(path)
        git = self._existing(projects, project)
        return await asyncio.to_thread(git.blob, rev, path)

    def _existing(self, projects: Projects, project: Project) -> Git:
        git = self.git(projects, project)
        if not (git.git_dir / "HEAD").exists():
            raise NotFoundError("this project keeps no history")
        return git

    def move_to_trash(self, project: Project, trash: Path) -> None:
        """With the project's folder (blocking): `<trash>/<slug>.git`."""
        source = self.git_dir(project.owner, project.slug)
        if source.is_dir() and not source.is_symlink():
            source.rename(trash / f"{project.slug}.git")
