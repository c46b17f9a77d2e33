"""The household's run health of the system agents (skald/features/system_agents/store.py,
`Settings.record` and `Settings.health`): one row per agent and member, counting runs and
failures, with the last status and time; the System agents page shows it."""

from __future__ import annotations

from skald.core.runtime import Runtime
from skald.features.system_agents.store import Health, Settings


async def test_the_run_health_counts_each_agents_runs_and_failures_per_member(
    runtime: Runtime, household: dict[str, str]
) -> None:
    settings = Settings(runtime.server.db)
    mum, ada = household["mum"], household["ada"]
    await settings.record("review", ada, "ok", "2026-01-01T09:00:00Z")
    await settings.record("review", ada, "failed", "2026-01-02T09:00:00Z")
    await settings.record("review", mum, "ok", "2026-01-01T10:00:00Z")
    await settings.record("triage", ada, "ok", "2026-01-03T09:00:00Z")
    found = {(h.agent_id, h.user_id): h for h in await settings.health()}
    expected = [
        # agent, member, runs, failures, last status, last run
        ("review", ada, 2, 1, "failed", "2026-01-02T09:00:00Z"),
        ("review", mum, 1, 0, "ok", "2026-01-01T10:00:00Z"),
        ("triage", ada, 1, 0, "ok", "2026-01-03T09:00:00Z"),
    ]
    fields = ("agent_id", "user_id", "runs", "failures", "last_status", "last_run_at")
    assert found == {
        (row[0], row[1]): Health(**dict(zip(fields, row, strict=True))) for row in expected
    }
    # By agent, then member.
    assert [(h.agent_id, h.user_id) for h in await settings.health()] == sorted(found)
