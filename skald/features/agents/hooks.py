"""Agents: the page listing the agents a member can talk to."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.agents import routes as agents

    return list(agents.ROUTES)


WEB = FeatureWeb(__file__, "agents")
WEB.page("/agents", "AgentsPage", capability="chat", order=45, icon="sparkle")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
