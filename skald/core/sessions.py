"""Login sessions: opaque random tokens, stored hashed, with idle and absolute expiry.

The cookie carries the token; the registry only its SHA-256, so a copied database logs
nobody in. The CSRF token is derived from the session token (an HMAC), so it needs no
storage and dies with the session.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec

from skald.config import AuthConfig
from skald.core.users import UserManager
from skald.errors import AccountInactiveError
from skald.log import get_logger
from skald.permissions import Capability, can
from skald.store.rows import Role, User
from skald.store.sessions import SessionRow, SessionStore

# Writing last_seen on every request would turn every read into a write.
TOUCH_INTERVAL_S = 60.0
SESSION_PURGE_INTERVAL_S = 600.0

log = get_logger("skald.runtime")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_for(token: str) -> str:
    return hmac.new(token.encode(), b"skald csrf v1", hashlib.sha256).hexdigest()[:40]


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who is calling: the user, their role, and the session they came with.

    `alive`: for credentials that can be withdrawn while a response is still streaming
    (an API token revoked or expired), whether they still hold; a stream asks it
    between events and ends when it answers False (`turn_stream.while_alive`). None:
    nothing to ask (a web session)."""

    user: User
    role: Role
    token_hash: str
    csrf_token: str
    alive: Callable[[], Awaitable[bool]] | None = None

    def can(self, capability: Capability) -> bool:
        return can(self.role, capability)


@dataclass(eq=False)
class SessionManager:
    store: SessionStore
    users: UserManager
    config: AuthConfig
    clock: Callable[[], float] = time.time

    @property
    def idle_s(self) -> float:
        return self.config.session_idle_hours * 3600

    async def create(self, user: User, user_agent: str = "", client: str = "") -> str:
        token = secrets.token_urlsafe(32)
        now = self.clock()
        stored = await self.store.insert(
            SessionRow(
                token_hash=hash_token(token),
                user_id=user.id,
                created_at=now,
                last_seen_at=now,
                expires_at=now + self.config.session_max_days * 86400,
                user_agent=user_agent[:200],
                client=client[:64],
            )
        )
        if not stored:
            # Deactivated (or deleted) while the password was being checked.
            raise AccountInactiveError(f"the account {user.username!r} is deactivated")
        return token

    async def resolve(self, token: str) -> Principal | None:
        """The principal behind a token, or None when it is unknown, expired or unusable."""
        token_hash = hash_token(token)
        found = await self.store.get_with_member(token_hash)
        if found is None:
            return None
        row, user, role = found
        now = self.clock()
        if row.expires_at <= now or row.last_seen_at <= now - self.idle_s:
            await self.store.delete(token_hash)
            return None
        # An encrypted member's session is only good while their key is in memory.
        if (
            user is None
            or not user.active
            or (user.encrypted and not self.users.is_unlocked(user.id))
        ):
            await self.store.delete(token_hash)
            return None
        if role is None:
            return None
        if now - row.last_seen_at > TOUCH_INTERVAL_S:
            await self.store.touch(token_hash, now)
        return Principal(user=user, role=role, token_hash=token_hash, csrf_token=csrf_for(token))

    async def revoke(self, token_hash: str) -> None:
        await self.store.delete(token_hash)

    async def revoke_user(self, user_id: str, keep: str | None = None) -> list[str]:
        return await self.store.delete_for_user(user_id, keep)

    async def purge_expired(self) -> int:
        return await self.store.purge(self.clock(), self.idle_s)

    async def purge_forever(self) -> None:
        """The accounts feature's service: expired sign-ins deleted every ten minutes."""
        while True:
            removed = await self.purge_expired()
            if removed:
                log.info("expired sessions removed", count=removed)
            await asyncio.sleep(SESSION_PURGE_INTERVAL_S)
