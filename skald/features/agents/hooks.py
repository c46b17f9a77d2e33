"""Agents: the page listing the agents a member can talk to."""

from __future__ import annotations

from skald.plugins import lazy
from skald.plugins.specs import FeatureWeb

skald_routes = lazy.routes("skald.features.agents.routes")


WEB = FeatureWeb(__file__, "agents")
WEB.page("/agents", "AgentsPage", capability="chat", order=45, icon="sparkle")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files
