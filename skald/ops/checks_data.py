"""`skald doctor` checks of this data directory: the configuration, the directory itself,
its permissions and free disk space, and the integrity of the databases."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
from pathlib import Path

from skald.errors import SkaldError
from skald.files.homes import home_problems
from skald.ops.channel import is_serving, ops_request
from skald.ops.checks_base import Context, Finding, no_answer, not_applicable, shell_quote
from skald.paths import DIR_MODE, DataLayout

DISK_WARN = 2 * 1024**3
DISK_FAIL = 200 * 1024**2
# Beyond this many offending paths, one recursive command instead of a list.
MAX_LISTED_PATHS = 6
HOME_LIMIT = 1000  # home findings counted before the sweep stops


# -- the configuration ----------------------------------------------------------------


async def check_config(ctx: Context) -> Finding:
    path = ctx.layout.config_file
    if ctx.config_error:
        return Finding(
            name="config",
            status="fail",
            finding=ctx.config_error,
            fix=f"correct {shell_quote(path)} (or the SKALD_* variable named), then "
            f"{ctx.restart_command()}; the other checks used the defaults",
        )
    exists = await asyncio.to_thread(path.is_file)
    where = str(path) if exists else "built-in defaults (no config.toml)"
    return Finding(name="config", status="ok", finding=f"configuration valid: {where}")


# -- the data directory -------------------------------------------------------------------


async def check_data(ctx: Context) -> Finding:
    layout = ctx.layout

    def probe() -> Finding:
        if not layout.root.is_dir():
            return Finding(
                name="data",
                status="fail",
                finding=f"no Skald data in {layout.root}",
                fix=f"{ctx.skald('setup')} (or pass --data DIR where the data lives)",
            )
        if not layout.system_db.is_file():
            return Finding(
                name="data",
                status="warn",
                finding=f"{layout.root} has no registry yet (nobody has set up Skald here)",
                fix=f"{ctx.skald('setup')} (or open the web setup page the server prints)",
            )
        return Finding(name="data", status="ok", finding=f"data directory {layout.root}")

    return await asyncio.to_thread(probe)


def _want_dirs(layout: DataLayout) -> list[Path]:
    return [
        layout.root,
        layout.database_dir,
        layout.users_db_dir,
        layout.homes_dir,
        layout.backups_dir,
    ]


def _secret_files(layout: DataLayout) -> list[Path]:
    root = layout.root
    files = [
        layout.instance_key,
        layout.vapid_key,
        layout.config_file,
        root / "ops.token",
        root / "setup-token",
        root / ".serve.lock",
    ]
    for tree in (layout.database_dir, layout.backups_dir):
        with contextlib.suppress(OSError):
            files.extend(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    return files


def permission_problems(layout: DataLayout, uid: int) -> tuple[list[Path], list[Path], list[Path]]:
    """(dirs not 0700, files readable by others, paths owned by someone else)."""
    bad_dirs: list[Path] = []
    bad_files: list[Path] = []
    foreign: list[Path] = []
    dirs = _want_dirs(layout)
    with contextlib.suppress(OSError):
        for tree in (layout.database_dir, layout.backups_dir):
            dirs.extend(p for p in sorted(tree.rglob("*")) if p.is_dir() and not p.is_symlink())

    def mode(path: Path) -> int | None:
        """The path's own permission bits (None: gone meanwhile); noted when foreign."""
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if st.st_uid != uid:
            foreign.append(path)
        return stat.S_IMODE(st.st_mode)

    seen: set[Path] = set()
    for path in dirs:
        if path in seen:
            continue
        seen.add(path)
        bits = mode(path)
        if bits is not None and bits != DIR_MODE:
            bad_dirs.append(path)
    for path in _secret_files(layout):
        bits = mode(path)
        if bits is not None and bits & 0o077:
            bad_files.append(path)
    return bad_dirs, bad_files, foreign


