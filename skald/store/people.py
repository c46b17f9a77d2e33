"""The household directory: each member's directory profile (date of birth, sex, notes)
and the supervision links between members. Registry tables `people_profiles` and
`people_supervision`, created by the people feature's migrations
(`skald/features/people/schema.py`).

Kept below the features because more than one reads it: the people feature edits it
(People page, profile, the `USER_PROFILE` prompt block) and the conversation review reads
a subject's profile and supervisors. Everything here takes the registry `Database`
(`server.db`) and runs its SQL on the database's thread.

Rules: a date of birth is an ISO date (`YYYY-MM-DD`), real, not in the future and not
more than `OLDEST_YEARS` ago; sex and notes are capped (`SEX_MAX`, `NOTES_MAX`); the age
is computed from the date each time it is asked for, never stored. A supervision link is
directed (supervisor -> supervised), stored once however often it is made, never from a
member to themselves, and goes with either account (foreign keys, ON DELETE CASCADE).

Trap: `check_profile` is the one validation; the API and the migration from the old
free-form profile both use it, so a value the API refuses is never migrated in either.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Final

import apsw

from skald.errors import InvalidInputError, NotFoundError
from skald.store.database import Database, changed, fetch_all, fetch_one
from skald.store.kept import KeptReads
from skald.store.registry import user_in
from skald.store.rows import User

SEX_MAX: Final = 40
NOTES_MAX: Final = 2000
OLDEST_YEARS: Final = 130
SELF_LINK: Final = "a member cannot supervise themselves"
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Directory:
    """A member's directory profile as stored (`""` / None: not set)."""

    date_of_birth: date | None = None
    sex: str = ""
    notes: str = ""


@dataclass(frozen=True)
class MemberProfile:
    """What the review (and the prompt) knows about a member: the directory profile with
    the age computed for `today` (None: unknown; never guessed)."""

    user_id: str
    display_name: str
    locale: str
    date_of_birth: date | None
    age: int | None
    sex: str
    notes: str

    @property
    def directory(self) -> Directory:
        """The stored part, for `profile_block(..., directory=p.directory, today=...)`."""
        return Directory(self.date_of_birth, self.sex, self.notes)


@dataclass(frozen=True)
class Link:
    supervisor_id: str
    supervised_id: str
    created_at: str


def _now() -> str:
    # Microseconds: links made in the same second keep the order they were made in.
    return datetime.now(UTC).isoformat(timespec="microseconds")


def age_on(born: date, today: date) -> int:
    """Whole years from `born` to `today` (a 29 February birthday counts from 1 March in
    other years)."""
    return today.year - born.year - ((today.month, today.day) < (born.month, born.day))


def parse_date_of_birth(text: str, today: date) -> date:
    """An ISO date that is real, not after `today` and at most OLDEST_YEARS before it."""
    value = text.strip()
    if not _ISO_DATE.fullmatch(value):
        raise InvalidInputError(f"date of birth must be a date as YYYY-MM-DD, not {value[:20]!r}")
    try:
        born = date.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"date of birth {value} is not a real date") from None
    if born > today:
        raise InvalidInputError(f"date of birth {value} is in the future")
    if age_on(born, today) > OLDEST_YEARS:
        raise InvalidInputError(f"date of birth {value} is more than {OLDEST_YEARS} years ago")
    return born


def check_profile(date_of_birth: str | None, sex: str, notes: str, today: date) -> Directory:
    """The validated profile (`today`: the household's date), or InvalidInputError."""
    born = parse_date_of_birth(date_of_birth, today) if date_of_birth else None
    sex = " ".join(sex.split())
    if len(sex) > SEX_MAX:
        raise InvalidInputError(f"sex is at most {SEX_MAX} characters")
    notes = notes.strip()
    if len(notes) > NOTES_MAX:
        raise InvalidInputError(f"notes are at most {NOTES_MAX} characters")
    return Directory(born, sex, notes)


def _directory(row: tuple[object, ...] | None) -> Directory:
    if row is None:
        return Directory()
    born = date.fromisoformat(str(row[0])) if row[0] else None
    return Directory(born, str(row[1]), str(row[2]))


def read_directory(c: apsw.Connection, user_id: str) -> Directory:
    row = fetch_one(
        c, "SELECT date_of_birth, sex, notes FROM people_profiles WHERE user_id = ?", (user_id,)
    )
    return _directory(row)


def write_directory(c: apsw.Connection, user_id: str, profile: Directory) -> None:
    born = profile.date_of_birth.isoformat() if profile.date_of_birth else None
    c.execute(
        "INSERT INTO people_profiles(user_id, date_of_birth, sex, notes, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(user_id) DO UPDATE SET "
        "date_of_birth = excluded.date_of_birth, sex = excluded.sex, notes = excluded.notes, "
        "updated_at = excluded.updated_at",
        (user_id, born, profile.sex, profile.notes, _now()),
    )


def _require_user(c: apsw.Connection, user_id: str) -> tuple[object, ...]:
    row = fetch_one(c, "SELECT display_name, locale FROM users WHERE id = ?", (user_id,))
    if row is None:
        raise NotFoundError("no such member")
    return row


async def directory_of(db: Database, user_id: str) -> Directory:
    """The member's stored directory profile (NotFoundError: no such member)."""

    def read(c: apsw.Connection) -> Directory:
        _require_user(c, user_id)
        return read_directory(c, user_id)

    return await db.call(read)


async def set_directory(db: Database, user_id: str, profile: Directory) -> None:
    """Replace the member's directory profile (validated by `check_profile` first)."""

    def write(c: apsw.Connection) -> None:
        _require_user(c, user_id)
        write_directory(c, user_id, profile)

    await db.transaction(write)


