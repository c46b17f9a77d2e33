"""Scheduled backups and the restore drill: retention keeps what the rules say and
nothing else is touched; the drill restores the newest archive into scratch, opens every
database (an encrypted one with the key the server holds while its owner is signed in)
and catches a damaged database or a tampered archive; a failed drill is a doctor
finding whose printed fix, run as printed, clears it."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from harness import ADMIN, ADMIN_PW, Api, ServerProcess

from skald.cli import main
from skald.core.runtime import Runtime
from skald.errors import InvalidInputError
from skald.features.backups import scheduler as schedule
from skald.features.backups.scheduler import (
    BackupSettings,
    BackupState,
    RunResult,
    archives,
    drill_and_record,
    load_state,
    no_keys,
    prune,
    retention_keeps,
    save_settings,
)
from skald.paths import DataLayout
from skald.store.snapshot import integrity, is_plain_sqlite

CHILD = "tim"
CHILD_PW = "tim's long password"


def _name(when: datetime) -> str:
    return f"skald-backup-{when.strftime('%Y%m%dT%H%M%SZ')}.tar"


def test_retention_keeps_the_newest_per_day_week_and_month_and_always_the_newest() -> None:
    start = datetime(2026, 1, 1, 3, tzinfo=UTC)
    # Two backups a day for 120 days, newest first.
    found = [
        (start + timedelta(hours=12 * i), Path(_name(start + timedelta(hours=12 * i))))
        for i in range(240)
    ][::-1]
    keep = retention_keeps(found, daily=7, weekly=4, monthly=6)
    days = {p for w, p in found if w.date() >= found[0][0].date() - timedelta(days=6)}
    newest_per_day = {
        p for w, p in found if (w, p) == max(x for x in found if x[0].date() == w.date())
    }
    assert days & newest_per_day <= keep
    assert found[0][1] in keep
    assert len(keep) <= 7 + 4 + 6
    months = {w.strftime("%Y-%m") for w, p in found if p in keep}
    assert len(months) == 4  # 120 days span 4 months (Jan..Apr), all kept
    assert retention_keeps(found, 0, 0, 0) == {found[0][1]}


def test_prune_deletes_only_archives_the_rules_drop_and_never_other_files(tmp_path: Path) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    for i in range(10):
        (tmp_path / _name(now - timedelta(days=i))).write_bytes(b"x")
    others = ["notes.txt", "skald-backup-latest.tar", "pre-update-1-to-2"]
    for name in others:
        (tmp_path / name).write_bytes(b"keep me")
    removed = prune(tmp_path, BackupSettings(keep_daily=3, keep_weekly=0, keep_monthly=0))
    assert len(removed) == 7
    assert [p.name for _, p in archives(tmp_path)] == [
        _name(now - timedelta(days=i)) for i in range(3)
    ]
    for name in others:
        assert (tmp_path / name).read_bytes() == b"keep me"


def test_archives_written_within_one_second_are_newest_by_their_number(tmp_path: Path) -> None:
    # `backup --drill` right after another backup (or a scheduled one beside a manual
    # one) names the second `-2`: the drill, retention and the page must take it as the
    # newest, though "Z.tar" sorts after "Z-2.tar" by name.
    stamp = "20261205T020458Z"
    for name in (
        f"skald-backup-{stamp}.tar",
        f"skald-backup-{stamp}-2.tar",
        f"skald-backup-{stamp}-10.tar",
        "skald-backup-20261205T020457Z.tar",
    ):
        (tmp_path / name).write_bytes(b"x")
    assert [p.name for _, p in archives(tmp_path)] == [
        f"skald-backup-{stamp}-10.tar",
        f"skald-backup-{stamp}-2.tar",
        f"skald-backup-{stamp}.tar",
        "skald-backup-20261205T020457Z.tar",
    ]


def test_settings_are_checked_before_they_are_saved(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path)
    with pytest.raises(InvalidInputError, match="full path"):
        save_settings(layout, BackupSettings(folder="relative/dir"))
    with pytest.raises(InvalidInputError, match="is not a folder"):
        save_settings(layout, BackupSettings(folder=str(tmp_path / "missing-disk")))
    with pytest.raises(InvalidInputError, match="every 1 to 744 hours"):
        save_settings(layout, BackupSettings(every_hours=0))
    save_settings(layout, BackupSettings(folder=str(tmp_path), every_hours=6))
    assert (tmp_path / schedule.SETTINGS_FILE).stat().st_mode & 0o777 == 0o600


def test_a_backup_is_due_daily_a_failed_one_is_retried_sooner_and_the_drill_monthly() -> None:
    sched = schedule.BackupScheduler.__new__(schedule.BackupScheduler)
    sched.first_delay_s = 0
    sched._started = 0.0
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    ago = lambda **kw: (now - timedelta(**kw)).isoformat()  # noqa: E731
    daily = BackupSettings()
    assert sched._due(daily, BackupState(), now) == (True, False)
    ok = RunResult(at=ago(hours=23), ok=True)
    assert sched._due(daily, BackupState(last_backup=ok, last_success=ok), now) == (False, True)
    ok = RunResult(at=ago(hours=25), ok=True)
    assert sched._due(daily, BackupState(last_backup=ok), now)[0]
    failed = RunResult(at=ago(minutes=61), ok=False, error="disk gone")
    assert sched._due(daily, BackupState(last_backup=failed), now)[0]
    drilled = schedule.DrillResult(at=ago(days=29), ok=True)
    recent = RunResult(at=ago(hours=1), ok=True)
    state = BackupState(last_backup=recent, last_success=recent, last_drill=drilled)
    assert sched._due(daily, state, now) == (False, False)
    state.last_drill = schedule.DrillResult(at=ago(days=31), ok=True)
    assert sched._due(daily, state, now) == (False, True)
    assert sched._due(BackupSettings(enabled=False), state, now) == (False, False)


@pytest.fixture
def instance(tmp_path: Path) -> ServerProcess:
    srv = ServerProcess(tmp_path / "srv")
    srv.create_admin()
    srv.add_user(CHILD, CHILD_PW, role="children")
    return srv


def _backup_drill(srv: ServerProcess) -> tuple[int, str, str]:
    r = srv.cli("backup", "--drill")
    return r.returncode, r.stdout, r.stderr


def test_the_drill_without_a_server_checks_plain_databases_and_reports_encrypted_as_locked(
    instance: ServerProcess,
) -> None:
    code, out, err = _backup_drill(instance)
    assert code == 0, err
    assert "Restore drill passed" in out
    assert f"({ADMIN}): encrypted; its owner is not signed in" in out
    state = load_state(DataLayout(instance.data))
    assert state.last_drill is not None and state.last_drill.ok
    verdicts = {d.username or "registry": d.status for d in state.last_drill.databases}
    assert verdicts == {"registry": "ok", ADMIN: "locked", CHILD: "ok"}, verdicts
    assert state.last_drill.files > 0
    # The scratch folder is gone.
    assert not list((instance.data / "backups").glob(".drill-*"))


def _damage_child_database(srv: ServerProcess) -> None:
    users = srv.data / "database" / "users"
    child_db = next(p for p in users.glob("*.db") if b"SQLite format 3" in p.read_bytes()[:16])
    raw = bytearray(child_db.read_bytes())
    raw[4096 : len(raw)] = b"\xa5" * (len(raw) - 4096)
    child_db.write_bytes(bytes(raw))


def _doctor(srv: ServerProcess) -> dict[str, Any]:
    r = srv.cli("doctor", "--json")
    return {c["name"]: c for c in json.loads(r.stdout)["checks"]}


def test_a_damaged_database_fails_the_drill_and_the_doctor_fix_clears_it_once_repaired(
    instance: ServerProcess,
) -> None:
    assert _doctor(instance)["backups"]["status"] == "warn"  # no backup yet
    fix = _doctor(instance)["backups"]["fix"]
    assert fix.endswith(f"--data {instance.data} backup --drill"), fix
    # A database damaged on disk is copied as it is (its owner is not signed in): the
    # archive's digests match, only opening it shows the damage.
    _damage_child_database(instance)
    code, out, err = _backup_drill(instance)
    assert code == 1 and "restore drill failed" in err, (out, err)
    assert "failed database/users/" in out and f"({CHILD})" in out
    check = _doctor(instance)["backups"]
    assert check["status"] == "fail" and "restore drill" in check["finding"], check
    # The household repairs the database (here: the member is deleted), then runs the
    # printed fix: a new backup, tested at once; the finding is gone.
    r = instance.cli("user", "delete", CHILD, "--yes")
    assert r.returncode == 0, r.stderr
    command = check["fix"].split(" (", 1)[0].split()
    assert command[-2:] == ["backup", "--drill"]
    r = instance.cli(*command[command.index("backup") :])
    assert r.returncode == 0, r.stderr
    assert _doctor(instance)["backups"]["status"] == "ok"


def test_a_tampered_archive_fails_the_drill_on_its_digests(instance: ServerProcess) -> None:
    code, _, err = _backup_drill(instance)
    assert code == 0, err
    newest = archives(instance.data / "backups")[0][1]
    raw = bytearray(newest.read_bytes())
    with tarfile.open(newest) as tar:
        member = next(m for m in tar if m.name.endswith("system.db"))
        at = member.offset_data + 8192
    raw[at] ^= 0xFF
    newest.write_bytes(bytes(raw))
    result = asyncio.run(drill_and_record(DataLayout(instance.data), no_keys))
    assert not result.ok and "does not match its checksum" in (result.error or ""), result


def test_with_the_server_running_a_signed_in_members_encrypted_database_is_opened(
    instance: ServerProcess,
) -> None:
    instance.start()
    try:
        api = Api(instance.url)
        api.login(ADMIN, ADMIN_PW)  # unlocks the administrator's data: the server holds the key
        out = io.StringIO()
        code = main(
            ["--data", str(instance.data), "backup", "--drill"], environ=instance.env, stdout=out
        )
        assert code == 0, out.getvalue()
        assert "by the running server" in out.getvalue()
        state = load_state(DataLayout(instance.data))
        assert state.last_drill is not None
        verdicts = {d.username or "registry": d.status for d in state.last_drill.databases}
        assert verdicts == {"registry": "ok", ADMIN: "ok", CHILD: "ok"}, verdicts
        # The Backups page shows the same.
        view = api.get("/api/backups").json()
        assert view["state"]["last_drill"]["ok"] is True
        assert view["archives"] and view["folder"] == str(instance.data / "backups")
        run = api.post("/api/backups/run").json()
        assert run["ok"] is True and run["path"].startswith(str(instance.data / "backups"))
        bad = api.request("PUT", "/api/backups/settings", json={"folder": "nowhere"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"
    finally:
        instance.close()


async def test_the_server_copies_and_checks_a_signed_in_member_s_database_without_handing_out_her_key(
    runtime: Runtime, tmp_path: Path
) -> None:
    # What the backups and the drill get from the facade: a copy keyed with her key (it
    # stays encrypted) and a check that opens it with that key; locked, neither.
    created = await runtime.core.users.create("ada", PASSWORD, "member")
    ada = created.user.id
    assert created.user.encrypted
    server = runtime.server
    copy = tmp_path / "copy.db"
    async with server.held_for_backup(ada) as held:
        assert held is None  # locked: her file is quiescent, copied as bytes
    await runtime.core.users.unlock("ada", PASSWORD)
    async with server.held_for_backup(ada) as held:
        assert held is not None and held.encrypted
        assert await held.snapshot(copy) >= 1
    assert not is_plain_sqlite(copy)
    checks = await server.key_checks([ada, "nobody"])
    public = [getattr(o, n) for o in (held, checks) for n in dir(o) if not n.startswith("_")]
    assert not [v for v in public if isinstance(v, bytes | dict)]  # no key among them
    assert await asyncio.to_thread(checks.check, ada, copy) == (True, "integrity ok")
    assert checks.check("nobody", copy) is None
    assert integrity(copy, None)[0] is False  # without her key it does not open
    await runtime.lock(ada)
    assert (await server.key_checks([ada])).check(ada, copy) is None
