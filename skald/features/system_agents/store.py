"""The runner's tables: per member (their own database) the last attempt of each agent
and the run log; household-wide (the registry) the settings, per-member interval
overrides and run health counts.

Rule: the last attempt is written for every look at a member (idle ones too), the run
log only when there was work: the log is a history for people, due-ness needs every
attempt (reading it off the log would re-run an idle agent at every tick). A run row is
opened `running` before the work and closed after, so a process that dies mid-pass
leaves a visible `running` row: `sweep` turns it `failed` at the next start and forgets
that agent's last attempt, so the interrupted pass is due again at once.

Trap: health counts are counts only (runs, failures, the last status and time): the
admin's view across members must never carry content, and a locked member's own log
cannot be read anyway.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime

import apsw
import msgspec

from skald.store.columns import Col, Columns
from skald.store.database import Database, fetch_all, fetch_one
from skald.store.migrations import Feature, Migration

__all__ = [
    "OWNER_FEATURE",
    "REGISTRY_FEATURE",
    "AgentSetting",
    "Health",
    "Run",
    "RunLog",
    "Settings",
    "iso",
]

_OWNER_V1 = """
CREATE TABLE system_agent_state(
    agent_id TEXT PRIMARY KEY,
    last_attempt_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE system_agent_runs(
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    started_at TEXT NOT NULL,
    ended_at TEXT,
    duration_ms INTEGER,
    stats TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(stats)),
    error TEXT
) WITHOUT ROWID;
CREATE INDEX system_agent_runs_by_time ON system_agent_runs(started_at);
CREATE INDEX system_agent_runs_running ON system_agent_runs(status) WHERE status = 'running';
"""

_REGISTRY_V1 = """
CREATE TABLE system_agent_settings(
    agent_id TEXT PRIMARY KEY,
    enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    interval_s INTEGER NOT NULL CHECK (interval_s >= 60)
) WITHOUT ROWID;
CREATE TABLE system_agent_intervals(
    agent_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    interval_s INTEGER NOT NULL CHECK (interval_s >= 60),
    PRIMARY KEY(agent_id, user_id)
) WITHOUT ROWID;
CREATE TABLE system_agent_health(
    agent_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    runs INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    last_status TEXT NOT NULL,
    last_run_at TEXT NOT NULL,
    PRIMARY KEY(agent_id, user_id)
) WITHOUT ROWID;
"""

OWNER_FEATURE = Feature("system_agents", (Migration(1, "agent state and run log", _OWNER_V1),))
REGISTRY_FEATURE = Feature(
    "system_agents",
    (Migration(1, "agent settings, interval overrides, run health", _REGISTRY_V1),),
    after=("accounts",),
)


def iso(at: datetime) -> str:
    """UTC `YYYY-MM-DDTHH:MM:SSZ`, the shape every stored time has (string-comparable)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


