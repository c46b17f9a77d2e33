"""Login throttling per account and per client address, with doubling back-off.

Kept in memory: a restart forgives, which is acceptable next to Argon2's own cost per
guess, and it means no attacker can fill the disk with failure rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from skald.config import AuthConfig
from skald.errors import SkaldError

MAX_TRACKED = 10_000


class ThrottledError(SkaldError):
    code = "throttled"

    def __init__(self, retry_after: float) -> None:
        self.retry_after = max(1, int(retry_after + 0.999))
        super().__init__(
            "too many failed sign-in attempts; try again in "
            + (f"{self.retry_after} seconds" if self.retry_after != 1 else "1 second")
        )


@dataclass
class _Record:
    failures: int = 0
    blocked_until: float = 0.0


class LoginThrottle:
    def __init__(self, config: AuthConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._records: dict[str, _Record] = {}

    def _keys(self, username: str, client: str) -> list[str]:
        return [f"user:{username.strip().lower()}", f"client:{client}"]

    def check(self, username: str, client: str) -> None:
        """Raise ThrottledError while either the account or the address is backing off."""
        now = self.clock()
        waits = [
            rec.blocked_until - now
            for key in self._keys(username, client)
            if (rec := self._records.get(key)) is not None and rec.blocked_until > now
        ]
        if waits:
            raise ThrottledError(max(waits))

    def failure(self, username: str, client: str) -> None:
        now = self.clock()
        if len(self._records) > MAX_TRACKED:
            self._forget_idle(now)
        for key in self._keys(username, client):
            rec = self._records.setdefault(key, _Record())
            rec.failures += 1
            over = rec.failures - self.config.login_free_attempts
            if over >= 0:
                delay = min(
                    self.config.login_backoff_base_s * 2**over, self.config.login_backoff_max_s
                )
                rec.blocked_until = now + delay

    def success(self, username: str, client: str) -> None:
        # Only the account is forgiven: one right password must not clear an address
        # that is guessing at other accounts.
        self._records.pop(self._keys(username, client)[0], None)

    def _forget_idle(self, now: float) -> None:
        for key in [
            k
            for k, r in self._records.items()
            if r.blocked_until < now - self.config.login_backoff_max_s
        ]:
            del self._records[key]