async def check_permissions(ctx: Context) -> Finding:
    layout = ctx.layout
    if not layout.root.is_dir():
        return Finding(name="permissions", status="skip", finding="no data directory yet")
    bad_dirs, bad_files, foreign = await asyncio.to_thread(
        permission_problems, layout, os.geteuid()
    )
    if foreign:
        shown = ", ".join(str(p) for p in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        return Finding(
            name="permissions",
            status="fail",
            finding=f"{len(foreign)} path(s) not owned by {ctx.user}: {shown}",
            fix=f"sudo chown -R {ctx.user}: {shell_quote(layout.root)}",
        )
    if not bad_dirs and not bad_files:
        return Finding(
            name="permissions",
            status="ok",
            finding="data directories 0700, keys, config and databases 0600",
        )
    offending = [*bad_dirs, *bad_files]
    shown = ", ".join(str(p) for p in offending[:3]) + (" ..." if len(offending) > 3 else "")
    if len(offending) > MAX_LISTED_PATHS:
        fix = f"chmod -R go-rwx {shell_quote(layout.root)}"
        if bad_dirs:
            fix += " && chmod 700 " + " ".join(
                shell_quote(p) for p in _want_dirs(layout) if p.exists()
            )
    else:
        parts = []
        if bad_dirs:
            parts.append("chmod 700 " + " ".join(shell_quote(p) for p in bad_dirs))
        if bad_files:
            parts.append("chmod 600 " + " ".join(shell_quote(p) for p in bad_files))
        fix = " && ".join(parts)
    return Finding(
        name="permissions",
        status="fail",
        finding=f"{len(offending)} path(s) readable by others or not 0700: {shown}",
        fix=fix,
    )


# -- what root made in the homes --------------------------------------------------------


async def check_homes(ctx: Context) -> Finding:
    """Root in a sandbox can leave setuid binaries, device nodes and root-owned files in
    its bind-mounted home: on the host they are real (and the service account cannot
    remove them when it deletes the account)."""
    homes = ctx.layout.homes_dir
    if not await asyncio.to_thread(homes.is_dir):
        return Finding(name="homes", status="skip", finding="no homes yet")
    problems = await asyncio.to_thread(home_problems, homes, os.geteuid(), HOME_LIMIT)
    if not problems:
        return Finding(
            name="homes",
            status="ok",
            finding="no foreign-owned, setuid/setgid or device files in the homes",
        )
    names = {uid: name for uid, name, _ in ctx.registry_users or []}
    shown = "; ".join(
        f"{names.get(p.user_id, p.user_id)}: ~/{p.path} ({p.detail})" for p in problems[:3]
    ) + (" ..." if len(problems) > 3 else "")
    kinds = {p.kind for p in problems}
    where = " ".join(
        shell_quote(homes / user_id) for user_id in sorted({p.user_id for p in problems})
    )
    fixes = []
    if "device" in kinds:
        fixes.append(f"sudo find {where} -xdev \\( -type b -o -type c \\) -delete")
    if "setid" in kinds:
        fixes.append(f"sudo find {where} -xdev -type f -perm /6000 -exec chmod ug-s {{}} +")
    if "foreign" in kinds:
        # -h: change links themselves; a planted link must not hand /etc to the member.
        fixes.append(f"sudo chown -hR {ctx.user}: {where}")
    return Finding(
        name="homes",
        status="fail" if kinds & {"device", "setid"} else "warn",
        finding=f"{len(problems)}{'+' if len(problems) >= HOME_LIMIT else ''} file(s) in "
        f"the homes made by root in a sandbox: {shown}",
        fix=" && ".join(fixes),
    )


def _existing_ancestor(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


async def check_disk(ctx: Context) -> Finding:
    where = await asyncio.to_thread(_existing_ancestor, ctx.layout.root)
    usage = await asyncio.to_thread(shutil.disk_usage, where)
    found = f"{_size(usage.free)} free on the filesystem of {where}"
    fix = f"free some space there (du -sh {shell_quote(where)}/* shows what is large)"
    if usage.free < DISK_FAIL:
        return Finding(name="disk", status="fail", finding=found + " (under 200 MiB)", fix=fix)
    if usage.free < DISK_WARN:
        return Finding(name="disk", status="warn", finding=found + " (under 2 GiB)", fix=fix)
    return Finding(name="disk", status="ok", finding=found)


# -- databases ---------------------------------------------------------------------------


def quick_check(path: Path) -> tuple[bool, str]:
    """`PRAGMA quick_check` on a plain database opened read-only: (ok, detail)."""
    import apsw

    uri = "file:" + str(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    try:
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        return False, f"cannot open: {exc}"
    from skald.store.snapshot import pragma_check

    try:
        return pragma_check(conn)
    except apsw.Error as exc:
        return False, f"{type(exc).__name__.removesuffix('Error').lower() or 'error'}: {exc}"
    finally:
        conn.close()


def registry_users(path: Path) -> list[tuple[str, str, bool]]:
    """(id, username, encrypted) of every account, read from the registry read-only."""
    import apsw

    conn = apsw.Connection(
        "file:" + str(path) + "?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        rows = conn.execute("SELECT id, username, encrypted FROM users ORDER BY username")
        return [(str(r[0]), str(r[1]), bool(r[2])) for r in rows]
    finally:
        conn.close()


def _newest_archive(backups: Path) -> Path | None:
    try:
        archives = [p for p in backups.glob("skald-backup-*.tar") if p.is_file()]
    except OSError:
        return None
    return max(archives, key=lambda p: p.stat().st_mtime, default=None)


def _restore_fix(ctx: Context) -> str:
    archive = _newest_archive(ctx.layout.backups_dir)
    stop, restore = ctx.stop_command(), ctx.skald("restore")
    if archive is not None:
        joiner = " && " if ctx.runs_as_service else ", then "
        return f"{stop}{joiner}{restore} {shell_quote(archive)}"
    return (
        f"{stop}, then {restore} ARCHIVE with your last backup "
        f"(none in {ctx.layout.backups_dir}; update snapshots are in its pre-update-* folders)"
    )


async def check_registry(ctx: Context) -> Finding:
    path = ctx.layout.system_db
    if not await asyncio.to_thread(path.is_file):
        return Finding(name="registry", status="skip", finding="no registry database yet")
    ok, detail = await asyncio.to_thread(quick_check, path)
    if not ok:
        return Finding(
            name="registry",
            status="fail",
            finding=f"{path} fails its integrity check: {detail}",
            fix=await asyncio.to_thread(_restore_fix, ctx),
        )
    with contextlib.suppress(Exception):
        ctx.registry_users = await asyncio.to_thread(registry_users, path)
    return Finding(name="registry", status="ok", finding=f"{path.name}: quick_check ok")


async def check_member_databases(ctx: Context) -> Finding:

    users = ctx.registry_users
    ctx.serving = await asyncio.to_thread(is_serving, ctx.layout)
    if ctx.serving:
        try:
            answer = await ops_request(
                ctx.layout, ctx.config, "GET", "/api/ops/integrity", timeout=120
            )
        except SkaldError as exc:
            return no_answer(ctx, "databases", "fail", exc)
        if answer is not None:
            dbs = answer.get("databases") or []
            bad = [d for d in dbs if not d.get("ok")]
            if bad:
                shown = "; ".join(f"{d.get('name')}: {d.get('detail')}" for d in bad[:3])
                return Finding(
                    name="databases",
                    status="fail",
                    finding=f"{len(bad)} of {len(dbs)} open database(s) fail: {shown}",
                    fix=await asyncio.to_thread(_restore_fix, ctx),
                )
            owners = [d for d in dbs if d.get("name") != "registry"]
            locked = ""
            if users is not None:
                n_locked = max(0, len(users) - len(owners))
                locked = f"; {n_locked} locked, not checked" if n_locked else ""
            return Finding(
                name="databases",
                status="ok",
                finding=f"the running server checked the registry and {len(owners)} "
                f"unlocked member database(s){locked}",
            )
    if users is None:
        return Finding(name="databases", status="skip", finding="no accounts to check")
    plain = [(uid, name) for uid, name, enc in users if not enc]
    locked_count = len(users) - len(plain)

    def check_plain() -> list[tuple[str, str]]:
        bad: list[tuple[str, str]] = []
        for uid, name in plain:
            path = ctx.layout.user_db(uid)
            if not path.is_file():
                continue  # created on first use
            ok, detail = quick_check(path)
            if not ok:
                bad.append((name, detail))
        return bad

    bad = await asyncio.to_thread(check_plain)
    if bad:
        shown = "; ".join(f"{name}: {detail}" for name, detail in bad[:3])
        return Finding(
            name="databases",
            status="fail",
            finding=f"{len(bad)} member database(s) fail their integrity check: {shown}",
            fix=await asyncio.to_thread(_restore_fix, ctx),
        )
    tail = (
        f"; {locked_count} encrypted, checked only by a running server once unlocked"
        if locked_count
        else ""
    )
    return Finding(
        name="databases",
        status="ok",
        finding=f"{len(plain)} unencrypted member database(s) ok{tail}",
    )


# -- backups: the schedule's result and the restore drill ---------------------------------


def _age(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"


def _backup_warning(ctx: Context, finding: str) -> Finding:
    """No recent backup: the fix is always the same, a new one tested at once."""
    return Finding(
        name="backups", status="warn", finding=finding, fix=ctx.skald("backup", "--drill")
    )


async def check_backups(ctx: Context) -> Finding:
    """A household's backups: a recent archive in the chosen folder, and the last restore
    drill passed. Read from the files the server's scheduler keeps (no server needed)."""
    from datetime import UTC, datetime

    from skald.features.backups.scheduler import archives, load_settings, load_state

    layout = ctx.layout
    if not await asyncio.to_thread(layout.system_db.is_file):
        return not_applicable("backups", "nothing to back up yet (no registry)")
    try:
        settings = await asyncio.to_thread(load_settings, layout)
    except SkaldError as exc:
        return Finding(
            name="backups",
            status="fail",
            finding=str(exc),
            fix=f"rm {shell_quote(layout.root / 'backup-schedule.json')} (back to the defaults)",
        )
    state = await asyncio.to_thread(load_state, layout)
    folder = settings.target(layout)
    found = await asyncio.to_thread(archives, folder)
    drill = state.last_drill
    if drill is not None and not drill.ok:
        where = f" of {drill.archive}" if drill.archive else ""
        return Finding(
            name="backups",
            status="fail",
            finding=f"the restore drill{where} failed on {drill.at}: {drill.error}",
            fix=f"{ctx.skald('backup', '--drill')} (a new backup, tested at once)",
        )
    last = state.last_backup
    failed = f"the last scheduled one failed: {last.error}" if last and not last.ok else ""
    if not found:
        why = f" ({failed})" if failed else ""
        return _backup_warning(ctx, f"no backup in {folder} yet{why}")
    newest_at, newest = found[0]
    age = (datetime.now(UTC) - newest_at).total_seconds()
    if settings.enabled and age > 2 * settings.every_hours * 3600:
        why = f"; {failed}" if failed else ""
        return _backup_warning(ctx, f"the newest backup, {newest.name}, is {_age(age)} old{why}")
    tested = "not restore-tested yet" if drill is None else f"restore drill passed on {drill.at}"
    schedule = (
        f"every {settings.every_hours} h" if settings.enabled else "schedule off (by hand only)"
    )
    return Finding(
        name="backups",
        status="ok",
        finding=f"{len(found)} backup(s) in {folder}, newest {_age(age)} old; {tested}; {schedule}",
    )
