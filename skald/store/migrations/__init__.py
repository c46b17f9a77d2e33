"""Numbered, forward-only schema migrations, owned by features.

Each feature (accounts, memory, chat, a plugin...) owns its own chain of migrations for
a schema (registry or owner), numbered 1, 2, 3... A database records how far each
feature's chain has run in its `schema_features` table (the ledger). A migration never
changes after it has shipped: fix mistakes with a new one. Every migration runs in its
own transaction together with its ledger bump, so a crash leaves each feature at a whole
version, never between two.

History: before features, one chain per schema was counted in `PRAGMA user_version`.
That chain is kept, frozen, as the schema's `history` (which feature migration each old
version was): a database at old version N gets a ledger saying "the first N entries ran"
(the bridge), and `user_version` becomes `SchemaPlan.head` (one past the history), so an
older Skald refuses the database instead of misreading it.

Traps:
- Features run in dependency order (`after`, then the order given); a migration may use
  only tables of its own feature and of features it runs after. A new dependency the
  other way round needs a new feature, not an `after` that makes a cycle.
- A ledger entry of a feature nobody registers (a removed plugin) is left alone, and so
  are its tables.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import apsw

from skald.errors import StorageError
from skald.store.database import fetch_all, run_in_transaction

Step = str | Callable[[apsw.Connection], None]

LEDGER_TABLE = "schema_features"
_LEDGER_SQL = (
    f"CREATE TABLE {LEDGER_TABLE}(feature TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID"
)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    step: Step


def _check_numbering(name: str, migrations: Sequence[Migration]) -> None:
    expected = list(range(1, len(migrations) + 1))
    if [m.version for m in migrations] != expected:
        raise ValueError(f"{name} migrations must be numbered {expected}")


@dataclass(frozen=True)
class Schema:
    """A named, ordered list of migrations counted in `user_version` (the historic
    chains; tests rebuild old databases with them)."""

    name: str
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        _check_numbering(self.name, self.migrations)

    @property
    def head(self) -> int:
        return len(self.migrations)


@dataclass(frozen=True)
class Feature:
    """One feature's own migrations of one schema, numbered 1, 2, 3... without gaps."""

    name: str
    migrations: tuple[Migration, ...]
    after: tuple[str, ...] = ()  # features whose migrations must have run first

    def __post_init__(self) -> None:
        _check_numbering(f"feature {self.name!r}", self.migrations)

    def __getitem__(self, version: int) -> tuple[Feature, int]:
        """`FEATURE[3]`: a reference to its third migration (for a history)."""
        if not 1 <= version <= len(self.migrations):
            raise IndexError(f"feature {self.name!r} has no migration {version}")
        return self, version

    @property
    def head(self) -> int:
        return len(self.migrations)


