"""The request log: a member's own model requests (metadata), a detail page, and the
administrators' counts per provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl, lazy
from skald.plugins.specs import FeatureWeb

if TYPE_CHECKING:
    from skald.core.model_select import Outcome
    from skald.plugins.facade import Member


skald_migrations = lazy.migrations(
    registry=("skald.features.requestlog.store:SCHEMA",),
    owner=("skald.features.requestlog.payloads:OWNER_SCHEMA",),
)


skald_routes = lazy.routes("skald.features.requestlog.routes")


WEB = FeatureWeb(__file__, "requestlog")
WEB.page("/requests", "RequestsPage", order=56, icon="list", full_only=True, sub="requestId")
skald_pages = WEB.skald_pages
skald_web_files = WEB.skald_web_files


@hookimpl
async def skald_request_recorded(member: Member, request_id: int, outcome: Outcome) -> None:
    """On the member's opt-in: what was sent and what came back, into their own database."""
    from skald.features.requestlog.payloads import Payloads

    headers = {
        "content-type": "application/json",
        "authorization": "(the API key: never stored)",
        "x-model": outcome.model.model,
    }
    response = {
        "outcome": outcome.outcome,
        "text": outcome.text,
        "tool_calls": list(outcome.calls),
        "error": None if outcome.error is None else str(outcome.error)[:2000],
    }
    await Payloads(member.db).keep(request_id, headers, outcome.request, response)
