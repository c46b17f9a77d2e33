"""Kept keys: a member's opt-in to "let my assistant work while I'm signed out".

Normally an encrypted member's data key (DEK) is in memory only while one of their
sign-ins lives, and after a restart nothing of theirs is readable until they sign in
again. A member who opts in has their DEK sealed with the instance key
(`data/instance.key`, AES-256-GCM, the purpose naming the account) into
`data/kept-keys/<user id>.sealed` (0600), so the server can unlock them at start and
keep them unlocked when they sign out; their scheduled jobs run on time.

Rule: the sealed key exists exactly while the opt-in is on. Revoking overwrites the
file with zeros, syncs it and deletes it before answering; deactivating or deleting
the account revokes too. The opt-in is a fact an admin may see (never the key).
Every copy is wiped, not only the current file: keeping again replaces the file by a
rename, and the replaced inode is overwritten through a descriptor held across the
rename; revoking also wipes a temporary file a crash left between write and rename.

Trap: this is no defence against someone holding the whole data directory (the
instance key sits beside it, and a full backup holds both) — the same as the LLM API
keys; the member's page says so in plain words. A file copied onto another account
does not open: the purpose (the AAD) names the account.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from skald.core.sealing import InstanceKey
from skald.paths import validate_user_id

__all__ = ["KeptKeys"]


def _purpose(user_id: str) -> str:
    return f"skald:kept-dek:v1:{user_id}"


class KeptKeys:
    def __init__(self, folder: Path, instance_key: InstanceKey) -> None:
        self.folder = folder
        self._key = instance_key

    def path(self, user_id: str) -> Path:
        return self.folder / f"{validate_user_id(user_id)}.sealed"

    def is_kept(self, user_id: str) -> bool:
        return self.path(user_id).exists()

    def kept_ids(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.sealed"))

    def keep(self, user_id: str, dek: bytes) -> None:
        """Seal and write the member's key (blocking: call it in a thread)."""
        self.folder.mkdir(mode=0o700, exist_ok=True)
        sealed = self._key.seal(dek.hex(), _purpose(user_id)).encode()
        target = self.path(user_id)
        tmp = self.folder / f".{target.name}.{secrets.token_hex(4)}.tmp"
        old = _open_for_wipe(target)  # the copy the rename replaces, wiped after it
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(sealed)
                    out.flush()
                    os.fsync(out.fileno())
                tmp.replace(target)
            except BaseException:
                _wipe_path(tmp)
                raise
            if old is not None:
                _wipe(old)
        finally:
            if old is not None:
                os.close(old)

    def open(self, user_id: str) -> bytes | None:
        """The member's key, or None when they have not opted in (blocking)."""
        try:
            sealed = self.path(user_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return bytes.fromhex(self._key.open(sealed, _purpose(user_id)))

    def forget(self, user_id: str) -> bool:
        """Overwrite, sync and delete every copy of the sealed key (blocking): the file
        and what a crashed `keep` left. True if the file was there."""
        target = self.path(user_id)
        leftovers = sorted(self.folder.glob(f".{target.name}.*.tmp"))
        found = _wipe_path(target)
        for path in leftovers:
            _wipe_path(path)
        if found or leftovers:
            dir_fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return found


def _open_for_wipe(path: Path) -> int | None:
    try:
        return os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None


def _wipe(fd: int) -> None:
    """Zeros over the whole file, synced: the bytes go, whatever names it still has."""
    os.pwrite(fd, b"\0" * os.fstat(fd).st_size, 0)
    os.fsync(fd)


def _wipe_path(path: Path) -> bool:
    """Wipe the file, then unlink it. False if it was not there."""
    fd = _open_for_wipe(path)
    if fd is None:
        return False
    try:
        _wipe(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True
