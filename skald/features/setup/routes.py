"""The household's settings and first setup: the instance settings (name, time zone,
language, the wizard's step; capability `admin.system` to change them) and the
Overview's "to finish setting up" list, made of the same checks as `skald doctor`
(`skald.ops.checks_setup.SETUP_CHECKS`).

Thin: parse, authorise, call `Server.instance` or the checks, serialise.
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Literal
from zoneinfo import available_timezones

import msgspec
from litestar import get, patch
from litestar.di import NamedDependency
from litestar.params import JSONBody

from skald.api.deps import requires
from skald.api.openapi import errors
from skald.ops.checks_base import Context, Status
from skald.permissions import ADMIN_SYSTEM
from skald.plugins.facade import Server  # Litestar reads the annotations

ADMIN = [requires(ADMIN_SYSTEM)]


class InstanceOut(msgspec.Struct, frozen=True, kw_only=True):
    household_name: str
    timezone: str  # the one in use (the administrator's, else the config file's)
    timezone_chosen: bool  # False: nobody chose one yet (the wizard proposes the browser's)
    language: str | None
    setup_step: str


class InstancePatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    household_name: Annotated[str, msgspec.Meta(max_length=80)] | None = None
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    language: Literal["en", "it", "fr"] | None = None
    setup_step: Literal["household", "model", "members", "done"] | None = None


class ChecklistItem(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # models, docker, image, backup
    status: Status
    finding: str
    fix: str | None


class Checklist(msgspec.Struct, frozen=True, kw_only=True):
    items: list[ChecklistItem]  # what still needs doing (ok and not-applicable left out)
    chat_ready: bool  # a model is set up: the chat can answer
    complete: bool  # nothing left to do


def _out(server: Server) -> InstanceOut:
    current = server.instance.current
    return InstanceOut(
        household_name=current.household_name,
        timezone=current.timezone or server.config.assistant.timezone,
        timezone_chosen=current.timezone is not None,
        language=current.language,
        setup_step=current.setup_step,
    )


@get("/api/instance")
async def get_instance(server: NamedDependency[Server]) -> InstanceOut:
    """The household's settings, for every signed-in member (the name, the greeting's
    time zone, the default language)."""
    return _out(server)


def _zones() -> list[str]:
    return sorted(available_timezones() | {"UTC"})


@get("/api/instance/timezones")
async def time_zones() -> list[str]:
    """Every time zone name the server accepts, the old ones too ("Asia/Calcutta",
    "US/Eastern"): browsers list only the current names, and may report an old one."""
    return await asyncio.to_thread(_zones)


@patch("/api/instance", guards=ADMIN, responses=errors(400))
async def patch_instance(
    data: JSONBody[InstancePatch], server: NamedDependency[Server]
) -> InstanceOut:
    await server.instance.update(
        household_name=data.household_name,
        timezone=data.timezone,
        language=data.language,
        setup_step=data.setup_step,
    )
    return _out(server)


@get("/api/setup/checklist", guards=ADMIN)
async def checklist(server: NamedDependency[Server]) -> Checklist:
    """What is still missing for a household to use Skald, by the doctor's own checks."""
    # The doctor's checks load at the first look, not in every server (docs/dev/web.md).
    from skald.ops.checks_setup import SETUP_CHECKS
    from skald.ops.doctor import run_checks

    ctx = Context.create(server.layout, server.config, dict(os.environ))
    ctx.serving = True
    report = await run_checks(ctx, SETUP_CHECKS)
    items = [
        ChecklistItem(name=f.name, status=f.status, finding=f.finding, fix=f.fix)
        for f in report.checks
        if f.status in ("warn", "fail")
    ]
    return Checklist(
        items=items,
        chat_ready=not any(i.name == "models" for i in items),
        complete=not items,
    )


ROUTES = [get_instance, time_zones, patch_instance, checklist]
