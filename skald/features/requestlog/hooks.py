"""The request log: a member's own model requests (metadata), a detail page, and the
administrators' counts per provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald.plugins import hookimpl
from skald.plugins.specs import Page, WebFiles, feature_folder

if TYPE_CHECKING:
    from skald.core.model_select import Outcome
    from skald.plugins.facade import Member
    from skald.store.migrations import Feature


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    from skald.features.requestlog.payloads import OWNER_SCHEMA
    from skald.features.requestlog.store import SCHEMA

    return {"registry": [SCHEMA], "owner": [OWNER_SCHEMA]}.get(schema, [])


@hookimpl
def skald_routes() -> list[Any]:
    from skald.features.requestlog.routes import ROUTES

    return list(ROUTES)


@hookimpl
def skald_pages() -> list[Page]:
    return [
        Page(
            path="/requests",
            title="nav.requests",
            order=56,
            module="plugins/requestlog/requests.js",
            component="RequestsPage",
            icon="list",
            testid="nav-requests",
            full_only=True,
            say_not_allowed=True,
            sub="requestId",
        )
    ]


@hookimpl
def skald_web_files() -> list[WebFiles]:
    return [WebFiles("requestlog", feature_folder(__file__, "requestlog"))]


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
