"""Ops: health, the event socket, the pages list, and the loopback ops channel."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl


@hookimpl
def skald_routes() -> list[Any]:
    from skald.api.routes import ops, pages, system

    return [*system.ROUTES, *pages.ROUTES, *ops.ROUTES]
