"""The privacy self-check for the signed-in member (everyone, their own lines only)."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency

from skald.features.privacy.check import Fact, gather
from skald.plugins.facade import Member  # Litestar reads the route's annotations


@get("/api/privacy")
async def my_privacy(member: NamedDependency[Member]) -> list[Fact]:
    """Each line read from the files now: encryption, keys, readers, providers, backups."""
    server = member.server
    return await gather(server.db, server.layout, member.id, detail=True)


ROUTES = [my_privacy]
