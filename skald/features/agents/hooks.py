"""Agents: the page listing the agents a member can talk to."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page, WebFiles, feature_folder


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.agents import routes as agents

    return list(agents.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/agents",
            title="nav.agents",
            capability="chat",
            order=45,
            module="plugins/agents/agents.js",
            component="AgentsPage",
            icon="sparkle",
            testid="nav-agents",
            say_not_allowed=True,
        )
    ]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    # The page modules in agents/web/ and the translations in agents/i18n/ beside this module.
    return [WebFiles("agents", feature_folder(__file__, "agents"))]
