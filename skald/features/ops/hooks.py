"""Ops: health, the event socket, the pages list, and the loopback ops channel."""

from __future__ import annotations

from skald.plugins import lazy

skald_routes = lazy.routes(
    "skald.features.ops.system",
    "skald.features.ops.pages",
    "skald.features.ops.routes",
)
