"""Agents: the page listing the agents a member can talk to."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.agents import routes as agents

    return list(agents.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [Page(path="/agents", title="nav.agents", capability="chat", order=45)]
