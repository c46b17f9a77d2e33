"""One row shape: the columns a query selects and how each row becomes a struct.

`Columns(Struct, "id", "name", Col("enabled", read=bool), ...)` gives `.names` (the SQL
list for SELECT and INSERT) and `.row(r)` (the struct), from one declaration, so a
column added to the table is added once and cannot land in the wrong field; `.one`,
`.find` (None for no row) and `.many` run `SELECT <names> <rest>` on a database and map
what it finds.

Rule: the columns come in the order the SQL lists them; `Col(field, sql=…)` selects an
expression (`api_key_sealed IS NOT NULL`) into a field of another name, `read=` turns
the stored value into the field's (`bool`, `json.loads`). Trap: a query may select
more after `.names` (`SELECT {names}, secret`): `.row` reads its own part only, and the
rest is `r[len(columns)]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from skald.errors import NotFoundError

if TYPE_CHECKING:
    from skald.store.database import Database

__all__ = ["Col", "Columns", "first_column"]

T = TypeVar("T")


@dataclass(frozen=True)
class Col:
    """One column: the struct's `field`, the SQL (default: the field's name) and how to
    read the stored value (default: as it is)."""

    field: str
    sql: str | None = None
    read: Callable[[Any], Any] | None = None


class Columns(Generic[T]):
    """The columns of one row type, in SQL order (see the module docstring)."""

    def __init__(self, make: Callable[..., T], *columns: str | Col) -> None:
        self.make = make
        self.columns = tuple(Col(c) if isinstance(c, str) else c for c in columns)
        self.names = ", ".join(c.sql or c.field for c in self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def row(self, r: tuple[Any, ...]) -> T:
        """The struct of one fetched row (extra values after the columns are left out)."""
        return self.make(
            **{
                c.field: value if c.read is None else c.read(value)
                for c, value in zip(self.columns, r[: len(self.columns)], strict=True)
            }
        )

    async def one(self, db: Database, rest: str, params: Any, missing: str) -> T:
        """The struct of the row `SELECT <names> <rest>` finds; NotFoundError(missing)."""
        found = await self.find(db, rest, params)
        if found is None:
            raise NotFoundError(missing)
        return found

    async def find(self, db: Database, rest: str, params: Any) -> T | None:
        """The struct of the row `SELECT <names> <rest>` finds, or None without one."""
        found = await db.fetch_one(f"SELECT {self.names} {rest}", params)
        return None if found is None else self.row(found)

    async def many(self, db: Database, rest: str, params: Any = ()) -> list[T]:
        """The structs of the rows `SELECT <names> <rest>` finds, in its order."""
        rows = await db.fetch_all(f"SELECT {self.names} {rest}", params)
        return [self.row(r) for r in rows]


async def first_column(db: Database, sql: str, params: Any = ()) -> list[Any]:
    """The first value of each row `sql` finds, in its order (a list of ids, names)."""
    rows = await db.fetch_all(sql, params)
    return [r[0] for r in rows]
