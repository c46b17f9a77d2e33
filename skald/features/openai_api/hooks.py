"""`/v1/models` and `/v1/chat/completions` for OpenAI clients, and their table."""

from __future__ import annotations

from typing import Any

from skald.plugins import hookimpl
from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.openai_api.threads import FEATURE

    return [FEATURE] if schema == "owner" else []


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.openai_api.routes import ROUTES

    return ROUTES
