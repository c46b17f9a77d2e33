"""The conversation review: a system agent (`conversation-review`), its coverage and
audit tables, the lines it shows to the people it concerns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.features.review.store import REVIEW_FEATURE
from skald.plugins import hookimpl
from skald.plugins.specs import lazy_routes

if TYPE_CHECKING:
    from skald.plugins.facade import Server
    from skald.plugins.specs import SystemAgent
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [REVIEW_FEATURE] if schema == "registry" else []


@hookimpl
def skald_system_agents(server: Server) -> list[SystemAgent]:
    from skald.features.review.agent import ConversationReview

    return [ConversationReview(server)]


skald_routes = lazy_routes("skald.features.review.routes")