class Run(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    agent_id: str
    status: str
    started_at: str
    ended_at: str | None
    duration_ms: int | None
    stats: dict[str, int]
    error: str | None


_RUN = Columns(
    Run,
    "id",
    "agent_id",
    "status",
    "started_at",
    "ended_at",
    "duration_ms",
    Col("stats", read=json.loads),
    "error",
)


class RunLog:
    """One member's own agent state and runs (their database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def last_attempt(self, agent_id: str) -> str | None:
        return await self.db.fetch_text(
            "SELECT last_attempt_at FROM system_agent_state WHERE agent_id=?", (agent_id,)
        )

    async def mark_attempt(self, agent_id: str, at: str) -> None:
        await self.db.execute(
            "INSERT INTO system_agent_state(agent_id, last_attempt_at) VALUES (?, ?) "
            "ON CONFLICT(agent_id) DO UPDATE SET last_attempt_at=excluded.last_attempt_at",
            (agent_id, at),
        )

    async def open(self, agent_id: str, at: str) -> str:
        run_id = secrets.token_hex(8)
        await self.db.execute(
            "INSERT INTO system_agent_runs(id, agent_id, status, started_at) "
            "VALUES (?, ?, 'running', ?)",
            (run_id, agent_id, at),
        )
        return run_id

    async def close(
        self, run_id: str, status: str, at: str, ms: int, stats: dict[str, int], error: str | None
    ) -> None:
        await self.db.execute(
            "UPDATE system_agent_runs SET status=?, ended_at=?, duration_ms=?, stats=?, "
            "error=? WHERE id=? AND status='running'",
            (status, at, ms, json.dumps(stats), error, run_id),
        )

    async def sweep(self, at: str) -> list[str]:
        """Runs a dead process left `running` become `failed`; their agents are due again.
        Returns the agents swept."""

        def q(c: apsw.Connection) -> list[str]:
            agents = [
                str(r[0])
                for r in fetch_all(
                    c, "SELECT DISTINCT agent_id FROM system_agent_runs WHERE status='running'"
                )
            ]
            c.execute(
                "UPDATE system_agent_runs SET status='failed', ended_at=?, "
                "error='the server stopped during this run' WHERE status='running'",
                (at,),
            )
            c.executemany("DELETE FROM system_agent_state WHERE agent_id=?", [(a,) for a in agents])
            return agents

        return await self.db.transaction(q)

    async def runs(self, limit: int = 50) -> list[Run]:
        rest = "FROM system_agent_runs ORDER BY started_at DESC, id DESC LIMIT ?"
        return await _RUN.many(self.db, rest, (limit,))


class AgentSetting(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: str
    enabled: bool
    interval_s: int
    overrides: dict[str, int]  # user id -> interval


class Health(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: str
    user_id: str
    runs: int
    failures: int
    last_status: str
    last_run_at: str


_HEALTH = Columns(Health, "agent_id", "user_id", "runs", "failures", "last_status", "last_run_at")


class Settings:
    """The household's settings for the agents and the run health (the registry)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, agent_id: str, default_interval: int) -> AgentSetting:
        def q(c: apsw.Connection) -> AgentSetting:
            row = fetch_one(
                c,
                "SELECT enabled, interval_s FROM system_agent_settings WHERE agent_id=?",
                (agent_id,),
            )
            over = fetch_all(
                c,
                "SELECT user_id, interval_s FROM system_agent_intervals WHERE agent_id=?",
                (agent_id,),
            )
            enabled, interval = (True, default_interval) if row is None else (bool(row[0]), row[1])
            return AgentSetting(
                agent_id=agent_id,
                enabled=enabled,
                interval_s=int(interval),
                overrides={str(u): int(s) for u, s in over},
            )

        return await self.db.call(q)

    async def put(self, agent_id: str, enabled: bool, interval_s: int) -> None:
        await self.db.execute(
            "INSERT INTO system_agent_settings(agent_id, enabled, interval_s) VALUES (?,?,?) "
            "ON CONFLICT(agent_id) DO UPDATE SET enabled=excluded.enabled, "
            "interval_s=excluded.interval_s",
            (agent_id, int(enabled), interval_s),
        )

    async def override(self, agent_id: str, user_id: str, interval_s: int | None) -> None:
        """A member's own interval for this agent; None removes the override."""
        args: tuple[object, ...]
        if interval_s is None:
            sql, args = (
                "DELETE FROM system_agent_intervals WHERE agent_id=? AND user_id=?",
                (agent_id, user_id),
            )
        else:
            sql, args = (
                "INSERT INTO system_agent_intervals(agent_id, user_id, interval_s) VALUES (?,?,?) "
                "ON CONFLICT(agent_id, user_id) DO UPDATE SET interval_s=excluded.interval_s",
                (agent_id, user_id, interval_s),
            )
        await self.db.execute(sql, args)

    async def record(self, agent_id: str, user_id: str, status: str, at: str) -> None:
        failed = int(status == "failed")
        await self.db.execute(
            "INSERT INTO system_agent_health(agent_id, user_id, runs, failures, last_status, "
            "last_run_at) VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT(agent_id, user_id) DO UPDATE "
            "SET runs=runs+1, failures=failures+excluded.failures, "
            "last_status=excluded.last_status, last_run_at=excluded.last_run_at",
            (agent_id, user_id, failed, status, at),
        )

    async def health(self) -> list[Health]:
        return await _HEALTH.many(self.db, "FROM system_agent_health ORDER BY agent_id, user_id")
