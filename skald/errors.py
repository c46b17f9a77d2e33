"""Errors a user or operator may see.

Every error that can reach a person derives from `SkaldError` and carries a message
written for them; the CLI prints it as one line, the API turns it into a 4xx body.
"""

import math


class SkaldError(Exception):
    """Base of every expected, user-facing failure."""

    code = "error"


class ConfigError(SkaldError):
    """The configuration file or environment is invalid."""

    code = "bad_config"


class StorageError(SkaldError):
    """A database could not be opened, read or migrated."""

    code = "storage_error"


class DatabaseClosedError(StorageError):
    """The database behind a handle was closed (locked, deactivated or shut down)."""

    code = "database_closed"


class NotFoundError(SkaldError):
    code = "not_found"


class ConflictError(SkaldError):
    code = "conflict"


class InvalidInputError(SkaldError):
    code = "invalid_input"


class AuthenticationError(SkaldError):
    """Wrong password or recovery code; deliberately says nothing more."""

    code = "bad_credentials"


class AccountInactiveError(SkaldError):
    code = "account_inactive"


class QuotaExceededError(SkaldError):
    """A write would take a member past their storage quota (HTTP 413)."""

    code = "quota_exceeded"


class LimitReachedError(SkaldError):
    """A spending cap is reached: the message says which and when it resets (HTTP 429)."""

    code = "limit_reached"


class RetryLaterError(SkaldError):
    """Refused for now, not for good: `retry_after` is whole seconds (the API's
    `Retry-After`), and the message ends with when to try again."""

    def __init__(self, why: str, retry_after: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        wait = f"{self.retry_after} seconds" if self.retry_after != 1 else "1 second"
        super().__init__(f"{why}; try again in {wait}")


class DiskFullError(SkaldError):
    """The data directory's disk is down to its reserve: new writes wait (HTTP 507)."""

    code = "disk_full"
