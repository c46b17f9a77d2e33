"""Connectors (MCP servers): catalogue, grants, secrets, marketplace and their routes
(`skald/features/connectors/`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.permissions import can
from skald.plugins import hookimpl
from skald.plugins.specs import Page
from skald.store.migrations import Feature

if TYPE_CHECKING:
    import msgspec

    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime
    from skald.features.connectors.supervisor import ConnectorInstance
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.connectors.store import OWNER_FEATURE, REGISTRY_FEATURE

    return [REGISTRY_FEATURE] if schema == "registry" else [OWNER_FEATURE]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    from skald.features.connectors.service import ConnectorsConfig

    return {"connectors": ConnectorsConfig}


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.connectors import routes

    return list(routes.ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(path="/connectors", title="nav.connectors", capability="connectors.use", order=42),
        Page(
            path="/admin/marketplace",
            title="nav.marketplace",
            capability="admin.connectors",
            order=135,
        ),
    ]


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.features.connectors.service import ADMIN_CONNECTORS, CONNECTORS_USE

    return [CONNECTORS_USE, ADMIN_CONNECTORS]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    from skald.features.connectors.service import Connectors, ConnectorsConfig, attach
    from skald.features.connectors.supervisor import Supervisor

    connectors = Connectors(runtime, runtime.config.section("connectors", ConnectorsConfig))
    connectors.supervisor = sup = Supervisor(connectors)
    attach(runtime, connectors)
    return [ServiceSpec("connectors", sup.run_forever, order=60)]


@hookimpl
def skald_health_details(runtime: Runtime) -> dict[str, Any] | None:
    """What running connectors keep of their servers' tool lists, per member."""
    from skald.features.connectors.service import of

    connectors = of(runtime.plugins)
    if connectors is None or connectors.supervisor is None:
        return None
    members = []
    for owner, (count, size) in sorted(connectors.supervisor.retained().items()):
        member = runtime.user_runtimes.get(owner)
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
def skald_member_services(member: UserRuntime) -> list[ServiceSpec]:
    from skald.features.connectors.service import of

    connectors = of(member.plugins)
    if connectors is None or connectors.supervisor is None:
        return []
    sup = connectors.supervisor
    return [ServiceSpec("connectors", lambda: sup.member_loop(member), order=60)]


def _instances(member: UserRuntime) -> tuple[dict[str, ConnectorInstance], int] | None:
    from skald.features.connectors.service import CONNECTORS_USE, of
    from skald.features.connectors.tools import member_instances

    connectors = of(member.plugins)
    if connectors is None or connectors.supervisor is None or not can(member.role, CONNECTORS_USE):
        return None
    sup = connectors.supervisor
    names = sup.wanted.get(member.user.id, set())
    return member_instances(sup, member.user.id, names), connectors.config.catalogue_above


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool] | None:
    from skald.features.connectors.tools import tools_for

    found = _instances(member)
    if found is None:
        return None
    return tools_for(found[0], member, found[1])


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "MCP_LIST": "the connectors the member switched on (skald/features/connectors/tools.py)"
    }


@hookimpl
def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    from skald.features.connectors.tools import prompt_block

    found = _instances(member)
    return {"MCP_LIST": "" if found is None else prompt_block(found[0], found[1])}
