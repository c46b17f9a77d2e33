"""Usage: the hourly aggregate of model requests, the charts' numbers, spending caps.

Rule: the aggregate is written by a trigger in the registry (store.py), the caps are
checked at every turn's start (caps.py), the figures are counts, never content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(registry=("skald.features.usage.store:SCHEMA",))


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.usage.health import dashboard_health
    from skald.features.usage.routes import ROUTES

    return [*ROUTES, dashboard_health]


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    import os

    from skald.features.usage.caps import CapGate
    from skald.features.usage.stats import StatsCache
    from skald.features.usage.store import UsageStore
    from skald.features.usage.updates import UpdateCheck

    return [
        CapGate(UsageStore(server.db), server.notifications.notify),
        StatsCache(),
        UpdateCheck(os.environ),
    ]


@hookimpl
async def skald_turn_starting(member: Member, conversation_id: str) -> None:
    from skald.features.usage.caps import CapGate

    gate = member.server.state(CapGate, None)
    if gate is not None:
        # member.role is the role this turn read (UserRuntime.turn_setup reads it first).
        await gate.check(member.id, member.role.name, member.timezone())


WEB = FeatureWeb(__file__, "usage")
WEB.page("/usage", "UsagePage", order=55, icon="plugins/usage/chart.svg", full_only=True)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
