"""Connectors (MCP servers): catalogue, grants, secrets, marketplace and their routes
(`skald/connectors/`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.store.migrations import Feature

if TYPE_CHECKING:
    import msgspec

    from skald.core.runtime import Runtime
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.connectors.store import OWNER_FEATURE, REGISTRY_FEATURE

    return [REGISTRY_FEATURE] if schema == "registry" else [OWNER_FEATURE]


@hookimpl
def skald_config_sections() -> dict[str, type[msgspec.Struct]]:
    from skald.connectors.service import ConnectorsConfig

    return {"connectors": ConnectorsConfig}


@hookimpl
def skald_routes() -> list[Any]:
    from skald.connectors import routes

    return list(routes.ROUTES)


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.connectors.service import ADMIN_CONNECTORS, CONNECTORS_USE

    return [CONNECTORS_USE, ADMIN_CONNECTORS]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    from skald.connectors.service import Connectors, ConnectorsConfig, attach

    connectors = Connectors(runtime, runtime.config.section("connectors", ConnectorsConfig))
    attach(runtime, connectors)
    return []
