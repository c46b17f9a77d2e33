"""The privacy self-check: each line a fact read from the real files at the moment it is
shown, a plain sentence and how it was checked.

Rule: nothing here trusts a setting where a file can be read. "Encrypted" is the owner
database's first 16 bytes (a plain SQLite file starts with `SQLite format 3\\0`; an
SQLCipher file with a random salt); "kept key" is the sealed file under
`data/kept-keys/`; the key wraps are the registry's rows, their Argon2 cost read from
the wrap itself; providers come from the request log's metadata; backups from the
archives on disk (the doctor's own check); supervision from the registry's links.
Each line is a `Line`: a key of this feature's `i18n/` and its values, never a sentence,
so the page says it in the reader's language and `skald privacy` in English through
`render` (one wording). Trap: keys are literal `_fact(key, status, say, how)` parts;
tests/test_privacy.py reads them from this source to check every language has them.
Trap: `detail=False` (an administrator asking about someone else, `skald privacy`) gives
counts only: no provider or connector names of theirs.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import msgspec

from skald.config import Config
from skald.ops.checks_base import Context
from skald.paths import DataLayout
from skald.plugins.specs import feature_folder
from skald.store import people
from skald.store.database import Database

SQLITE_HEADER = b"SQLite format 3\x00"
DAYS = 30
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Line(msgspec.Struct, frozen=True):
    """A sentence as a translation key of this feature and its values; a list value is
    a list of lines, shown joined ("A, B and C") in the reader's language."""

    key: str
    vars: dict[str, str | int | list[Line]] = {}


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # encryption | keys | kept_key | supervisors | supervising | notes | admins | ...
    status: str  # good | warn | info
    sentence: Line
    how: Line


def _names(names: list[str]) -> list[Line]:
    return [Line("privacy.name", {"name": n}) for n in names]


def words(locale: str = "en") -> dict[str, str]:
    """This feature's translations (the page's own), read from its `i18n/` folder."""
    path = feature_folder(__file__, "privacy") / "i18n" / f"{locale}.json"
    loaded: dict[str, str] = json.loads(path.read_text("utf-8"))
    return loaded


def render(line: Line, table: dict[str, str]) -> str:
    """The line in the language of `table` (the same rule as the page's `say`)."""
    values = {
        k: _join([render(i, table) for i in v], table) if isinstance(v, list) else str(v)
        for k, v in line.vars.items()
    }
    return _PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), table[line.key])


def _join(items: list[str], table: dict[str, str]) -> str:
    if len(items) < 2:
        return "".join(items)
    return render(
        Line("privacy.list_and", {"rest": ", ".join(items[:-1]), "last": items[-1]}), table
    )


def _header(path: Path) -> bytes | None:
    try:
        with path.open("rb") as f:
            return f.read(16)
    except FileNotFoundError:
        return None


def _fact(key: str, status: str, say: str, how: str, **values: str | int | list[Line]) -> Fact:
    """A fact whose sentence and detail are `privacy.<key>.<say>` / `.<how>`; both get
    every value (a translation uses the ones it needs)."""
    return Fact(
        key=key,
        status=status,
        sentence=Line(f"privacy.{key}.{say}", values),
        how=Line(f"privacy.{key}.{how}", values),
    )


def encryption(layout: DataLayout, user_id: str, wrap: dict[str, object] | None) -> Fact:
    path = layout.user_db(user_id)
    head = _header(path)
    where = f"{path.parent.name}/{path.name}"
    if head is None:
        return _fact("encryption", "warn", "missing", "missing_how", file=where)
    if head == SQLITE_HEADER:
        return _fact("encryption", "warn", "plain", "plain_how", file=where)
    params = (wrap or {}).get("params")
    if not isinstance(params, dict) or not params:
        return _fact("encryption", "good", "no_kdf", "good_how", file=where)
    return _fact(
        "encryption",
        "good",
        "good",
        "good_how",
        file=where,
        memory_mib=int(params["memory_kib"]) // 1024,
        passes=int(params["time_cost"]),
        lanes=int(params["parallelism"]),
    )


