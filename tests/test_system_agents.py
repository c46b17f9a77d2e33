"""The system-agent runner on real SQLCipher files, with two test agents
(tests/plugins/tally_agents.py): an idle look writes only the member's last attempt,
work opens exactly one run row; due-ness is per member and survives a restart; a run a
dead process left `running` is failed and due again at once; household work runs as the
first active unlocked admin; the wake-up is the shortest enabled interval, overrides
included, clamped; admins alone change the settings, and see counts, never content."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import PASSWORD, signed_in
from review_support import boot, sign_in

from skald.core.runtime import Runtime
from skald.features.system_agents.runner import SystemAgents
from skald.features.system_agents.store import RunLog

TOML = '[plugins]\nmodules = ["plugins.tally_agents"]\n'


@pytest.fixture(name="runtime")
async def runtime_fixture(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = await boot(tmp_path / "data", TOML)
    yield rt
    await rt.shutdown()


def runner(rt: Runtime) -> SystemAgents:
    return rt.server.state(SystemAgents)


async def _members(rt: Runtime) -> dict[str, str]:
    ids = {}
    for name, role in (("mum", "admin"), ("ann", "admin"), ("ada", "member")):
        ids[name] = (await rt.core.users.create(name, PASSWORD, role)).user.id
    return ids


def _log(rt: Runtime, user_id: str) -> RunLog:
    return RunLog(rt.user_runtimes[user_id].handle.db)


async def _give_work(rt: Runtime, user_id: str) -> None:
    await rt.user_runtimes[user_id].handle.db.call(
        lambda c: c.execute(
            "INSERT INTO kv(key, value, updated_at) VALUES ('tally.work', '1', 'now')"
        )
    )


async def test_an_idle_look_writes_only_the_attempt_and_work_writes_one_run(
    runtime: Runtime,
) -> None:
    ids = await _members(runtime)
    await sign_in(runtime, "ada")
    assert await runner(runtime).pass_once(only="tally") == 0
    log = _log(runtime, ids["ada"])
    assert await log.runs() == []  # no heartbeat rows
    assert await log.last_attempt("tally") is not None

    await _give_work(runtime, ids["ada"])
    assert await runner(runtime).pass_once(only="tally") == 0  # not due for an hour
    await log.mark_attempt("tally", "2000-01-01T00:00:00Z")  # an hour (and more) later
    assert await runner(runtime).pass_once(only="tally") == 1
    (run,) = await log.runs()
    assert (run.agent_id, run.status, run.stats) == ("tally", "completed", {"tallied": 1})
    assert run.duration_ms is not None and run.ended_at is not None


async def test_a_member_override_makes_them_due_sooner_and_sets_the_wake_floor(
    runtime: Runtime,
) -> None:
    ids = await _members(runtime)
    await sign_in(runtime, "ada")
    await sign_in(runtime, "mum")
    sa = runner(runtime)
    for agent in sa.agents:  # the built-in ones (event triage wakes every 15 min) are off
        if agent.id not in ("tally", "census"):
            await sa.settings.put(agent.id, False, agent.interval_s)
    assert await sa.tick_s() == 900  # the shortest interval (an hour) clamped to 15 min
    await sa.settings.override("tally", ids["ada"], 61)
    assert await sa.tick_s() == 61
    await sa.settings.put("tally", False, 3600)
    assert await sa.tick_s() == 900  # a switched-off agent's intervals do not count
    await sa.settings.put("tally", True, 3600)

    for name in ("ada", "mum"):
        await _give_work(runtime, ids[name])
        await _log(runtime, ids[name]).mark_attempt("tally", "2099-01-01T00:00:00Z")
    # Both looked at "now" (a future stamp: not due) except that ada's is 61 s.
    await _log(runtime, ids["ada"]).mark_attempt("tally", "2000-01-01T00:00:00Z")
    assert await sa.pass_once(only="tally") == 1
    assert len(await _log(runtime, ids["ada"]).runs()) == 1
    assert await _log(runtime, ids["mum"]).runs() == []


async def test_household_work_runs_as_the_first_active_unlocked_admin(
    runtime: Runtime,
    logged,  # type: ignore[no-untyped-def]
) -> None:
    ids = await _members(runtime)
    await sign_in(runtime, "mum")  # ann (first by name) is locked
    assert await runner(runtime).pass_once(only="census") == 1
    (run,) = await _log(runtime, ids["mum"]).runs()
    assert run.stats == {"unlocked": 1}
    assert "system agent skipped: member locked" not in logged.getvalue()  # not "per member"

    await sign_in(runtime, "ann")
    assert await runner(runtime).pass_once(only="census", force=True) == 1
    assert len(await _log(runtime, ids["ann"]).runs()) == 1
    assert len(await _log(runtime, ids["mum"]).runs()) == 1


async def test_a_run_left_running_by_a_dead_process_is_failed_and_due_again(
    tmp_path: Path,
) -> None:
    rt = await boot(tmp_path / "data", TOML)
    try:
        ids = await _members(rt)
        await sign_in(rt, "ada")
        await runner(rt).pass_once(only="tally")  # looked: not due again for an hour
        log = _log(rt, ids["ada"])
        await log.open("tally", "2026-01-01T00:00:00Z")  # the process dies mid-run
        await _give_work(rt, ids["ada"])
    finally:
        await rt.shutdown()
    rt = await boot(tmp_path / "data", TOML)
    try:
        await sign_in(rt, "ada")
        assert await runner(rt).pass_once(only="tally") == 1  # due at once, not in an hour
        runs = await _log(rt, ids["ada"]).runs()
        assert sorted((r.status, r.error) for r in runs) == [
            ("completed", None),
            ("failed", "the server stopped during this run"),
        ]
    finally:
        await rt.shutdown()


async def test_settings_are_for_admins_and_health_shows_counts_not_content(
    runtime: Runtime,
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    ids = await _members(runtime)
    await sign_in(runtime, "ada")
    await _give_work(runtime, ids["ada"])
    await runner(runtime).pass_once(only="tally")
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    body = {"enabled": False, "interval_s": 7200}
    assert (await ada.call("PUT", "/api/system-agents/tally", json=body)).status_code == 403
    r = await mum.call("PUT", "/api/system-agents/tally", json={**body, "interval_s": 10})
    assert r.status_code == 400 and "interval" in r.json()["error"]["message"]
    assert (await mum.call("PUT", "/api/system-agents/nope", json=body)).status_code == 404
    assert (await mum.call("PUT", "/api/system-agents/tally", json=body)).status_code == 204
    tally = next(
        a for a in (await ada.call("GET", "/api/system-agents")).json() if a["id"] == "tally"
    )
    assert (tally["enabled"], tally["interval_s"], tally["overrides"]) == (False, 7200, None)

    (row,) = [h for h in (await mum.call("GET", "/api/system-agents/health")).json()]
    assert (row["username"], row["runs"], row["failures"], row["last_status"]) == (
        "ada", 1, 0, "completed"
    )  # fmt: skip
    assert (await ada.call("GET", "/api/system-agents/health")).status_code == 403
    # Each sees their own runs only; mum, an admin, too.
    assert len((await ada.call("GET", "/api/system-agents/runs")).json()) == 1
    assert (await mum.call("GET", "/api/system-agents/runs")).json() == []
    # The tally's report is ada's own ("owner"): hers alone.
    assert [r["title"] for r in (await ada.call("GET", "/api/reports")).json()] == ["Tally"]
    assert (await mum.call("GET", "/api/reports")).json() == []
