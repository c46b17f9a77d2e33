"""Sign-in throttling: budgets per account, per client address and per trusted device.

Rule: an attempt is *reserved* before any password work, in one step on the event loop
(no await between the check and the reservation), and settled after it: a failure
counts, a success forgives the account (never the address: one right password must not
clear an address that is guessing at other accounts), anything else gives the
reservation back. So N parallel requests cannot all pass one check: with five free
attempts, the sixth concurrent one is refused at once. Past the free attempts, one
attempt at a time, each failure doubling the back-off.

A browser that signed in before carries a device cookie (`skald.core.devices`). Its
attempts count only against that device's own budget, not the account's or the
address's (OWASP's device-cookie scheme): a guesser behind the household's NAT can lock
out the account for strangers, not for the household's own browsers.

Kept in memory: a restart forgives, which is acceptable next to Argon2's own cost per
guess, and it means no attacker can fill the disk with failure rows.

Trap: the usernames are normalised as the account lookup does (strip, lower case):
`Ada` and `ada` are one account and share one counter.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from skald.config import AuthConfig
from skald.errors import AuthenticationError, RetryLaterError

MAX_TRACKED = 10_000


class ThrottledError(RetryLaterError):
    code = "throttled"

    def __init__(self, retry_after: float) -> None:
        super().__init__("too many failed sign-in attempts", retry_after)


@dataclass
class _Record:
    failures: int = 0
    pending: int = 0
    blocked_until: float = 0.0


@dataclass
class Attempt:
    """One reserved sign-in attempt; settled once (failed, succeeded or released)."""

    keys: tuple[str, ...]
    settled: bool = field(default=False)


def account_key(username: str) -> str:
    return f"user:{username.strip().lower()}"


class LoginThrottle:
    def __init__(self, config: AuthConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._records: dict[str, _Record] = {}

    def _keys(self, username: str, client: str, device: str | None) -> tuple[str, ...]:
        if device is not None:
            return (f"device:{device}",)
        return (account_key(username), f"client:{client}")

    def _delay(self, over: int) -> float:
        return float(
            min(self.config.login_backoff_base_s * 2**over, self.config.login_backoff_max_s)
        )

    def reserve(self, username: str, client: str, device: str | None = None) -> Attempt:
        """Take one attempt from every budget this sign-in counts against, or raise
        ThrottledError (taking nothing) when one of them has none left."""
        now = self.clock()
        keys = self._keys(username, client, device)
        free = self.config.login_free_attempts
        waits = []
        for key in keys:
            rec = self._records.get(key)
            if rec is None:
                continue
            if rec.blocked_until > now:
                waits.append(rec.blocked_until - now)
            elif rec.pending > 0 and rec.failures + rec.pending >= free:
                # The budget is spoken for by attempts still being checked.
                waits.append(self._delay(max(0, rec.failures + rec.pending - free)))
        if waits:
            raise ThrottledError(max(waits))
        if len(self._records) > MAX_TRACKED:
            self._forget_idle(now)
        for key in keys:
            self._records.setdefault(key, _Record()).pending += 1
        return Attempt(keys=keys)

    def _settle(self, attempt: Attempt) -> list[tuple[str, _Record]]:
        if attempt.settled:
            return []
        attempt.settled = True
        out = []
        for key in attempt.keys:
            rec = self._records.get(key)
            if rec is not None:
                rec.pending = max(0, rec.pending - 1)
                out.append((key, rec))
        return out

    def failure(self, attempt: Attempt) -> None:
        now = self.clock()
        for _, rec in self._settle(attempt):
            rec.failures += 1
            over = rec.failures - self.config.login_free_attempts
            if over >= 0:
                rec.blocked_until = now + self._delay(over)

    def success(self, attempt: Attempt) -> None:
        for key, rec in self._settle(attempt):
            if key.startswith("client:"):
                continue  # the address keeps its record (see the module docstring)
            rec.failures = 0
            rec.blocked_until = 0.0
            if rec.pending == 0:
                del self._records[key]

    def release(self, attempt: Attempt) -> None:
        """No verdict on the password (busy, server error): the attempt is given back."""
        for key, rec in self._settle(attempt):
            if rec.pending == 0 and rec.failures == 0:
                del self._records[key]

    @contextlib.contextmanager
    def attempt(self, username: str, client: str, device: str | None = None) -> Iterator[Attempt]:
        """Reserve, run the block, settle: AuthenticationError is a failure, any other
        exception gives the attempt back, a normal exit is a success (unless the block
        settled it itself)."""
        reserved = self.reserve(username, client, device)
        try:
            yield reserved
        except AuthenticationError:
            self.failure(reserved)
            raise
        except BaseException:
            self.release(reserved)
            raise
        self.success(reserved)

    def _forget_idle(self, now: float) -> None:
        for key in [
            k
            for k, r in self._records.items()
            if r.pending == 0 and r.blocked_until < now - self.config.login_backoff_max_s
        ]:
            del self._records[key]
