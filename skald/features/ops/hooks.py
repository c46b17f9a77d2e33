"""Ops: health, the event socket, the pages list, and the loopback ops channel."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.ops import pages, system
    from skald.features.ops import routes as ops

    return [*system.ROUTES, *pages.ROUTES, *ops.ROUTES]
