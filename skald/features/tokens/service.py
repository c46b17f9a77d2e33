"""Creating, listing, revoking and checking API tokens (`TokenService`, a server state).

Rule: a token is `skald_<id>_<secret>`; the id finds the row, the keyed hash of the
whole token must match (compared in constant time). Every request reads the row again,
so revoking (deleting the row) is synchronous: the next request is 401. Open streams
ask `alive` between events and end when it answers False.

Trap: the secret is returned once, by `create`, and never again; listing answers only
names, scopes and dates. Error texts never quote a presented token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from skald.errors import InvalidInputError, NotFoundError
from skald.features.tokens.store import TokenRow, TokenStore
from skald.log import get_logger

log = get_logger("skald.tokens")

SCOPES = ("chat", "files:read", "files:write", "openai")
PREFIX = "skald_"
_SHAPE = re.compile(r"^skald_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
TOUCH_INTERVAL_S = 60.0
MAX_TOKENS_PER_MEMBER = 50
NAME_MAX = 60


class TokensConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[tokens]` of config.toml."""

    # Requests per minute each token may make (a bucket of this size, refilled evenly).
    per_minute: int = msgspec.field(default=120)
    # Turns a member's tokens run at once through /v1; more wait their turn, so one
    # member's automations cannot take the server's cores from everyone else.
    turns_per_member: int = msgspec.field(default=2)

    def __post_init__(self) -> None:
        if not 1 <= self.per_minute <= 100_000:
            raise msgspec.ValidationError("per_minute: expected an integer from 1 to 100000")
        if not 1 <= self.turns_per_member <= 64:
            raise msgspec.ValidationError("turns_per_member: expected an integer from 1 to 64")


class TokenInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a member sees of a token: never the secret."""

    id: str
    name: str
    scopes: list[str]
    created_at: float
    last_used_at: float | None
    expires_at: float | None


def info(row: TokenRow) -> TokenInfo:
    # The fields `TokenInfo` names, read off the row by name (its `hash` is not one).
    return msgspec.convert(row, TokenInfo, from_attributes=True)


def hash_key(instance_key: Path) -> bytes:
    """The HMAC key of token hashes: derived from the instance key, for this use only."""
    return hmac.new(instance_key.read_bytes(), b"skald api tokens v1", hashlib.sha256).digest()


def split(token: str) -> str | None:
    """The token's id, or None when it is not shaped like one of ours."""
    found = _SHAPE.match(token)
    return found.group(1) if found else None


@dataclass
class _Bucket:
    level: float
    at: float


class RateLimiter:
    """A token bucket per API token, in memory (a restart forgives)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> float:
        """0 when the request may go, else the seconds until it may."""
        now = self.clock()
        bucket = self._buckets.setdefault(key, _Bucket(float(self.per_minute), now))
        rate = self.per_minute / 60.0
        bucket.level = min(float(self.per_minute), bucket.level + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.level >= 1.0:
            bucket.level -= 1.0
            return 0.0
        return (1.0 - bucket.level) / rate

    def forget(self, key: str) -> None:
        self._buckets.pop(key, None)


class TokenService:
    def __init__(
        self,
        store: TokenStore,
        key: bytes,
        config: TokensConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._key = key
        self.clock = clock
        self.limits = RateLimiter(config.per_minute)
        self._turns_per_member = config.turns_per_member
        self._slots: dict[str, asyncio.Semaphore] = {}

    def _hash(self, token: str) -> str:
        return hmac.new(self._key, token.encode(), hashlib.sha256).hexdigest()

    async def create(
        self, user_id: str, name: str, scopes: list[str], expires_at: float | None = None
    ) -> tuple[str, TokenInfo]:
        """A new token: (the secret, shown once; what the list shows)."""
        name = " ".join(name.split())
        if not 1 <= len(name) <= NAME_MAX:
            raise InvalidInputError(f"a token's name is 1 to {NAME_MAX} characters")
        unknown = sorted(set(scopes) - set(SCOPES))
        if unknown or not scopes:
            raise InvalidInputError(
                f"scopes are one or more of {', '.join(SCOPES)}"
                + (f" (not {', '.join(unknown)})" if unknown else "")
            )
        now = self.clock()
        if expires_at is not None and expires_at <= now:
            raise InvalidInputError("the expiry must be in the future")
        full = InvalidInputError(
            f"you have {MAX_TOKENS_PER_MEMBER} tokens; revoke one you no longer use"
        )
        if len(await self.store.for_user(user_id)) >= MAX_TOKENS_PER_MEMBER:
            raise full
        token_id = secrets.token_hex(6)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        row = TokenRow(
            id=token_id,
            user_id=user_id,
            name=name,
            scopes=[s for s in SCOPES if s in scopes],
            hash=await asyncio.to_thread(self._hash, token),
            created_at=now,
            last_used_at=None,
            expires_at=expires_at,
        )
        if not await self.store.insert(row, fewer_than=MAX_TOKENS_PER_MEMBER):
            # A parallel request took the last place, or the member is gone.
            if len(await self.store.for_user(user_id)) >= MAX_TOKENS_PER_MEMBER:
                raise full
            raise NotFoundError("no such active member")
        log.info("api token created", user_id=user_id, token_id=token_id)
        return token, info(row)

    async def list(self, user_id: str) -> list[TokenInfo]:
        return [info(r) for r in await self.store.for_user(user_id)]

    async def revoke(self, user_id: str, token_id: str) -> None:
        if not await self.store.delete(user_id, token_id):
            raise NotFoundError("no such token of yours")
        self.limits.forget(token_id)
        log.info("api token revoked", user_id=user_id, token_id=token_id)

    async def check(self, token: str) -> TokenRow | None:
        """The live row behind a presented token, or None (unknown, wrong, expired)."""
        token_id = split(token)
        if token_id is None:
            return None
        row = await self.store.get(token_id)
        if row is None:
            return None
        # HMAC of ~60 bytes: microseconds, no thread hop needed on this path.
        if not hmac.compare_digest(self._hash(token).encode(), row.hash.encode()):
            return None
        now = self.clock()
        if row.expires_at is not None and row.expires_at <= now:
            return None
        if row.last_used_at is None or now - row.last_used_at > TOUCH_INTERVAL_S:
            await self.store.touch(row.id, now)
        return row

    def turn_slot(self, user_id: str) -> asyncio.Semaphore:
        """The member's share of concurrent /v1 turns (`turns_per_member`)."""
        slot = self._slots.get(user_id)
        if slot is None:
            slot = self._slots[user_id] = asyncio.Semaphore(self._turns_per_member)
        return slot

    async def alive(self, token_id: str) -> bool:
        """Whether the token still exists and has not expired (open streams ask)."""
        row = await self.store.get(token_id)
        return row is not None and (row.expires_at is None or row.expires_at > self.clock())
