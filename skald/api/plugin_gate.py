"""The gate in front of a plugin's routes: `/api/plugin/<id>/...`.

Rule: a plugin installed from a wheel serves its routes under `/api/plugin/<id>/` (one
named in config.toml or by a package keeps its own paths), behind sign-in and this gate, which reads the plugin's switch and the caller's grant
from the registry on every request: switched off is 404 at once, switched on is served
at once (no restart), and a member it is not granted to gets 403 (holders of
`plugin.manage` reach every plugin). Every answer says `Cache-Control: no-cache`.

Trap: the app is built once, so a plugin's routes exist from start to stop; only this
gate makes them come and go. A plugin that failed to load has no routes at all: the
catch-all of the Plugins feature answers for it (503 with the reason when switched on).
"""

from __future__ import annotations

from typing import Any

from litestar import Router
from litestar.connection import ASGIConnection
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import NotFoundException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from skald.api.security import principal_of
from skald.plugins.switches import PLUGIN_MANAGE
from skald.store.database import Database
from skald.store.plugins import PluginStore

NO_CACHE = {"Cache-Control": "no-cache"}


class PluginGate:
    def __init__(self, pid: str, db: Database) -> None:
        self.pid = pid
        self.store = PluginStore(db)

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
    ) -> None:
        principal = principal_of(connection)
        if not await self.store.enabled(self.pid):
            raise NotFoundException(f"no plugin {self.pid!r} is switched on", headers=NO_CACHE)
        if not principal.can(PLUGIN_MANAGE) and not await self.store.granted(
            self.pid, principal.user.id
        ):
            raise PermissionDeniedException("this plugin is not available to you", headers=NO_CACHE)

    def __deepcopy__(self, memo: dict[int, Any]) -> PluginGate:
        return self  # Litestar copies a router when it registers it; the database is one

    def __repr__(self) -> str:
        return f"plugin_gate({self.pid})"


def plugin_router(pid: str, prefix: str, handlers: list[Any], db: Database) -> Router:
    """The plugin's routes under `prefix` (`/api/plugin/<id>` for a wheel), behind its gate."""
    return Router(
        prefix,
        route_handlers=handlers,
        guards=[PluginGate(pid, db)],
        cache_control=CacheControlHeader(no_cache=True),
        opt={"plugin": pid},
    )
