"""The checks of a household's first setup: a model to talk to and a first backup.
With the doctor's own Docker and image checks (`checks_host`, reused, not copied) they
make the Overview's "to finish setting up" list (`SETUP_CHECKS`), so the page and
`skald doctor` never disagree about Docker and the image. (They are doctor checks in
form; adding them to `doctor.CHECKS` waits for the doctor's install-shape rework.)

Rule: like every check, read-only and offline (the registry is opened read-only, no
provider is called): "a model is set up and enabled", not "the model answers" (that is
the Models page's Test button).
Trap: the registry may not exist yet (before the first start): that is `skip`.
"""

from __future__ import annotations

import asyncio

import apsw

from skald.ops.checks_base import Check, Context, Finding
from skald.ops.checks_data import _newest_archive
from skald.ops.checks_host import check_docker, check_image

__all__ = ["SETUP_CHECKS", "check_backup", "check_models"]


def _enabled_models(path: str) -> int | None:
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = next(iter(conn.execute("SELECT count(*) FROM llm_models WHERE enabled=1")), None)
    except apsw.SQLError:  # no models table yet: not migrated
        return None
    finally:
        conn.close()
    return None if row is None else int(row[0])


async def check_models(ctx: Context) -> Finding:
    path = ctx.layout.system_db
    if not await asyncio.to_thread(path.is_file):
        return Finding(name="models", status="skip", finding="no registry database yet")
    count = await asyncio.to_thread(_enabled_models, str(path))
    if count is None:
        return Finding(name="models", status="skip", finding="the registry has no models yet")
    if count == 0:
        return Finding(
            name="models",
            status="warn",
            finding="no model is set up: the assistant cannot answer",
            fix="add a provider and a model in the web UI under Models",
        )
    return Finding(name="models", status="ok", finding=f"{count} model(s) enabled")


async def check_backup(ctx: Context) -> Finding:
    newest = await asyncio.to_thread(_newest_archive, ctx.layout.backups_dir)
    if newest is None:
        return Finding(
            name="backup",
            status="warn",
            finding=f"no backup yet in {ctx.layout.backups_dir}",
            fix="skald backup",
        )
    return Finding(name="backup", status="ok", finding=f"latest backup: {newest.name}")


# What the Overview's checklist runs, in this order (the image check reads the Docker
# client the Docker check leaves in the context).
SETUP_CHECKS: list[Check] = [check_models, check_docker, check_image, check_backup]
