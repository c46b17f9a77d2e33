"""The Litestar application: routes, protections, static web UI, OpenAPI."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from litestar import Litestar, Request, Router
from litestar.config.compression import CompressionConfig
from litestar.datastructures import CacheControlHeader
from litestar.di import Provide
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.static_files import create_static_files_router

from skald import __version__
from skald.api.errors import EXCEPTION_HANDLERS
from skald.api.openapi import document_errors
from skald.api.ops_gate import OpsGate
from skald.api.plugin_gate import plugin_router
from skald.api.registration import LinearLitestar
from skald.api.security import AuthMiddleware, EdgeMiddleware, principal_of
from skald.api.web_parts import static_routers, translations
from skald.assets import asset_dir
from skald.core.runtime import Runtime
from skald.plugins.facade import Member, Server
from skald.plugins.web import Catalogues

OPENAPI_PATH = "/api/schema"


def create_app(
    runtime: Runtime, web_dir: Path | None = None, catalogues: Catalogues | None = None
) -> Litestar:
    """The Litestar app alone (tests drive it directly); `create_asgi` adds the edge.
    `catalogues`: the translations, read in a thread by the server (built here if None)."""

    async def provide_runtime() -> Runtime:
        return runtime

    web_root = web_dir or asset_dir("web")
    parts = runtime.plugins.web_files()
    merged = catalogues or Catalogues(web_root, parts)

    async def provide_catalogues() -> Catalogues:
        return merged

    async def provide_server() -> Server:
        return runtime.server  # what a feature's route uses (skald/plugins/facade.py)

    async def provide_member(request: Request[Any, Any, Any]) -> Member:
        # The signed-in caller as a feature sees them (their data must be unlocked).
        return await runtime.server.open_member(principal_of(request).user)

    static = create_static_files_router(
        path="/",
        directories=[web_root],
        html_mode=True,
        opt={"public": True},
        # The UI is not versioned by file name: revalidate every time (cheap with ETags).
        cache_control=CacheControlHeader(no_cache=True),
        include_in_schema=False,
    )
    # Every feature's routes, built-in or a plugin's, through the routes hook; a plugin
    # installed from a wheel serves under /api/plugin/<id>/ behind its gate.
    api = runtime.plugins.routes()
    db = runtime.core.registry.db
    gated = [
        plugin_router(pid, prefix, handlers, db)
        for pid, (prefix, handlers) in runtime.plugins.plugin_routes().items()
    ]
    app = LinearLitestar(
        route_handlers=[
            *api,
            *gated,
            translations,
            *static_routers(parts),
            static,
        ],
        dependencies={
            "rt": Provide(provide_runtime, use_cache=True),
            "catalogues": Provide(provide_catalogues, use_cache=True),
            "server": Provide(provide_server, use_cache=True),
            "member": Provide(provide_member),
        },
        middleware=[DefineMiddleware(AuthMiddleware, runtime=runtime)],
        exception_handlers=EXCEPTION_HANDLERS,
        compression_config=CompressionConfig(
            backend="gzip",
            minimum_size=1024,
            gzip_compress_level=6,
            # Files and ZIPs stream as they are: compressing media and archives again costs
            # the event loop 3-4x the throughput and saves nothing (bench_sandbox.py).
            # Server-sent events neither: gzip holds deltas back until its buffer fills.
            exclude=["^/api/file$", "^/api/files/zip$", "^/api/chat/stream$", "^/v1/"],
        ),
        openapi_config=OpenAPIConfig(
            title="Skald",
            version=__version__,
            # Public on purpose: the API's shape is no secret, and clients need it.
            # The document's own routes are not part of the API it describes.
            openapi_router=Router(
                path=OPENAPI_PATH, route_handlers=[], opt={"public": True}, include_in_schema=False
            ),
            render_plugins=[JsonRenderPlugin()],
        ),
        debug=False,
        logging_config=None,
    )
    document_errors(app)  # on the registered routes: what each reads from a request
    return app


def create_asgi(
    runtime: Runtime,
    web_dir: Path | None = None,
    ops_token: str | None = None,
    catalogues: Catalogues | None = None,
) -> Any:
    """The app behind the edge; `/api/ops/*` answers only with `ops_token` from loopback
    (and never when it is None)."""
    sandbox = runtime.config.sandbox
    # Sandboxes reach this host through their gateway: Skald itself refuses them.
    refused = None if sandbox.allow_skald_access else ipaddress.IPv4Network(sandbox.subnet_pool)
    return EdgeMiddleware(
        OpsGate(create_app(runtime, web_dir, catalogues), ops_token),
        runtime.config.log.access,
        refused,
    )
