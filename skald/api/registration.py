"""Route registration in linear time, for the app and its routers.

Rule: Litestar registers a handler by asking the router's path -> method map for the
handler's path (to merge the methods of one path into one route). Trap: that map is a
property that walks every route registered so far, so a start with ~300 handlers builds
it ~330 times over a growing list: a third of building the app (cProfile), and every
in-process test builds an app. Here the map is kept and only the paths of routes added
or replaced since the last look are computed again; the result is the same map
(`tests/test_app_registration.py` compares it with Litestar's own after a build).

Second rule, for the app only: its serialization plugin is msgspec's, nothing else.
Trap: Litestar adds its pydantic (and attrs) plugins whenever that package can be
imported, so what the server loads depended on what else was installed: the test tools
bring pydantic, and the development server imported it at every start (about 8 MiB of
memory and 200 ms of start that the shipped file never paid, so the benchmarks measured
something else than what households run). Every wire type here is a msgspec struct; a
plugin's routes take and return msgspec structs or plain types too.

Third rule: a handler's dependencies are resolved one after the other
(`resolve_in_turn`). Trap: Litestar resolves the independent dependencies of a handler
(`me` and `server` on every chat route) at once, in an anyio task group: a task per
dependency, each run by a later turn of the event loop. Skald's dependencies are
lookups in memory, so the tasks only cost: about 0.3 ms on a message's `POST`
(in-process timeline, 100 turns). A dependency that waits on I/O would now wait in
turn: do such work in the handler, not in a dependency.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from litestar import Litestar, Router
from litestar.routes import HTTPRoute, WebSocketRoute

if TYPE_CHECKING:
    from litestar._kwargs import KwargsModel
    from litestar.plugins import PluginProtocol
    from litestar.routes import ASGIRoute
    from litestar.types.internal_types import RouteHandlerMapItem

    AnyRoute = HTTPRoute | ASGIRoute | WebSocketRoute


def _entry(routes: list[AnyRoute], path: str) -> RouteHandlerMapItem:
    """What Litestar's map holds for one path (every route of that path merged)."""
    item: RouteHandlerMapItem = {}
    for route in routes:
        if route.path != path:
            continue
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                for method in handler.http_methods:
                    item[method] = handler
        elif isinstance(route, WebSocketRoute):
            item["websocket"] = route.route_handler
        else:
            item["asgi"] = route.route_handler
    return item


class _KeptMap:
    """The map of one router and the routes it was computed from."""

    def __init__(self) -> None:
        self.seen: list[AnyRoute] = []
        self.by_path: dict[str, RouteHandlerMapItem] = {}

    def current(self, routes: list[AnyRoute]) -> dict[str, RouteHandlerMapItem]:
        seen = self.seen
        same = list(map(operator.is_, routes, seen))  # by identity: routes may define ==
        if len(routes) >= len(seen) and all(same):  # the usual case: routes were added
            changed = {route.path for route in routes[len(seen) :]}
        elif len(routes) < len(seen) or any(
            new.path != old.path
            for kept, new, old in zip(same, routes, seen, strict=False)
            if not kept
        ):
            self.by_path = {}  # a route went away or moved: start over
            changed = {route.path for route in routes}
        else:  # routes replaced in place (a path's methods merged into a new route)
            changed = {route.path for kept, route in zip(same, routes, strict=False) if not kept}
            changed.update(route.path for route in routes[len(seen) :])
        for path in changed:
            self.by_path[path] = _entry(routes, path)
        self.seen = list(routes)
        return self.by_path


def _kept_map(router: LinearRouter | LinearLitestar) -> dict[str, RouteHandlerMapItem]:
    try:
        kept = router._kept
    except AttributeError:  # asked during the router's own construction
        kept = router._kept = _KeptMap()
    return kept.current(router.routes)


class LinearRouter(Router):
    """A `Router` whose registration does not rebuild its whole map at every handler."""

    __slots__ = ("_kept",)
    _kept: _KeptMap

    @property
    def route_handler_method_map(self) -> dict[str, RouteHandlerMapItem]:
        return _kept_map(self)


class LinearLitestar(Litestar):
    """The app, likewise (Litestar's app is a router too), with msgspec's plugin only."""

    __slots__ = ("_kept",)
    _kept: _KeptMap
    route_handler_method_map = LinearRouter.route_handler_method_map

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        resolve_in_turn(self.routes)

    @staticmethod
    def _get_default_plugins(plugins: list[PluginProtocol]) -> list[PluginProtocol]:
        from litestar.plugins.core import MsgspecDIPlugin

        return [*plugins, MsgspecDIPlugin()]


def resolve_in_turn(routes: list[AnyRoute]) -> None:
    """Each handler's dependencies as batches of one, in an order that keeps every
    dependency after those it depends on (see the module's third rule)."""
    models: list[KwargsModel] = []
    for route in routes:
        if isinstance(route, HTTPRoute):
            models.extend(model for _, model in route.route_handler_map.values())
        elif isinstance(route, WebSocketRoute) and route.handler_parameter_model is not None:
            models.append(route.handler_parameter_model)
    for model in models:
        model.dependency_batches = [
            {dependency}
            for batch in model.dependency_batches
            for dependency in sorted(batch, key=lambda d: d.key)
        ]