async def _rows(
    db: Database, sql: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    return await db.call(lambda c: [tuple(r) for r in c.execute(sql, params).fetchall()])


async def gather(db: Database, layout: DataLayout, user_id: str, *, detail: bool) -> list[Fact]:
    """Every line for this member, read now."""
    wraps = {
        str(k): json.loads(str(w))
        for k, w in await _rows(db, "SELECT kind, wrap FROM key_wraps WHERE user_id=?", (user_id,))
    }
    facts = [await asyncio.to_thread(encryption, layout, user_id, wraps.get("password"))]
    facts.append(_keys(wraps))
    kept = layout.root / "kept-keys" / f"{user_id}.sealed"
    is_kept = await asyncio.to_thread(kept.exists)
    facts.append(
        _fact("kept_key", "info", "on", "on_how", file=f"kept-keys/{user_id}.sealed")
        if is_kept
        else _fact("kept_key", "good", "off", "off_how", file=f"kept-keys/{user_id}.sealed")
    )
    facts.extend(await _supervision(db, user_id, detail=detail))
    # Encrypted as the file header says, not as the account row says.
    encrypted = facts[0].status == "good"
    facts.extend(await _readers(db, user_id, detail=detail, encrypted=encrypted))
    facts.append(await _providers(db, user_id, detail=detail))
    facts.append(await _backup(layout, encrypted=encrypted))
    return facts


def _keys(wraps: dict[str, dict[str, object]]) -> Fact:
    kinds = ", ".join(sorted(wraps)) or "-"
    if "password" in wraps and "recovery" in wraps:
        return _fact("keys", "good", "both", "how", kinds=kinds)
    if "password" in wraps:
        return _fact("keys", "good", "password", "how", kinds=kinds)
    if "recovery" in wraps:
        return _fact("keys", "good", "recovery", "how", kinds=kinds)
    return _fact("keys", "warn", "none", "how", kinds=kinds)


async def _supervision(db: Database, user_id: str, *, detail: bool) -> list[Fact]:
    """Who gets reports about this member's conversations, and about whose they get
    theirs: the registry's links now (`skald.store.people`)."""
    links = await people.supervision_of(db, user_id)
    above = [n.name for n in links.supervisors]
    below = [n.name for n in links.supervising]
    facts = [
        _fact("supervisors", "info", "none", "how")
        if not above
        else _fact("supervisors", "info", "named", "how", names=_names(above))
        if detail
        else _fact("supervisors", "info", "count", "how", count=len(above))
    ]
    if below:
        facts.append(
            _fact("supervising", "info", "named", "how", names=_names(below))
            if detail
            else _fact("supervising", "info", "count", "how", count=len(below))
        )
    return facts


async def _readers(db: Database, user_id: str, *, detail: bool, encrypted: bool) -> list[Fact]:
    shared = await _rows(
        db,
        "SELECT count(*) FROM users u JOIN role_capabilities rc ON rc.role = u.role "
        "WHERE rc.capability = 'memory.shared' AND u.active = 1",
    )
    admins = await _rows(
        db,
        "SELECT count(*) FROM users u JOIN role_capabilities rc ON rc.role = u.role "
        "WHERE rc.capability = 'admin.users' AND u.active = 1",
    )
    granted = await _rows(
        db, "SELECT connector FROM connector_grants WHERE user_id=? ORDER BY 1", (user_id,)
    )
    names = [str(r[0]) for r in granted]
    connectors = (
        _fact("connectors", "info", "none", "how")
        if not names
        else _fact("connectors", "info", "named", "how", names=_names(names))
        if detail
        else _fact("connectors", "info", "count", "how", count=len(names))
    )
    return [
        _fact("notes", "info", "shared", "how", count=int(str(shared[0][0]))),
        _fact("admins", "good", "encrypted", "how", count=int(str(admins[0][0])))
        if encrypted
        else _fact("admins", "warn", "plain", "how", count=int(str(admins[0][0]))),
        connectors,
    ]


async def _providers(db: Database, user_id: str, *, detail: bool) -> Fact:
    rows = await _rows(
        db,
        "SELECT coalesce(p.name, '(removed)'), count(*) FROM llm_requests r "
        "LEFT JOIN llm_models m ON m.id = r.model_id "
        "LEFT JOIN llm_providers p ON p.id = m.provider_id "
        "WHERE r.user_id = ? AND r.at >= ? GROUP BY 1 ORDER BY 1",
        (user_id, time.time() - DAYS * 86400),
    )
    if not rows:
        return _fact("providers", "info", "none", "how", days=DAYS)
    if not detail:
        return _fact("providers", "info", "count", "how", days=DAYS, count=len(rows))
    listed = [
        Line("privacy.providers.item", {"name": str(name), "count": int(str(count))})
        for name, count in rows
    ]
    return _fact("providers", "info", "named", "how", days=DAYS, providers=listed)


async def _backup(layout: DataLayout, *, encrypted: bool) -> Fact:
    from skald.ops.checks_setup import check_backup  # the doctor's checks: at first use

    ctx = Context.create(layout, Config(), {})  # the check reads only the layout
    found = await check_backup(ctx)
    folder = layout.backups_dir.name
    if found.status != "ok":
        return _fact("backup", "warn", "none", "none_how", folder=folder)
    archive = found.finding.removeprefix("latest backup: ")
    if encrypted:
        return _fact("backup", "good", "encrypted", "how", folder=folder, archive=archive)
    return _fact("backup", "good", "plain", "how", folder=folder, archive=archive)
