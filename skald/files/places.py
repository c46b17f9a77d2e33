"""Places: a named folder in the household's files with a row that says what it is (a
project, a shared folder).

Rule: a place's path name is made and checked here for every kind, and a place is made
row first, folder second, with the row taken back when the folder cannot be made: no row
ever names a folder that is not there, and the path name stays free for another try.

Trap: the path name is checked free inside the transaction that inserts the row, so of
two requests racing for one name exactly one gets the conflict; the row's key (and what
"taken" covers: a trashed place keeps its name) is the caller's SQL. Whether a folder left
over on disk is adopted or refused is the caller's `make_dir` too.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import apsw

from skald.agent.prompts import one_line
from skald.errors import ConflictError, InvalidInputError
from skald.files.router import os_error
from skald.store.database import Database

SLUG: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


def path_name(name: str, slug: str | None, *, kind: str, fallback: str) -> str:
    """The path name asked for, or one made from the display name (`fallback` when the
    name has no letter or digit to make it from); refused when it does not fit."""
    made = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-")
    return checked(slug or made or fallback, kind=kind)


def display_name(name: str, *, noun: str) -> str:
    """`name` as one line, as a place's rows keep it; nothing left once folded is refused
    (`noun`: "a project" -> "a project needs a name"), at creation as at a rename."""
    folded = one_line(name)
    if not folded:
        raise InvalidInputError(f"{noun} needs a name")
    return folded


def checked(slug: str, *, kind: str) -> str:
    """`slug` when it is a path name; `kind` names the place in the refusal ("project")."""
    if not SLUG.fullmatch(slug):
        raise InvalidInputError(
            f"a {kind}'s path name is 1-40 lowercase letters, digits and dashes, "
            "starting with a letter or digit"
        )
    return slug


Statement = tuple[str, Sequence[Any]]


@dataclass(frozen=True, kw_only=True)
class NewPlace:
    """The statements that make (and take back) one place's row."""

    taken: Statement  # a row back: the path name is taken
    insert: Statement
    remove: Statement  # takes the row back when its folder cannot be made
    conflict: str  # the message when the path name is taken

    def _add(self, c: apsw.Connection) -> None:
        if c.execute(*self.taken).fetchone():
            raise ConflictError(self.conflict)
        c.execute(*self.insert)

    async def make(self, db: Database, make_dir: Callable[[], None], *, where: str) -> None:
        """`where` names the place in an error (`the folder of project 'den'`): a folder
        the file system refuses is a clear SkaldError (a full disk 507), never a 500."""
        await db.transaction(self._add)
        try:
            await asyncio.to_thread(make_dir)
        except BaseException as exc:
            await db.transaction(lambda c: c.execute(*self.remove))
            if isinstance(exc, OSError):
                raise os_error(exc, where) from exc
            raise
