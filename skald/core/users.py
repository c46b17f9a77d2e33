"""Accounts: creating, unlocking, locking and revoking members.

An unlocked account is an open owner database (and, for encrypted accounts, the DEK
that opened it) held in memory. Handles given out by `unlock` all point at the same
open database; locking or deactivating closes it, so every old handle fails on its
next query — revocation is the close, not a flag somebody has to remember to check.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from skald.core import keys
from skald.core.kdf_pool import Durations, KdfPool
from skald.errors import (
    AccountInactiveError,
    AuthenticationError,
    ConflictError,
    DatabaseClosedError,
    InvalidInputError,
    NotFoundError,
)
from skald.files.homes import remove_home, remove_place
from skald.paths import DataLayout
from skald.permissions import can, declare
from skald.store.database import Database, open_encrypted, open_plain
from skald.store.migrations import SchemaPlan, migrate_features
from skald.store.migrations.owner import OWNER
from skald.store.owner import OwnerStore
from skald.store.registry import Registry, now_iso
from skald.store.rows import User

# Managing accounts: the account routes, and the rule that the last active holder of it
# cannot be deactivated or deleted (so the instance always has someone to manage it).
ADMIN_USERS = declare("admin.users", "Manage accounts")

USERNAME_RE = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")
MIN_PASSWORD = 8
MAX_PASSWORD = 1024


def check_username(username: str) -> str:
    name = username.strip().lower()
    if not USERNAME_RE.match(name):
        raise InvalidInputError(
            "usernames are 2-32 characters: a letter, then letters, digits, '.', '_' or '-'"
        )
    return name


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise InvalidInputError(f"passwords need at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise InvalidInputError(f"passwords are at most {MAX_PASSWORD} characters")


@dataclass
class _OpenOwner:
    """One member's open owner database, shared by every handle of that member."""

    db: Database
    dek: bytearray | None

    def forget(self) -> None:
        # Best effort: Python may hold other copies, but ours does not outlive the lock.
        if self.dek is not None:
            self.dek[:] = bytes(len(self.dek))
            self.dek = None


@dataclass
class UnlockedUser:
    """What `unlock` returns: a member and access to their private data."""

    user: User
    _owner: _OpenOwner = field(repr=False)

    @property
    def db(self) -> Database:
        if self._owner.db.closed:
            raise DatabaseClosedError(f"{self.user.username} is locked")
        return self._owner.db

    @property
    def store(self) -> OwnerStore:
        return OwnerStore(self.db)


class CreatedUser(msgspec.Struct, frozen=True, kw_only=True):
    user: User
    recovery_code: str | None  # shown once, never stored in clear