@dataclass(frozen=True)
class SchemaPlan:
    """A schema's frozen history (old `user_version` N = the first N entries) and the
    features it is built from (the history's own by default)."""

    name: str
    history: tuple[tuple[Feature, int], ...]
    features: tuple[Feature, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.features:
            seen: dict[str, Feature] = {}
            for feature, _ in self.history:
                seen.setdefault(feature.name, feature)
            object.__setattr__(self, "features", tuple(seen.values()))
        names = [f.name for f in self.features]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: a feature is registered twice: {sorted(names)}")

    @property
    def head(self) -> int:
        """The `user_version` of a database with a ledger (one past the history)."""
        return len(self.history) + 1

    def with_features(self, extra: Sequence[Feature]) -> SchemaPlan:
        """This plan with more features (plugins'); the history's own stay first."""
        features = list(self.features)
        for feature in extra:
            same = next((f for f in features if f.name == feature.name), None)
            if same is None:
                features.append(feature)
            elif same is not feature:
                raise ValueError(f"{self.name}: two different features are named {feature.name!r}")
        return SchemaPlan(self.name, self.history, tuple(features))

    def historic(self) -> Schema:
        """The old single chain, as `user_version` counted it."""
        return Schema(
            self.name,
            tuple(
                Migration(i, f.migrations[v - 1].name, f.migrations[v - 1].step)
                for i, (f, v) in enumerate(self.history, start=1)
            ),
        )

    def ordered(self) -> list[Feature]:
        """Features in dependency order; ties keep the registration order."""
        by_name = {f.name: f for f in self.features}
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for f in self.features:
            missing = [a for a in f.after if a not in by_name]
            if missing:
                raise ValueError(f"feature {f.name!r} runs after unknown {missing}")
            sorter.add(f.name, *f.after)
        sorter.prepare()
        rank = {f.name: i for i, f in enumerate(self.features)}
        out: list[Feature] = []
        ready: list[str] = []
        while sorter.is_active():
            ready.extend(sorter.get_ready())
            ready.sort(key=rank.__getitem__)
            name = ready.pop(0)  # one at a time, so registration order decides ties
            out.append(by_name[name])
            sorter.done(name)
        return out


def user_version(conn: apsw.Connection) -> int:
    value = conn.execute("PRAGMA user_version").fetchall()[0][0]
    assert isinstance(value, int)
    return value


def ledger(conn: apsw.Connection) -> dict[str, int]:
    """Feature -> the last of its migrations applied ({} before the bridge)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (LEDGER_TABLE,)
    ).fetchall()
    if not exists:
        return {}
    return {
        str(f): int(v) for f, v in fetch_all(conn, f"SELECT feature, version FROM {LEDGER_TABLE}")
    }


def _apply(conn: apsw.Connection, migration: Migration) -> None:
    if isinstance(migration.step, str):
        conn.execute(migration.step)
    else:
        migration.step(conn)


def migrate(conn: apsw.Connection, schema: Schema, target: int | None = None) -> list[int]:
    """The historic way: bring a `user_version` chain up to `target` (default: head)."""
    goal = schema.head if target is None else target
    if not 0 <= goal <= schema.head:
        raise ValueError(f"{schema.name} has no version {goal}")
    found = user_version(conn)
    if found > schema.head:
        raise StorageError(
            f"{conn.filename} is at {schema.name} schema version {found}, newer than this "
            f"Skald understands ({schema.head}); run the newer Skald version"
        )
    applied: list[int] = []
    for migration in schema.migrations[found:goal]:
        # Re-read inside the transaction: another process may have migrated meanwhile.
        def step(c: apsw.Connection, m: Migration = migration) -> bool:
            if user_version(c) >= m.version:
                return False
            _apply(c, m)
            c.execute(f"PRAGMA user_version={int(m.version)}")
            return True

        if run_in_transaction(conn, step):
            applied.append(migration.version)
    return applied


def _bridge(conn: apsw.Connection, plan: SchemaPlan) -> None:
    """Give a database without a ledger one, from its old `user_version`."""
    found = user_version(conn)
    if found >= plan.head:
        return
    conn.execute(_LEDGER_SQL)
    done: dict[str, int] = {}
    for feature, version in plan.history[:found]:
        done[feature.name] = max(done.get(feature.name, 0), version)
    conn.executemany(f"INSERT INTO {LEDGER_TABLE} VALUES (?, ?)", sorted(done.items()))
    conn.execute(f"PRAGMA user_version={int(plan.head)}")


def migrate_features(conn: apsw.Connection, plan: SchemaPlan) -> list[tuple[str, int]]:
    """Bring every feature of `plan` to its head; return the (feature, version)s applied."""
    found = user_version(conn)
    if found > plan.head:
        raise StorageError(
            f"{conn.filename} is at {plan.name} schema version {found}, newer than this "
            f"Skald understands ({plan.head}); run the newer Skald version"
        )
    order = plan.ordered()
    if found < plan.head:
        run_in_transaction(conn, lambda c: _bridge(c, plan))
    have = ledger(conn)
    for feature in order:
        if have.get(feature.name, 0) > feature.head:
            raise StorageError(
                f"{conn.filename}: {plan.name} feature {feature.name!r} is at version "
                f"{have[feature.name]}, newer than this Skald understands ({feature.head}); "
                "run the newer Skald version (or the plugin's newer release)"
            )
    applied: list[tuple[str, int]] = []
    for feature in order:
        for migration in feature.migrations[have.get(feature.name, 0) :]:

            def step(c: apsw.Connection, f: Feature = feature, m: Migration = migration) -> bool:
                # Re-read inside the transaction: another process may have migrated meanwhile.
                if ledger(c).get(f.name, 0) >= m.version:
                    return False
                _apply(c, m)
                c.execute(
                    f"INSERT INTO {LEDGER_TABLE} VALUES (?, ?) "
                    "ON CONFLICT(feature) DO UPDATE SET version = excluded.version",
                    (f.name, m.version),
                )
                return True

            if run_in_transaction(conn, step):
                applied.append((feature.name, migration.version))
    return applied
