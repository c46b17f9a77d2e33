"""Who is in the household, as the runner and the reports need it: the active members
in a stable order, which of them are admins, and whom each supervises now.

Rule: everything is read fresh from the registry each time (a role or a supervision
link changed a minute ago counts now); the supervision links are the people feature's
(`skald.store.people`), never a copy.
"""

from __future__ import annotations

import apsw
import msgspec

from skald.features.system_agents.reports import Reader
from skald.store.database import Database, fetch_all
from skald.store.people import links

__all__ = ["Person", "people", "readers"]

# Whoever holds this capability is an admin for the runner and for `admins` reports.
ADMIN_CAPABILITY = "admin.users"


class Person(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    username: str
    display_name: str
    encrypted: bool
    admin: bool


async def people(db: Database) -> list[Person]:
    """Active members by username (the order the runner serves them in)."""

    def q(c: apsw.Connection) -> list[Person]:
        rows = fetch_all(
            c,
            "SELECT u.id, u.username, u.display_name, u.encrypted, EXISTS(SELECT 1 FROM "
            "role_capabilities rc WHERE rc.role = u.role AND rc.capability = ?) "
            "FROM users u WHERE u.active = 1 ORDER BY u.username COLLATE NOCASE",
            (ADMIN_CAPABILITY,),
        )
        return [
            Person(
                id=r[0], username=r[1], display_name=r[2], encrypted=bool(r[3]), admin=bool(r[4])
            )
            for r in rows
        ]

    return await db.call(q)


async def readers(db: Database) -> list[Reader]:
    everyone = await people(db)
    supervises: dict[str, set[str]] = {}
    for link in await links(db):
        supervises.setdefault(link.supervisor_id, set()).add(link.supervised_id)
    return [
        Reader(user_id=p.id, admin=p.admin, supervises=frozenset(supervises.get(p.id, ())))
        for p in everyone
    ]


async def reader(db: Database, user_id: str) -> Reader:
    for r in await readers(db):
        if r.user_id == user_id:
            return r
    return Reader(user_id=user_id, admin=False, supervises=frozenset())
