"""The wire of the local operations channel (skald/ops/channel.py has the rest): where
it lives, the header that carries its token, and the one way to compare that token.

Here, below both the web app (which gates `/api/ops*`) and the operator commands (which
call it), so neither imports the other.
"""

from __future__ import annotations

import secrets

OPS_HEADER = "X-Skald-Ops-Token"
OPS_PREFIX = "/api/ops"


def token_matches(expected: str | None, sent: str | None) -> bool:
    """Constant-time comparison; bytes, because compare_digest refuses non-ASCII text."""
    if not expected or sent is None:
        return False
    return secrets.compare_digest(
        expected.encode("utf-8"), sent.encode("utf-8", errors="surrogateescape")
    )
