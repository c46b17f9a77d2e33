"""The privacy self-check: each line a fact read from the real files at the moment it is
shown, a plain sentence and how it was checked.

Rule: nothing here trusts a setting where a file can be read. "Encrypted" is the owner
database's first 16 bytes (a plain SQLite file starts with `SQLite format 3\\0`; an
SQLCipher file with a random salt); "kept key" is the sealed file under
`data/kept-keys/`; the key wraps are the registry's rows, their Argon2 cost read from
the wrap itself; providers come from the request log's metadata; backups from the
archives on disk (the doctor's own check).
Trap: `detail=False` (an administrator asking about someone else, `skald privacy`) gives
counts only: no provider or connector names of theirs.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import msgspec

from skald.config import Config
from skald.ops.checks_base import Context
from skald.ops.checks_setup import check_backup
from skald.paths import DataLayout
from skald.store.database import Database

SQLITE_HEADER = b"SQLite format 3\x00"
DAYS = 30


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # encryption | keys | kept_key | notes | admins | connectors | providers | backup
    status: str  # good | warn | info
    sentence: str
    how: str


def _header(path: Path) -> bytes | None:
    try:
        with path.open("rb") as f:
            return f.read(16)
    except FileNotFoundError:
        return None


def encryption(layout: DataLayout, user_id: str, wrap: dict[str, object] | None) -> Fact:
    path = layout.user_db(user_id)
    head = _header(path)
    where = f"{path.parent.name}/{path.name}"
    if head is None:
        return Fact(key="encryption", status="warn", sentence="Your database file was not found.",
                    how=f"Looked for {where}: it does not exist.")  # fmt: skip
    if head == SQLITE_HEADER:
        return Fact(
            key="encryption",
            status="warn",
            sentence="Your database is NOT encrypted: anyone who can read the server's files "
            "can read your conversations and notes.",
            how=f"Read the first 16 bytes of {where}: they are the plain SQLite header "
            "'SQLite format 3'.",
        )
    params = (wrap or {}).get("params") or {}
    kdf = (
        f"Argon2id with {int(params['memory_kib']) // 1024} MiB of memory, "  # type: ignore[index]
        f"{params['time_cost']} passes, {params['parallelism']} lanes"  # type: ignore[index]
        if params
        else "no password key found"
    )
    return Fact(
        key="encryption",
        status="good",
        sentence="Your database is encrypted: SQLCipher 4 (AES-256 in CBC mode with an "
        "HMAC-SHA512 check on every page) under a random 256-bit key of yours; that key "
        f"is itself locked by your password through {kdf}.",
        how=f"Read the first 16 bytes of {where}: not the SQLite header, as an encrypted "
        "file starts with a random salt. The key's cost was read from your password's "
        "key wrap in the registry.",
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
        Fact(
            key="kept_key",
            status="info" if is_kept else "good",
            sentence=(
                '"Work while I\'m signed out" is on: the server keeps your key, sealed with '
                "the server's own key, so your scheduled jobs run while you are away. "
                "Someone holding the whole data folder (or a full backup) could use it."
                if is_kept
                else '"Work while I\'m signed out" is off: when you sign out, the server '
                "forgets your key and nothing of yours can be read until you sign in."
            ),
            how=f"Looked for the sealed key file kept-keys/{user_id}.sealed: "
            + ("it exists." if is_kept else "there is none."),
        )
    )
    # Encrypted as the file header says, not as the account row says.
    encrypted = facts[0].status == "good"
    facts.extend(await _readers(db, user_id, detail=detail, encrypted=encrypted))
    facts.append(await _providers(db, user_id, detail=detail))
    facts.append(await _backup(layout, encrypted=encrypted))
    return facts


def _keys(wraps: dict[str, dict[str, object]]) -> Fact:
    holders = []
    if "password" in wraps:
        holders.append("your password")
    if "recovery" in wraps:
        holders.append("your recovery code")
    sentence = (
        f"Your key can be opened with {' and '.join(holders)}, and nothing else."
        if holders
        else "Your account has no key of its own: its data is not encrypted."
    )
    return Fact(
        key="keys",
        status="good" if holders else "warn",
        sentence=sentence,
        how="Listed your key wraps in the registry (kinds: "
        + (", ".join(sorted(wraps)) or "none")
        + "); each opens only with its secret.",
    )


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
    limits = (
        "they cannot read your conversations, notes or files: those are in your encrypted "
        "database, and only your key opens it"
        if encrypted
        else "your data is not encrypted, so someone with access to the server's files "
        "could read it"
    )
    connectors = (
        (
            f"Connectors you may use: {', '.join(names)}. "
            if detail
            else f"{len(names)} connector(s) granted. "
        )
        + "A connector sees only what the assistant sends it in a conversation of yours."
        if names
        else "No connector is granted to you."
    )
    return [
        Fact(
            key="notes",
            status="info",
            sentence=f"What you save in the household notes can be read by the {shared[0][0]} "
            "people whose role allows household notes; your own notes are yours only.",
            how="Counted the active accounts whose role holds 'memory.shared'.",
        ),
        Fact(
            key="admins",
            status="good" if encrypted else "warn",
            sentence=f"{admins[0][0]} administrator(s) can deactivate or delete your account "
            f"and see counts (usage, requests per provider); {limits}.",
            how="Counted the active accounts whose role holds 'admin.users', and read the "
            "database file's header (the first line).",
        ),
        Fact(
            key="connectors",
            status="info",
            sentence=connectors,
            how="Read your connector grants in the registry.",
        ),
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
        sentence = f"None of your messages went to a model service in the last {DAYS} days."
    elif detail:
        listed = ", ".join(f"{name} ({count} requests)" for name, count in rows)
        sentence = f"In the last {DAYS} days your messages went to: {listed}."
    else:
        sentence = f"In the last {DAYS} days their messages went to {len(rows)} provider(s)."
    return Fact(
        key="providers",
        status="info",
        sentence=sentence,
        how="Read the request log's metadata (which model, hence which provider) for "
        f"your requests of the last {DAYS} days; no message text is kept there.",
    )


async def _backup(layout: DataLayout, *, encrypted: bool) -> Fact:
    ctx = Context.create(layout, Config(), {})  # the check reads only the layout
    found = await check_backup(ctx)
    inside = (
        "Your database is copied as it is, still encrypted with your key; the archive "
        "itself is not encrypted (the household's names and settings in it are readable "
        "by whoever holds it)."
        if encrypted
        else "Your database is copied as it is, and it is not encrypted: whoever holds "
        "the archive can read it."
    )
    if found.status != "ok":
        return Fact(key="backup", status="warn", sentence="No backup has been taken yet.",
                    how=f"Looked for backup archives: {found.finding}.")  # fmt: skip
    return Fact(
        key="backup",
        status="good",
        sentence=f"Your data was last backed up in {found.finding.removeprefix('latest backup: ')}. {inside}",
        how=f"Looked for backup archives in {layout.backups_dir.name}/ (the newest by name).",
    )