async def profile_of(db: Database, user_id: str, today: date) -> MemberProfile:
    """The member's profile with the age on `today` (None when the date is unset)."""

    def read(c: apsw.Connection) -> MemberProfile:
        name, locale = _require_user(c, user_id)
        d = read_directory(c, user_id)
        age = age_on(d.date_of_birth, today) if d.date_of_birth else None
        return MemberProfile(user_id, str(name), str(locale), d.date_of_birth, age, d.sex, d.notes)

    return await db.call(read)


def _link_now(c: apsw.Connection, supervisor_id: str, supervised_id: str) -> Link:
    if supervisor_id == supervised_id:
        raise InvalidInputError(SELF_LINK)
    _require_user(c, supervisor_id)
    _require_user(c, supervised_id)
    c.execute(
        "INSERT INTO people_supervision(supervisor_id, supervised_id, created_at) "
        "VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (supervisor_id, supervised_id, _now()),
    )
    row = fetch_one(
        c,
        "SELECT created_at FROM people_supervision WHERE supervisor_id = ? AND supervised_id = ?",
        (supervisor_id, supervised_id),
    )
    assert row is not None  # inserted or already there, in this transaction
    return Link(supervisor_id, supervised_id, str(row[0]))


async def link(db: Database, supervisor_id: str, supervised_id: str) -> Link:
    """`supervisor_id` supervises `supervised_id` from now on; making it again keeps the
    first link. InvalidInputError for a self-link, NotFoundError for an unknown member."""
    return await db.transaction(lambda c: _link_now(c, supervisor_id, supervised_id))


async def unlink(db: Database, supervisor_id: str, supervised_id: str) -> bool:
    """Remove the link; False when there was none."""

    sql = "DELETE FROM people_supervision WHERE supervisor_id = ? AND supervised_id = ?"
    return await db.transaction(lambda c: changed(c, sql, (supervisor_id, supervised_id)))


async def links(db: Database) -> list[Link]:
    """Every supervision link in the household, oldest first."""
    rows = await db.fetch_all(
        "SELECT supervisor_id, supervised_id, created_at FROM people_supervision "
        "ORDER BY created_at, supervisor_id, supervised_id"
    )
    return [Link(str(a), str(b), str(t)) for a, b, t in rows]


@dataclass(frozen=True)
class Named:
    """A member at the other end of a supervision link, with the name to show."""

    user_id: str
    username: str
    name: str  # the display name, else the username


@dataclass(frozen=True)
class Supervision:
    """Both directions of a member's links, oldest first."""

    supervisors: list[Named]  # who supervises the member
    supervising: list[Named]  # whom the member supervises


# direction -> (the other end, the member's end)
_ENDS: Final = {
    "supervisors": ("supervisor_id", "supervised_id"),
    "supervising": ("supervised_id", "supervisor_id"),
}


def linked_in(c: apsw.Connection, user_id: str, direction: str) -> list[Named]:
    """The one read of the links, with the names (the prompt's "Supervised by" line, the
    privacy check's lines, the review and the People page all come here): the members
    who supervise `user_id` ("supervisors") or whom it supervises ("supervising"),
    oldest link first."""
    other, me = _ENDS[direction]
    rows = fetch_all(
        c,
        f"SELECT u.id, u.username, coalesce(nullif(u.display_name, ''), u.username) "
        f"FROM people_supervision s JOIN users u ON u.id = s.{other} "
        f"WHERE s.{me} = ? ORDER BY s.created_at, s.{other}",
        (user_id,),
    )
    return [Named(str(i), str(u), str(n)) for i, u, n in rows]


def supervision_in(c: apsw.Connection, user_id: str) -> Supervision:
    return Supervision(linked_in(c, user_id, "supervisors"), linked_in(c, user_id, "supervising"))


async def supervision_of(db: Database, user_id: str) -> Supervision:
    """Both directions with the names, in one trip."""
    return await db.call(lambda c: supervision_in(c, user_id))


async def supervisors_of(db: Database, user_id: str) -> list[str]:
    """The ids of the members who supervise `user_id` (oldest link first)."""
    named = await db.call(lambda c: linked_in(c, user_id, "supervisors"))
    return [n.user_id for n in named]


async def supervised_by(db: Database, user_id: str) -> list[str]:
    """The ids of the members `user_id` supervises (oldest link first)."""
    named = await db.call(lambda c: linked_in(c, user_id, "supervising"))
    return [n.user_id for n in named]


async def supervises(db: Database, supervisor_id: str, supervised_id: str) -> bool:
    """Whether the link exists (for server-side checks: a supervisor acts only for the
    members they supervise)."""
    row = await db.fetch_one(
        "SELECT 1 FROM people_supervision WHERE supervisor_id = ? AND supervised_id = ?",
        (supervisor_id, supervised_id),
    )
    return row is not None


# The tables `ProfileNow.read` touches: `user_in`, `read_directory`, `linked_in`.
PROFILE_READS = frozenset({"users", "people_profiles", "people_supervision"})

Profile = tuple[User, Directory, list[str]]


class ProfileNow:
    """Who the assistant talks with, as `USER_PROFILE` shows them at every turn: the
    member's row (a display name changed since sign-in), their directory profile and
    their supervisors' names, kept between turns while none of it can have changed
    (`skald/store/kept.py`). Built once by the people feature (`server.state`)."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.monotonic) -> None:
        self.kept: KeptReads[str, Profile] = KeptReads(db, PROFILE_READS, clock=clock)

    async def read(self, user_id: str) -> Profile:
        def q(c: apsw.Connection) -> Profile:
            user = user_in(c, user_id)
            if user is None:
                raise NotFoundError("no such member")
            supervisors = linked_in(c, user_id, "supervisors")
            return user, read_directory(c, user_id), [n.name for n in supervisors]

        return await self.kept.get(user_id, q)
