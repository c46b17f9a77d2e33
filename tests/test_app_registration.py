"""The app's route registration keeps Litestar's path -> method map instead of rebuilding
it at every handler (`skald/api/registration.py`): the kept map must be Litestar's own,
whatever the order of registration, merges of one path's methods and removals."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Router, delete, get, post, websocket
from litestar.connection import WebSocket
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath
from litestar.testing import AsyncTestClient
from litestar.utils.sync import AsyncCallable

from skald.api.app import create_app
from skald.api.registration import LinearLitestar, LinearRouter
from skald.core.runtime import Runtime


def _litestars_own(router: Router) -> dict[str, dict[str, Any]]:
    return dict(Router.route_handler_method_map.fget(router))  # type: ignore[attr-defined]


@get("/a")
async def read_a() -> str:
    return "a"


@post("/a")
async def write_a() -> str:
    return "a"


@delete("/a/{x:int}")
async def drop_a(x: FromPath[int]) -> None:
    return None


@get("/b/{x:int}")
async def read_b(x: FromPath[int]) -> str:
    return "b"


@websocket("/b/{x:int}")
async def live_b(socket: WebSocket[Any, Any, Any], x: FromPath[int]) -> None:
    await socket.close()


def test_the_built_app_keeps_exactly_litestars_map(runtime: Runtime) -> None:
    app = create_app(runtime)
    assert isinstance(app, LinearLitestar)
    kept = dict(app.route_handler_method_map)
    assert len(kept) > 100  # every feature's routes
    assert kept == _litestars_own(app)


def test_merged_methods_nested_routers_and_a_websocket_on_one_path_map_as_litestar_maps_them() -> (
    None
):
    handlers = [read_a, read_b, live_b, write_a, drop_a]
    inner = LinearRouter(path="/in", route_handlers=handlers)
    assert dict(inner.route_handler_method_map) == _litestars_own(inner)
    assert {"GET", "POST"} <= set(inner.route_handler_method_map["/in/a"])
    assert {"GET", "websocket"} <= set(inner.route_handler_method_map["/in/b/{x:int}"])
    plain = Litestar(route_handlers=[*handlers, Router(path="/in", route_handlers=handlers)])
    linear = LinearLitestar(route_handlers=[*handlers, inner])
    assert dict(linear.route_handler_method_map) == _litestars_own(linear)
    mapped = {path: set(methods) for path, methods in linear.route_handler_method_map.items()}
    assert mapped == {path: set(m) for path, m in _litestars_own(plain).items()}


def test_a_route_that_goes_away_leaves_the_map() -> None:
    router = LinearRouter(path="/", route_handlers=[read_a, write_a, read_b])
    assert "/b/{x:int}" in router.route_handler_method_map
    router.routes = [r for r in router.routes if r.path != "/b/{x:int}"]
    assert dict(router.route_handler_method_map) == _litestars_own(router)
    assert "/b/{x:int}" not in router.route_handler_method_map


def test_the_app_serializes_with_msgspec_alone_whatever_else_is_installed(
    runtime: Runtime,
) -> None:
    """The test tools install pydantic (and attrs); the shipped file has neither. The app
    must load the same plugins in both: no pydantic or attrs plugin (that building it
    imports no pydantic is checked in a fresh interpreter, `test_cold_start.py`)."""
    app = create_app(runtime)
    loaded = [type(p).__module__ for p in app.plugins]
    assert "litestar.plugins.core._msgspec" in loaded, loaded
    assert not [m for m in loaded if "pydantic" in m or "attrs" in m], loaded


def test_no_guard_or_dependency_of_any_route_runs_in_a_thread(runtime: Runtime) -> None:
    """Litestar runs a synchronous guard, and a synchronous dependency left with
    `sync_to_thread`, in its thread pool: a thread hop on every request of that route for
    work that reads memory (the capability check was one, on every guarded route). Every
    guard is async and every synchronous dependency says `sync_to_thread=False`."""
    app = create_app(runtime)
    threaded: set[str] = set()
    for route in app.routes:
        for handler in getattr(route, "route_handlers", [getattr(route, "route_handler", None)]):
            if handler is None:
                continue
            for guard in handler.resolve_guards():
                if isinstance(guard, AsyncCallable):
                    threaded.add(f"guard {guard.func!r} on {route.path}")
            for name, provide in handler.resolve_dependencies().items():
                if provide.has_sync_callable and provide.sync_to_thread:
                    threaded.add(f"dependency {name} on {route.path}")
    assert not threaded, sorted(threaded)


def test_every_routes_dependencies_are_resolved_one_after_the_other(runtime: Runtime) -> None:
    """Litestar resolves a handler's independent dependencies in an anyio task group, a
    task each (`me` and `server` on every chat route): the app splits them into batches
    of one, so no request spawns tasks for lookups in memory."""
    app = create_app(runtime)
    grouped: set[str] = set()
    models = 0
    for route in app.routes:
        pairs = getattr(route, "route_handler_map", {}).values()
        for model in [m for _, m in pairs] + [getattr(route, "handler_parameter_model", None)]:
            if model is None:
                continue
            models += 1
            if any(len(batch) > 1 for batch in model.dependency_batches):
                grouped.add(route.path)
    assert models > 100 and not grouped, sorted(grouped)


async def test_dependencies_resolved_in_turn_still_come_after_those_they_depend_on() -> None:
    """Batches of one keep Litestar's order: a dependency that takes two others gets
    both, and independent ones all arrive, whatever their names' order."""
    order: list[str] = []

    async def zeta() -> str:
        order.append("zeta")
        return "z"

    async def alpha() -> str:
        order.append("alpha")
        return "a"

    async def both(zeta: NamedDependency[str], alpha: NamedDependency[str]) -> str:
        order.append("both")
        return zeta + alpha

    @get("/deps")
    async def deps(
        both: NamedDependency[str], zeta: NamedDependency[str], alpha: NamedDependency[str]
    ) -> str:
        return f"{both}-{zeta}-{alpha}"

    app = LinearLitestar(
        route_handlers=[deps],
        dependencies={"zeta": Provide(zeta), "alpha": Provide(alpha), "both": Provide(both)},
    )
    batches = next(m for _, m in app.routes[0].route_handler_map.values()).dependency_batches
    assert [len(b) for b in batches] == [1, 1, 1]
    async with AsyncTestClient(app) as client:
        r = await client.get("/deps")
    assert r.text == "za-z-a"
    assert order == ["alpha", "zeta", "both"]
