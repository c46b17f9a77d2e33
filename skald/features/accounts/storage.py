"""Storage usage: a member's own figure, and every member's for administrators.

Counts only, never names or content: the administrator sees how much each member
stores, not what. The figures are the storage accountant's (`skald/quota.py`): cached,
walked in a thread the first time a member is asked about.
"""

from __future__ import annotations

import msgspec
from litestar import get
from litestar.di import NamedDependency

from skald.api.deps import AuthRequest, requires
from skald.core.accounts import AccountService
from skald.core.users import ADMIN_USERS
from skald.plugins.facade import Server  # Litestar reads the annotations


class StorageUsage(msgspec.Struct, frozen=True, kw_only=True):
    used: int  # bytes: home (uploads included) and database
    quota: int  # bytes; 0: no limit
    disk_low: bool  # the disk is nearly full: new writes are refused for everyone


class MemberUsage(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    username: str
    used: int
    quota: int


@get("/api/storage")
async def my_storage(request: AuthRequest, server: NamedDependency[Server]) -> StorageUsage:
    """The signed-in member's storage: what they use and their quota."""
    budget = await server.budget(request.user.user.id)
    return StorageUsage(used=budget.used, quota=budget.quota, disk_low=server.storage.disk_low)


@get("/api/storage/members", guards=[requires(ADMIN_USERS)])
async def members_storage(server: NamedDependency[Server]) -> list[MemberUsage]:
    """Every member's usage and quota (bytes), for the Users page."""
    out = []
    for user in await server.state(AccountService).registry.list_users():
        budget = await server.budget(user.id)
        out.append(
            MemberUsage(
                user_id=user.id, username=user.username, used=budget.used, quota=budget.quota
            )
        )
    return out


ROUTES = [my_storage, members_storage]
