"""Encrypted members and their jobs: without the opt-in, after a restart nothing of the
member is readable until they sign in, and their due job waits and runs late (or is
skipped past its window); with "let my assistant work while I'm signed out" the key is
kept sealed on disk, opens at start and the job runs on time; revoking removes the
sealed key from the disk (checked in the bytes of every file)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import PASSWORD, Client, add_models, signed_in
from fake_llm import FakeLLM
from schedule_support import config_for, with_clock, write_config

from skald.core.runtime import Runtime
from skald.features.schedule.jobs import JobSpec
from skald.features.schedule.store import Job, ScheduleStore
from skald.paths import DataLayout
from skald.store.database import WrongKeyError, open_plain

MONDAY_9 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 09:00 in Rome
TUESDAY_8 = datetime(2026, 6, 2, 6, 0, 5, tzinfo=UTC)  # just after 08:00 in Rome


@contextlib.asynccontextmanager
async def _running(layout: DataLayout) -> AsyncIterator[Runtime]:
    """One life of the server on `layout`: booted, then shut down however the block ends."""
    rt = await Runtime.boot(layout, config_for(layout.root), announce=io.StringIO())
    try:
        yield rt
    finally:
        await rt.shutdown()


async def _first_life(layout: DataLayout, fake: FakeLLM, *, keep: bool) -> tuple[str, Job]:
    """ada (encrypted) signs in, has a daily 08:00 job, maybe opts in; the server stops."""
    write_config(layout.root)
    async with _running(layout) as rt:
        ada = (await rt.core.users.create("ada", PASSWORD, "member")).user
        assert ada.encrypted
        await add_models(rt, fake, "model-a")
        await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
        scheduler, _ = with_clock(rt, MONDAY_9)
        job = await (await scheduler.jobs(rt.user_runtimes[ada.id].facade)).create(
            JobSpec(title="bins", prompt="Remind me: bins out", cron="0 8 * * *",
                    skip_after_s=6 * 3600)
        )  # fmt: skip
        if keep:
            await rt.keep_key(ada)
        return ada.id, job


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


async def test_without_the_opt_in_nothing_is_readable_after_a_restart_and_the_job_runs_late(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    layout = DataLayout(tmp_path / "data")
    ada, job = await _first_life(layout, fake_llm, keep=False)
    fake_llm.script("model-a", ["Bins reminder sent."])
    async with _running(layout) as rt:
        assert ada not in rt.user_runtimes and not rt.core.users.is_unlocked(ada)
        assert not (layout.root / "kept-keys").exists() or not any(
            (layout.root / "kept-keys").iterdir()
        )
        with pytest.raises(WrongKeyError):  # her file does not open without her key
            await open_plain(layout.user_db(ada), "probe", create=False)
        scheduler, clock = with_clock(rt, TUESDAY_8)
        assert await scheduler.tick() == []  # due, but locked: it waits
        clock.set(datetime(2026, 6, 2, 9, 0, tzinfo=UTC))  # 11:00 in Rome: she signs in
        await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
        (run,) = await scheduler.tick()
        await scheduler.wait_run(run.id)
        store = ScheduleStore(rt.user_runtimes[ada].handle.db)
        (done,) = await store.runs(job.id)
        assert (done.outcome, done.late, done.due_at) == ("succeeded", True, "2026-06-02T06:00:00Z")
        first = (await rt.conversations.history(ada, job.conversation_id))[0].text
        assert "runs late" in first and "2026-06-02 08:00 Europe/Rome" in first
        assert (await store.get(job.id)).next_run == "2026-06-03T06:00:00Z"  # type: ignore[union-attr]


async def test_a_job_missed_by_more_than_its_window_is_skipped_not_run(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    layout = DataLayout(tmp_path / "data")
    ada, job = await _first_life(layout, fake_llm, keep=False)
    async with _running(layout) as rt:
        scheduler, _ = with_clock(rt, datetime(2026, 6, 2, 13, 0, tzinfo=UTC))  # 7 h late
        await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
        (run,) = await scheduler.tick()
        assert run.outcome == "skipped" and run.late and "skip window" in (run.error or "")
        assert await rt.conversations.history(ada, job.conversation_id) == []
        assert fake_llm.bodies() == []


async def test_with_the_opt_in_the_job_runs_on_time_and_revoking_removes_the_sealed_key(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    layout = DataLayout(tmp_path / "data")
    ada, job = await _first_life(layout, fake_llm, keep=True)
    sealed_file = layout.root / "kept-keys" / f"{ada}.sealed"
    sealed = sealed_file.read_bytes()
    assert sealed and sealed_file.stat().st_mode & 0o777 == 0o600
    fake_llm.script("model-a", ["On time."])
    async with _running(layout) as rt:
        assert ada in rt.user_runtimes  # opened at start with the kept key
        scheduler, _ = with_clock(rt, TUESDAY_8)
        (run,) = await scheduler.tick()
        await scheduler.wait_run(run.id)
        (done,) = await ScheduleStore(rt.user_runtimes[ada].handle.db).runs(job.id)
        assert (done.outcome, done.late) == ("succeeded", False)
        user = await rt.core.registry.get_user(ada)
        assert user is not None
        dek_hex = rt.kept_keys.open(ada).hex().encode()  # type: ignore[union-attr]
        await rt.forget_key(user)
        # Gone from the disk: no file holds the sealed blob or the key, and (no sign-in
        # lives) her data is locked again at once.
        assert not sealed_file.exists()
        everything = _all_bytes(layout.root)
        assert sealed not in everything and dek_hex not in everything
        assert ada not in rt.user_runtimes and not rt.core.users.is_unlocked(ada)
    async with _running(layout) as rt:
        assert ada not in rt.user_runtimes  # revoked: a restart opens nothing of hers


@pytest.fixture
async def runtime(tmp_path: Path):  # type: ignore[no-untyped-def]
    layout = DataLayout(tmp_path / "data")
    write_config(layout.root)
    async with _running(layout) as rt:
        yield rt


async def test_the_opt_in_is_the_members_own_and_admins_see_it_as_a_fact(
    runtime: Runtime,
    household: dict[str, str],
    make_client,  # type: ignore[no-untyped-def]
) -> None:
    ada: Client = await signed_in(make_client, "ada")
    assert (await ada.call("GET", "/api/schedule/keep-key")).json() == {"enabled": False}
    r = await ada.call("PUT", "/api/schedule/keep-key", json={"enabled": True})
    assert r.status_code == 200 and r.json() == {"enabled": True}, r.text
    tim: Client = await make_client()
    await tim.login("tim")  # children: no schedule.use
    assert (
        await tim.call("PUT", "/api/schedule/keep-key", json={"enabled": True})
    ).status_code == 403
    mum: Client = await signed_in(make_client, "mum")
    facts = {
        c["username"]: c["works_signed_out"]
        for c in (await mum.call("GET", "/api/admin/schedule")).json()
    }
    assert facts == {"mum": False, "ada": True, "tim": False}
    # Signing out keeps her data open while the opt-in is on...
    await ada.call("POST", "/api/auth/logout")
    assert runtime.core.users.is_unlocked(household["ada"])
    # ...and revoking it (from another sign-in) does not lock a member who is signed in.
    again: Client = await signed_in(make_client, "ada")
    r = await again.call("PUT", "/api/schedule/keep-key", json={"enabled": False})
    assert r.json() == {"enabled": False}
    assert runtime.core.users.is_unlocked(household["ada"])
