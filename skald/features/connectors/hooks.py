"""Connectors (MCP servers): catalogue, grants, secrets, marketplace and their routes
(`skald/features/connectors/`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.features.connectors.supervisor import ConnectorInstance
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(
    registry=("skald.features.connectors.store:REGISTRY_FEATURE",),
    owner=("skald.features.connectors.store:OWNER_FEATURE",),
)


skald_config_sections = lazy.config_section(
    "connectors", "skald.features.connectors.service:ConnectorsConfig"
)


skald_routes = lazy.routes("skald.features.connectors.routes")


WEB = FeatureWeb(__file__, "connectors")
WEB.page("/connectors", "ConnectorsPage", capability="connectors.use", order=42, icon="tool")
WEB.page(
    "/admin/marketplace",
    "MarketplacePage",
    module="connectors.js",
    capability="admin.connectors",
    order=135,
    icon="archive",
)
WEB.page(
    "/admin/sign-in-providers",
    "SignInProvidersPage",
    module="providers.js",
    capability="admin.connectors",
    order=136,
    icon="key",
)
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


skald_capabilities = lazy.capabilities(
    "skald.features.connectors.service:CONNECTORS_USE",
    "skald.features.connectors.service:ADMIN_CONNECTORS",
)


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    from skald.features.connectors.service import Connectors, ConnectorsConfig

    return [Connectors(server, server.section("connectors", ConnectorsConfig))]


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    from skald.features.connectors.service import Connectors

    return [ServiceSpec("connectors", server.state(Connectors).supervisor.run_forever, order=60)]


@hookimpl
def skald_health_details(server: Server) -> dict[str, Any] | None:
    """What running connectors keep of their servers' tool lists, per member."""
    from skald.features.connectors.service import Connectors

    connectors = server.state(Connectors, None)
    if connectors is None:
        return None
    members = []
    for owner, (count, size) in sorted(connectors.supervisor.retained().items()):
        member = server.member(owner)
        name = member.user.username if member is not None else None
        members.append(
            {"user_id": owner or None, "username": name, "instances": count, "retained_bytes": size}
        )
    return {
        "connectors": {
            "instances": sum(m["instances"] for m in members),
            "retained_bytes": sum(m["retained_bytes"] for m in members),
            "members": members,  # user_id None: the household's own instances
        }
    }


@hookimpl
def skald_member_services(member: Member) -> list[ServiceSpec]:
    from skald.features.connectors.service import Connectors

    connectors = member.server.state(Connectors, None)
    if connectors is None:  # a member unlocked at boot, before the server's state
        return []
    sup = connectors.supervisor
    return [ServiceSpec("connectors", lambda: sup.member_loop(member), order=60)]


def _instances(member: Member) -> tuple[dict[str, ConnectorInstance], int] | None:
    from skald.features.connectors.service import CONNECTORS_USE, Connectors

    connectors = member.server.state(Connectors, None)
    if connectors is None or not member.can(CONNECTORS_USE):
        return None
    sup = connectors.supervisor
    names = sup.wanted.get(member.id, set())
    if not names:  # nothing switched on: `tools.py` (and the MCP client) stay unimported
        return {}, connectors.config.catalogue_above
    from skald.features.connectors.tools import member_instances

    return member_instances(sup, member.id, names), connectors.config.catalogue_above


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    found = _instances(member)
    if found is None:
        return None
    if not found[0]:
        return []  # what `tools_for` answers for no instances
    from skald.features.connectors.read_notification import ReadNotification
    from skald.features.connectors.tools import tools_for

    # `read_notification` reads what event triage told them (their own database), offered
    # with their connectors (no schema sent to members who have none: above).
    return [*tools_for(found[0], member, found[1]), ReadNotification(member.db)]


skald_system_agents = lazy.built_with_server("skald.features.connectors.triage:EventTriage")


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "MCP_LIST": "the connectors the member switched on (skald/features/connectors/tools.py)"
    }


@hookimpl
def skald_prompt_blocks(member: Member) -> dict[str, str]:
    found = _instances(member)
    if found is None or not found[0]:
        return {"MCP_LIST": ""}  # what `prompt_block` makes of no instances
    from skald.features.connectors.tools import prompt_block
    from skald.features.connectors.triage import PREFERENCES_PROMPT

    block = prompt_block(found[0], found[1])
    # With connectors comes event triage: how to keep user-memory/notifications.md.
    return {"MCP_LIST": f"{block}\n\n{PREFERENCES_PROMPT}" if block else ""}
