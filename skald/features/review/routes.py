"""What the review says to the people it concerns, and the admin's "review again from
the beginning".

Rule: a supervised member sees who their conversations are reviewed for and every read
of them (window and time), as plain lines; a supervisor sees whom they receive reviews
of, and whether an encrypted adult has opted in; admins see every audit line. Nobody
sees content here.
"""

from __future__ import annotations

import msgspec
from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath

from skald.api.deps import requires
from skald.api.openapi import errors
from skald.core.users import ADMIN_USERS
from skald.features.review.store import ReviewStore
from skald.plugins.facade import Member, Server
from skald.store.people import supervision_of


class Person(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    # For a subject: whether the review can reach them (False: an encrypted adult who
    # has not chosen to let the assistant work while signed out).
    reviewed: bool = True


class AuditOut(msgspec.Struct, frozen=True, kw_only=True):
    subject_id: str
    subject_name: str
    reader_name: str
    window_start: str | None
    window_end: str
    messages: int
    at: str


class Lines(msgspec.Struct, frozen=True, kw_only=True):
    reviewed_for: list[Person]  # whom the caller's conversations are reviewed for
    reviewed: bool  # whether the review can reach the caller's conversations
    receives: list[Person]  # whose reviews the caller receives
    audit: list[AuditOut]  # reads of the caller's messages (admins: every read)


async def _name(server: Server, user_id: str) -> str:
    try:
        user, _ = await server.fetch(user_id)
    except Exception:
        return "?"
    return user.display_name


def _reachable(server: Server, encrypted: bool, user_id: str) -> bool:
    return not encrypted or server.works_signed_out(user_id)


@get("/api/review/lines")
async def lines(server: NamedDependency[Server], member: NamedDependency[Member]) -> Lines:
    store = ReviewStore(server.db)
    links = await supervision_of(server.db, member.id)
    mine = [Person(id=n.user_id, name=n.name) for n in links.supervisors]
    receives = []
    for n in links.supervising:
        user, _ = await server.fetch(n.user_id)
        receives.append(
            Person(
                id=n.user_id, name=n.name, reviewed=_reachable(server, user.encrypted, n.user_id)
            )
        )
    audit_rows = await store.audit_lines(None if member.can(ADMIN_USERS) else member.id)
    audit = [
        AuditOut(
            subject_id=a.subject_id,
            subject_name=await _name(server, a.subject_id),
            reader_name=await _name(server, a.reader_id),
            window_start=a.window_start,
            window_end=a.window_end,
            messages=a.messages,
            at=a.at,
        )
        for a in audit_rows
    ]
    return Lines(
        reviewed_for=mine,
        reviewed=bool(mine) and _reachable(server, member.user.encrypted, member.id),
        receives=receives,
        audit=audit,
    )


@post(
    "/api/review/{subject_id:str}/restart",
    guards=[requires(ADMIN_USERS)],
    status_code=204,
    responses=errors(404),
)
async def restart(subject_id: FromPath[str], server: NamedDependency[Server]) -> None:
    """Review this member again from the beginning at the next pass."""
    await server.fetch(subject_id)
    await ReviewStore(server.db).clear(subject_id)


ROUTES = [lines, restart]
