"""A member, their role and the plugins' switches as they are now: the first read of
every turn (the role decides the turn's tools and prompt; a plugin switched off or
taken away is gone from it), kept between turns while none of it can have changed
(`skald/store/kept.py`: a write through this process to any table in `READS` reads it
again, and another process's after `KEPT_S` seconds).

Trap: a read added to `read` that touches another table must add it to `READS`
(`tests/test_member_now.py` writes to each one and expects the next turn to see it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apsw

from skald.store.database import Database
from skald.store.kept import KeptReads
from skald.store.plugins import Snapshot, snapshot_in
from skald.store.registry import role_in, user_in
from skald.store.rows import Role, User

# The tables `read` touches: `user_in`, `role_in`, `snapshot_in`.
READS = frozenset(
    {"users", "roles", "role_capabilities", "role_attributes", "plugins", "plugin_grants"}
)

Now = tuple[User | None, Role | None, Snapshot]


class MemberNow:
    """Built once by the runtime over the registry; found by type (`server.state`)."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.monotonic) -> None:
        # A member or role not found is never kept: the caller refuses the turn anyway.
        self.kept: KeptReads[str, Now] = KeptReads(
            db, READS, clock=clock, keep=lambda now: now[1] is not None
        )

    async def read(self, user_id: str) -> Now:
        """The member's row, their role and the switches, in one trip when not kept."""

        def q(c: apsw.Connection) -> Now:
            user = user_in(c, user_id)
            return user, role_in(c, user.role) if user else None, snapshot_in(c)

        return await self.kept.get(user_id, q)
