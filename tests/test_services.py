"""The service runner: order, restart with back-off, health, clean cancellation."""

from __future__ import annotations

import asyncio

import pytest
from conftest import PASSWORD

from skald.core.runtime import Runtime
from skald.core.services import GiveUp, Restart, ServiceRunner, ServiceSpec


class Recorder:
    """Stands in for asyncio.sleep in the back-off: records the delays, waits a tick."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


async def test_a_crashing_service_is_restarted_with_doubling_back_off_and_reported_degraded() -> (
    None
):
    backoff = Recorder()
    runner = ServiceRunner(initial_backoff_s=1, max_backoff_s=4, settle_s=3600, sleep=backoff)
    runs = 0
    healthy = asyncio.Event()

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 5:
            raise RuntimeError(f"boom {runs}")
        healthy.set()
        await asyncio.sleep(3600)

    runner.add(ServiceSpec("flaky", flaky))
    await runner.start()
    await asyncio.wait_for(healthy.wait(), 5)
    assert backoff.delays == [1, 2, 4, 4]  # doubled, capped at max_backoff_s
    [state] = runner.health()
    # Running again, but it has not yet proved itself: degraded, with the last error.
    assert state.state == "degraded" and state.restarts == 4
    assert state.reason is not None and "RuntimeError: boom 4" in state.reason
    assert runner.degraded_reasons() == [state.reason]
    await runner.stop()
    assert [h.state for h in runner.health()] == ["stopped"]


async def test_a_restarted_service_is_ok_again_once_it_has_run_its_settle_time() -> None:
    runner = ServiceRunner(initial_backoff_s=0, settle_s=0, sleep=Recorder())
    runs = 0
    healthy = asyncio.Event()

    async def once_broken() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise OSError("disk hiccup")
        healthy.set()
        await asyncio.sleep(3600)

    runner.add(ServiceSpec("once", once_broken))
    await runner.start()
    await asyncio.wait_for(healthy.wait(), 5)
    assert [(h.state, h.restarts) for h in runner.health()] == [("ok", 1)]
    await runner.stop()


def idle(name: str, events: list[str], order: int = 0) -> ServiceSpec:
    """A service that runs until cancelled, logging "start NAME" and "stop NAME" in events."""

    async def run() -> None:
        events.append(f"start {name}")
        try:
            await asyncio.sleep(3600)
        finally:
            events.append(f"stop {name}")

    return ServiceSpec(name, run, order=order)


async def test_services_start_in_ascending_order_and_stop_in_descending_order() -> None:
    runner = ServiceRunner()
    events: list[str] = []
    for name, order in (("web", 100), ("db", 10), ("watcher", 50)):
        runner.add(idle(name, events, order))
    await runner.start()
    await asyncio.sleep(0)
    assert events == ["start db", "start watcher", "start web"]
    assert {h.name: h.state for h in runner.health()} == {"db": "ok", "web": "ok", "watcher": "ok"}
    await runner.stop()
    assert events[3:] == ["stop web", "stop watcher", "stop db"]


async def test_a_chore_runs_once_and_is_forgotten_and_its_crash_does_not_degrade() -> None:
    runner = ServiceRunner()
    await runner.start()
    done = asyncio.Event()

    async def chore() -> None:
        done.set()

    async def broken_chore() -> None:
        raise ValueError("nope")

    runner.add(ServiceSpec("chore", chore, restart=False))
    runner.add(ServiceSpec("broken", broken_chore, restart=False))
    await asyncio.wait_for(done.wait(), 5)
    for _ in range(5):
        await asyncio.sleep(0)
    assert runner.health() == [] and runner.degraded_reasons() == []
    # Its name is free again.
    runner.add(ServiceSpec("chore", chore, restart=False))
    await runner.stop()


async def test_a_service_that_reports_ready_restarts_its_back_off_and_may_give_up_for_good() -> (
    None
):
    """The connector instances' contract (issue 21): `Restart` is an expected failure
    (back-off, no traceback), `ready` starts the back-off afresh and clears the degraded
    state, `GiveUp` ends it (stopped with its reason, not degraded, not restarted)."""
    backoff = Recorder()
    runner = ServiceRunner(initial_backoff_s=1, max_backoff_s=8, settle_s=3600, sleep=backoff)
    runs = 0
    gone = asyncio.Event()

    async def instance() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            runner.ready("inst")  # this start worked for a while, then the server died
            assert [h.state for h in runner.health()] == ["ok"]
        if runs == 5:
            gone.set()
            raise GiveUp("failed after 2 attempts")
        raise Restart(f"died {runs}")

    runner.add(ServiceSpec("inst", instance))
    await runner.start()
    await asyncio.wait_for(gone.wait(), 5)
    for _ in range(5):
        await asyncio.sleep(0)
    assert runs == 5 and backoff.delays == [1, 2, 1, 2]  # afresh after `ready`
    [state] = runner.health()
    assert state.state == "stopped" and state.reason == "failed after 2 attempts"
    assert runner.degraded_reasons() == []
    await runner.stop()


async def test_removing_one_service_stops_it_and_frees_its_name_while_others_run() -> None:
    runner = ServiceRunner()
    events: list[str] = []
    runner.add(idle("a", events))
    runner.add(idle("b", events))
    await runner.start()
    await asyncio.sleep(0)
    await runner.remove("a")
    stopped = [e for e in events if e.startswith("stop ")]
    assert stopped == ["stop a"] and "a" not in runner and "b" in runner
    runner.add(idle("a", events))  # the name is free again; started at once (the runner runs)
    await asyncio.sleep(0)
    assert {h.name: h.state for h in runner.health()} == {"a": "ok", "b": "ok"}
    await runner.remove("missing")  # nothing to do
    await runner.stop()


async def test_two_services_cannot_share_a_name() -> None:
    runner = ServiceRunner()
    runner.add(idle("x", []))
    with pytest.raises(ValueError, match="already exists"):
        runner.add(idle("x", []))


async def test_a_service_that_ignores_cancellation_is_abandoned_so_stop_still_ends() -> None:
    runner = ServiceRunner(stop_timeout_s=0.05)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue  # swallows the cancellation: a bug, but stop() must not hang

    runner.add(ServiceSpec("stubborn", stubborn))
    await runner.start()
    await asyncio.sleep(0)
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == "svc-server-stubborn"]
    # Meanwhile a chore asked for during the stop is not started, and nothing fails.
    stopping = asyncio.ensure_future(runner.stop())
    await asyncio.sleep(0)
    runner.add(ServiceSpec("late", stubborn, restart=False))
    await stopping
    assert "late" not in runner
    assert not task.done()  # abandoned, still running: stop() returned anyway
    release.set()
    task.cancel()
    await asyncio.wait([task], timeout=5)


async def test_health_shows_a_degraded_service_in_the_health_route(
    runtime: Runtime, make_client: object
) -> None:
    async def broken() -> None:
        raise OSError("disk on fire")

    runtime.services.initial_backoff_s = 30
    runtime.services.add(ServiceSpec("broken", broken))
    await asyncio.sleep(0.05)
    status, reasons = runtime.health()
    assert status == "degraded" and any("disk on fire" in r for r in reasons)
    client = await make_client()  # type: ignore[operator]
    r = await client.call("GET", "/api/health")
    body = r.json()
    assert r.status_code == 200 and body["status"] == "degraded"
    assert any("broken" in r and "disk on fire" in r for r in body["reasons"])


async def test_a_members_chores_run_in_their_runner_and_stop_when_their_data_is_locked(
    runtime: Runtime, household: dict[str, str]
) -> None:
    ada = await runtime.core.users.get("ada")
    handle = await runtime.core.users.unlock("ada", PASSWORD)
    mine = await runtime.attach(handle)
    stopped = asyncio.Event()

    async def chore() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    mine.services.add(ServiceSpec("long-chore", chore, restart=False))
    await asyncio.sleep(0)
    names = {h.name for h in runtime.service_health()}
    assert "ada/long-chore" in names and "session-purge" in names
    await runtime.lock(ada.id)
    assert stopped.is_set()
    assert not any(h.name.startswith("ada/") for h in runtime.service_health())
