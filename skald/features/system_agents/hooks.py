"""System agents: the runner service, its run log and settings, the reports store, the
System agents and Reports pages, the `[system_agents]` config section, and the two
memory upkeep agents (private and household notes) with their suggestions' approvals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.features.system_agents.config import SystemAgentsConfig
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.llm.types import ToolCall
    from skald.plugins.facade import Server
    from skald.plugins.specs import SystemAgent


skald_migrations = lazy.migrations(
    registry=(
        "skald.features.system_agents.store:REGISTRY_FEATURE",
        "skald.features.system_agents.reports:REPORTS_FEATURE",
    ),
    owner=("skald.features.system_agents.store:OWNER_FEATURE",),
)


skald_config_sections = lazy.config_section(
    "system_agents", "skald.features.system_agents.config:SystemAgentsConfig"
)


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.system_agents.runner import SystemAgents

    return [SystemAgents(server, server.section("system_agents", SystemAgentsConfig))]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.system_agents.runner import SystemAgents

    return [ServiceSpec("system-agents", server.state(SystemAgents).run_forever, order=70)]


skald_routes = lazy.routes("skald.features.system_agents.routes")


WEB = FeatureWeb(__file__, "system_agents")
WEB.page(
    "/reports",
    "ReportsPage",
    say_not_allowed=False,
    order=37,
    icon="inbox",
    count="/api/reports/unread",
)
WEB.page("/system-agents", "SystemAgentsPage", say_not_allowed=False, order=38, icon="clock")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
def skald_system_agents(server: Server) -> list[SystemAgent]:
    from skald.features.system_agents.upkeep import MemoryUpkeep

    return [MemoryUpkeep.private(server), MemoryUpkeep.shared(server)]


@hookimpl
def skald_approval_facts(call: ToolCall, tool: Tool) -> list[str]:
    # A change accepted on the Reports page is asked for under a call id of its own
    # (`SUGGESTION_CALL`): the seeded rule on `@suggested` makes it wait for a person.
    # A model naming its call so only makes its own call ask: never less safe.
    from skald.approvals.rules import SUGGESTED
    from skald.features.system_agents.suggestions import SUGGESTION_CALL

    return [SUGGESTED] if call.id.startswith(SUGGESTION_CALL) else []
