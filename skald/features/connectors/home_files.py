"""What the server puts in a member's home for a personal connector: the connector's
files (`~/.skald/connectors/<name>/<version>`), the operator's extra CA bundle
(`~/.skald/extra-ca.pem`), and the look at `~/.skald/connectors/deps/<hash>/.ready`.

Rule: the home is the member's: she has root in the sandbox it is mounted in and can
put a link at any of these names, or swap a folder for one at any moment. Everything
here goes through `skald.walk` by descriptor: the home is opened from the trusted
`data/homes/`, each folder below it is made and reopened with `O_NOFOLLOW`, files are
created `O_EXCL | O_NOFOLLOW` and renamed into place by descriptor. A link in a folder's
place fails the start with a clear error (`HomeLinkError`); a link at a file's place is
replaced by the file, inside the home.

Trap: a `Path` built from the home (`home / ".skald" / "extra-ca.pem"`) follows every
link in the middle of it, even with `O_NOFOLLOW` on the last component; `shutil`
(`copyfile`, `copytree`, `rmtree(ignore_errors=True)`) and `Path.exists` do too. Each
function blocks: call it in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from skald import walk
from skald.mcp import McpError

__all__ = ["HomeLinkError", "deps_ready", "place_ca", "place_files"]

SKALD_DIR = ".skald"
CA_NAME = "extra-ca.pem"
STAGING_SUFFIX = ".copying"


class HomeLinkError(McpError):
    """A folder the server writes in a home is a link (or changed meanwhile)."""


def _refused(where: str, exc: OSError) -> HomeLinkError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ESTALE, errno.EEXIST):
        why = "is a symbolic link or not a folder (or changed meanwhile)"
    else:
        why = f"cannot be written ({exc.strerror or exc})"
    return HomeLinkError(
        f"~/{where} in your home {why}; Skald never writes through links: "
        "remove it in your sandbox and switch the connector on again"
    )


@contextlib.contextmanager
def _folder(homes_dir: Path, user_id: str, parts: tuple[str, ...]) -> Iterator[int]:
    """The folder `~/<parts>` of the member, made where missing, never through a link."""
    try:
        home = walk.open_tree(homes_dir, (user_id,))
    except OSError as exc:
        raise _refused("", exc) from None
    try:
        fd = walk.makedirs_at(home, parts)
    except OSError as exc:
        raise _refused("/".join(parts), exc) from None
    finally:
        os.close(home)
    try:
        yield fd
    finally:
        os.close(fd)


def place_files(homes_dir: Path, user_id: str, name: str, src: Path) -> str:
    """Copy the installed connector `src` (a folder under the data directory, named
    after its version) to `~/.skald/connectors/<name>/<version>` once; returns that
    path relative to the home. A version already there is kept (it is the member's to
    change: it runs in her sandbox, as her)."""
    version = src.name
    rel = f"{SKALD_DIR}/connectors/{name}/{version}"
    with _folder(homes_dir, user_id, (SKALD_DIR, "connectors", name)) as parent:
        there = walk.lstat_at(parent, version)
        if there is not None:
            if walk.kind_of(there.st_mode) != "dir":
                raise _refused(rel, OSError(errno.ELOOP, "in the way"))
            return rel
        staging = version + STAGING_SUFFIX
        walk.remove_tree(parent, staging)  # a copy cut short before (or her link there)
        try:
            os.mkdir(staging, 0o755, dir_fd=parent)
            with walk.opened(src) as source:
                into = walk.open_dir_at(parent, staging)
                try:
                    walk.copy_tree_into(source, into)
                finally:
                    os.close(into)
            os.rename(staging, version, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            walk.remove_tree(parent, staging)
            raise _refused(rel, exc) from None
    return rel


def place_ca(homes_dir: Path, user_id: str, extra: Path) -> str:
    """The operator's CA bundle (a trusted host file) as `~/.skald/extra-ca.pem`, for
    the dependency install in the sandbox; returns that path relative to the home."""
    data = extra.read_bytes()
    with _folder(homes_dir, user_id, (SKALD_DIR,)) as parent:
        try:
            walk.write_file_at(parent, CA_NAME, data)
        except OSError as exc:
            raise _refused(f"{SKALD_DIR}/{CA_NAME}", exc) from None
    return f"{SKALD_DIR}/{CA_NAME}"


def deps_ready(homes_dir: Path, user_id: str, deps_hash: str) -> bool:
    """Whether the dependencies of this hash were installed in the home (their folder
    holds `.ready`), looked at without following links: a link anywhere on the way
    means "not ready" and the install (in the sandbox, as the member) runs again."""
    parts = (SKALD_DIR, "connectors", "deps", deps_hash)
    try:
        with walk.opened(homes_dir, (user_id, *parts)) as fd:
            return walk.lstat_at(fd, ".ready") is not None
    except OSError:
        return False
