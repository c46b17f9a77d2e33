"""The conversation review: a system agent (`conversation-review`), its coverage and
audit tables, the lines it shows to the people it concerns."""

from __future__ import annotations

from skald.plugins import lazy

skald_migrations = lazy.migrations(registry=("skald.features.review.store:REVIEW_FEATURE",))


skald_system_agents = lazy.built_with_server("skald.features.review.agent:ConversationReview")


skald_routes = lazy.routes("skald.features.review.routes")