class UserManager:
    """Every change to an account goes through here (registry rows, owner files, keys)."""

    def __init__(
        self,
        registry: Registry,
        layout: DataLayout,
        kdf: keys.KdfParams,
        busy_timeout_ms: int = 5000,
        owner_plan: SchemaPlan = OWNER,
        kdf_pool: KdfPool | None = None,
        private_places: Callable[[str], list[Path]] = lambda _: [],
    ) -> None:
        self.registry = registry
        # The features' folders of a member's outside the home, removed with the account.
        self.private_places = private_places
        self.owner_plan = owner_plan  # the built-in features of owner databases and plugins'
        self.layout = layout
        self.kdf = kdf
        # Every Argon2 derivation runs here, bounded, never on the default executor.
        self.kdf_pool = kdf_pool or KdfPool()
        # How long this server's password checks take: what an unknown name waits.
        self.checks = Durations()
        self.busy_timeout_ms = busy_timeout_ms
        self._open: dict[str, _OpenOwner] = {}
        # Serialises unlock/lock per user so two logins don't open the file twice.
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock_for(self, user_id: str) -> asyncio.Lock:
        return self._locks.setdefault(user_id, asyncio.Lock())

    # -- lookup ------------------------------------------------------------------

    async def get(self, username: str) -> User:
        user = await self.registry.find_user(username.strip().lower())
        if user is None:
            raise NotFoundError(f"no user named {username!r}")
        return user

    async def admin_exists(self) -> bool:
        """True when an active account can manage accounts (setup is over)."""
        return await self.registry.holder_exists(ADMIN_USERS.name)

    def is_unlocked(self, user_id: str) -> bool:
        return user_id in self._open

    def handle(self, user: User) -> UnlockedUser | None:
        """A handle on an already unlocked member (no password needed: the key is in memory)."""
        owner = self._open.get(user.id)
        if owner is None or owner.db.closed:
            return None
        return UnlockedUser(user=user, _owner=owner)

    # -- creation ----------------------------------------------------------------

    async def create(
        self, username: str, password: str, role: str, display_name: str | None = None
    ) -> CreatedUser:
        name = check_username(username)
        check_password(password)
        role_row = await self.registry.get_role(role)
        if role_row is None:
            raise InvalidInputError(f"no role named {role!r}")
        if await self.registry.find_user(name) is not None:
            raise ConflictError(f"a user named {name!r} already exists")
        encrypted = role_row.attributes.encrypted
        stamp = now_iso()
        user = User(
            id=secrets.token_hex(8),
            username=name,
            display_name=(display_name or name).strip() or name,
            role=role,
            encrypted=encrypted,
            active=True,
            locale="",  # none of their own: the household's (`effective_locale`)
            created_at=stamp,
            updated_at=stamp,
        )
        path = self.layout.user_db(user.id)
        recovery: str | None = None
        try:
            if encrypted:
                dek = keys.new_dek()
                recovery = keys.new_recovery_code()
                wraps = await self.kdf_pool.run(self._wrap_all, dek, password, recovery, user.id)
                await _init_owner(
                    await open_encrypted(path, f"owner-{user.id}", dek), self.owner_plan
                )
                await self.registry.insert_user(user, None, wraps)
            else:
                hashed = await self.kdf_pool.run(keys.hash_password, password, self.kdf)
                await _init_owner(await open_plain(path, f"owner-{user.id}"), self.owner_plan)
                await self.registry.insert_user(user, hashed, {})
        except BaseException:
            await asyncio.to_thread(_remove_db_files, path)
            raise
        return CreatedUser(user=user, recovery_code=recovery)

    def _wrap_all(self, dek: bytes, password: str, code: str, user_id: str) -> dict[str, str]:
        return {
            "password": keys.wrap_with_password(dek, password, user_id, self.kdf).to_json(),
            "recovery": keys.wrap_with_recovery_code(dek, code, user_id).to_json(),
        }

    # -- credentials -------------------------------------------------------------

    async def verify(self, username: str, password: str) -> tuple[User, bytes | None]:
        """Check a password; return the user and, for encrypted accounts, the DEK.

        An unknown user costs the same Argon2 work as a wrong password, so response
        time does not tell which usernames exist.
        """
        user = await self.registry.find_user(username.strip().lower())
        if user is None:
            # The time and the pool slot of a real check, not its 256 MiB (kdf_pool.py).
            await self.kdf_pool.imitate(self.checks, functools.partial(keys.burn_time, self.kdf))
            raise AuthenticationError("wrong username or password")
        sec = await self.registry.secrets(user.id)
        pool, checks = self.kdf_pool, self.checks
        try:
            if user.encrypted:
                wrapped = keys.WrappedKey.from_json(sec.wraps["password"])
                dek = await pool.run(
                    keys.unwrap, wrapped, password, user.id, "password", sample=checks
                )
                return user, dek
            assert sec.password_hash is not None
            await pool.run(keys.verify_password, sec.password_hash, password, sample=checks)
        except AuthenticationError:
            raise AuthenticationError("wrong username or password") from None
        return user, None

    async def unlock(self, username: str, password: str) -> UnlockedUser:
        user, dek = await self.verify(username, password)
        if not user.active:
            raise AccountInactiveError(f"the account {user.username!r} is deactivated")
        return await self._attach(user, dek)

    async def unlock_unencrypted(self, user: User) -> UnlockedUser:
        """Open an unencrypted member's data without a password (boot, background work)."""
        if user.encrypted:
            raise InvalidInputError(f"{user.username} is encrypted: it needs a password")
        if not user.active:
            raise AccountInactiveError(f"the account {user.username!r} is deactivated")
        return await self._attach(user, None)

    async def unlock_kept(self, user: User, dek: bytes) -> UnlockedUser:
        """Open an encrypted member's data with the key the server keeps for them (their
        "work while I'm signed out" opt-in, `core/kept_keys.py`)."""
        if not user.encrypted:
            raise InvalidInputError(f"{user.username} is not encrypted")
        if not user.active:
            raise AccountInactiveError(f"the account {user.username!r} is deactivated")
        return await self._attach(user, dek)

    async def _attach(self, user: User, dek: bytes | None) -> UnlockedUser:
        async with self._lock_for(user.id):
            owner = self._open.get(user.id)
            if owner is None or owner.db.closed:
                path = self.layout.user_db(user.id)
                name = f"owner-{user.id}"
                timeout = self.busy_timeout_ms
                db = await (
                    open_plain(path, name, timeout, create=False)
                    if dek is None
                    else open_encrypted(path, name, dek, timeout, create=False)
                )
                try:
                    await db.call(lambda c: migrate_features(c, self.owner_plan))
                except BaseException:
                    await db.aclose()
                    raise
                owner = _OpenOwner(db=db, dek=None if dek is None else bytearray(dek))
                self._open[user.id] = owner
            return UnlockedUser(user=user, _owner=owner)

    async def lock(self, user_id: str) -> None:
        """Close the member's data and forget their key; every handle stops working."""
        async with self._lock_for(user_id):
            owner = self._open.pop(user_id, None)
            if owner is not None:
                owner.forget()
                await owner.db.aclose()

    @contextlib.asynccontextmanager
    async def held(self, user_id: str) -> AsyncIterator[tuple[Database, bytes | None] | None]:
        """Keep the member's unlock state still for the block (backups).

        Yields their open database and its raw key (None if unencrypted), or None when
        they are locked; either way nobody unlocks or locks them until the block ends,
        so a locked member's file is quiescent and may be copied as bytes.
        """
        async with self._lock_for(user_id):
            owner = self._open.get(user_id)
            if owner is None or owner.db.closed:
                yield None
            else:
                yield owner.db, (None if owner.dek is None else bytes(owner.dek))

    async def lock_all(self) -> None:
        for user_id in list(self._open):
            await self.lock(user_id)

    async def change_password(self, username: str, old: str, new: str) -> None:
        """Re-wrap the key (encrypted) or re-hash (unencrypted); the data file is untouched."""
        check_password(new)
        user, dek = await self.verify(username, old)
        await self._store_password(user, dek, new)

    async def set_password(self, username: str, new: str) -> None:
        """An administrator's reset. Only possible for unencrypted accounts: nobody but
        the member (or their recovery code) can open an encrypted one."""
        check_password(new)
        user = await self.get(username)
        if user.encrypted:
            raise InvalidInputError(
                f"{user.username}'s data is encrypted with their password: it can only be "
                "changed with the current password or the recovery code"
            )
        await self._store_password(user, None, new)

    async def recover(self, username: str, code: str, new: str) -> str:
        """Unlock the key with the recovery code, set a new password, issue a new code."""
        check_password(new)
        user = await self.get(username)
        if not user.encrypted:
            raise InvalidInputError(f"{user.username} has no recovery code (not encrypted)")
        sec = await self.registry.secrets(user.id)
        dek = await self.kdf_pool.run(
            keys.unwrap, keys.WrappedKey.from_json(sec.wraps["recovery"]), code, user.id, "recovery"
        )
        fresh = keys.new_recovery_code()
        wraps = await self.kdf_pool.run(self._wrap_all, dek, new, fresh, user.id)
        await self.registry.set_wraps(user.id, wraps)
        return fresh

    async def _store_password(self, user: User, dek: bytes | None, new: str) -> None:
        if user.encrypted:
            assert dek is not None
            wrapped = await self.kdf_pool.run(keys.wrap_with_password, dek, new, user.id, self.kdf)
            await self.registry.set_wraps(user.id, {"password": wrapped.to_json()})
        else:
            hashed = await self.kdf_pool.run(keys.hash_password, new, self.kdf)
            await self.registry.set_password_hash(user.id, hashed)

    # -- revocation --------------------------------------------------------------

    async def refuse_last_admin(self, user: User, action: str) -> None:
        """ConflictError when `user` is the last active account that can manage accounts."""
        role = await self.registry.get_role(user.role)
        if role is None or not can(role, ADMIN_USERS) or not user.active:
            return
        if not await self._other_admin_exists(user.id):
            raise ConflictError(
                f"{user.username} is the last active administrator: cannot {action}"
            )

    async def _other_admin_exists(self, user_id: str) -> bool:
        for other in await self.registry.list_users():
            if other.id == user_id or not other.active:
                continue
            role = await self.registry.get_role(other.role)
            if role is not None and can(role, ADMIN_USERS):
                return True
        return False

    async def deactivate(self, username: str) -> User:
        """Synchronous revocation: when this returns, nothing of theirs is open."""
        user = await self.get(username)
        await self.refuse_last_admin(user, "deactivate them")
        await self.registry.set_active(user.id, False)
        await self.lock(user.id)
        return await self.get(username)

    async def activate(self, username: str) -> User:
        user = await self.get(username)
        await self.registry.set_active(user.id, True)
        return await self.get(username)

    async def delete(self, username: str) -> list[str]:
        """Remove the account, its owner database, its home folder and the features' places
        of its own (`skald_private_places`). Not undoable.
        Returns what of the home could not be removed (`<id>/<path>: reason`; files
        root made in the sandbox), empty when all is gone."""
        user = await self.get(username)
        await self.refuse_last_admin(user, "delete them")
        await self.lock(user.id)
        await self.registry.delete_user(user.id)
        await asyncio.to_thread(_remove_db_files, self.layout.user_db(user.id))
        left = await asyncio.to_thread(remove_home, self.layout.homes_dir, user.id)
        for place in await asyncio.to_thread(self.private_places, user.id):
            left += await asyncio.to_thread(remove_place, place)
        self._locks.pop(user.id, None)
        return left


async def _init_owner(db: Database, plan: SchemaPlan) -> None:
    try:
        await db.call(lambda c: migrate_features(c, plan))
    finally:
        await db.aclose()


def _remove_db_files(base: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            base.with_name(base.name + suffix).unlink()
