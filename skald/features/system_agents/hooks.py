"""System agents: the runner service, its run log and settings, the reports store, the
System agents and Reports pages, the `[system_agents]` config section, and the two
memory upkeep agents (private and household notes) with their suggestions' approvals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.features.system_agents.config import SystemAgentsConfig
from skald.features.system_agents.reports import REPORTS_FEATURE
from skald.features.system_agents.store import OWNER_FEATURE, REGISTRY_FEATURE
from skald.plugins import hookimpl
from skald.plugins.specs import FeatureWeb, lazy_routes

if TYPE_CHECKING:
    import msgspec

    from skald.agent.tools import Tool
    from skald.llm.types import ToolCall
    from skald.plugins.facade import Server
    from skald.plugins.specs import SystemAgent
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [REGISTRY_FEATURE, REPORTS_FEATURE] if schema == "registry" else [OWNER_FEATURE]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    return {"system_agents": SystemAgentsConfig}


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.system_agents.runner import SystemAgents

    return [SystemAgents(server, server.section("system_agents", SystemAgentsConfig))]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.system_agents.runner import SystemAgents

    return [ServiceSpec("system-agents", server.state(SystemAgents).run_forever, order=70)]


skald_routes = lazy_routes("skald.features.system_agents.routes")


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
