"""Request log routes: the caller's own requests and one of them; administrators' counts
per provider (never content, never a member's rows)."""

from __future__ import annotations

import time

from litestar import get, put
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, JSONBody

from skald.api.deps import requires
from skald.api.openapi import errors
from skald.core.llm_service import ADMIN_MODELS_CAP
from skald.errors import InvalidInputError, NotFoundError
from skald.features.requestlog.payloads import Payload, Payloads, PayloadSettings
from skald.features.requestlog.store import ProviderCount, RequestItem, RequestLog
from skald.plugins.facade import Member, Server  # Litestar reads the routes' annotations

MAX_PAGE = 200


@get("/api/requests", responses=errors(400))
async def my_requests(
    member: NamedDependency[Member],
    before: FromQuery[int | None] = None,
    limit: FromQuery[int] = 50,
) -> list[RequestItem]:
    """The caller's model requests, newest first (`before`: an id, for the next page)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit is between 1 and {MAX_PAGE}")
    if before is not None and not -(2**63) <= before < 2**63:  # SQLite could not bind it
        raise InvalidInputError("before is the id of a request in this list")
    return await RequestLog(member.server.db).mine(member.id, before, limit)


def _request_id(request_id: FromPath[int]) -> int:
    """The `{request_id}` of a path, as the `rid` dependency: an id past SQLite's
    integers cannot name a row (and would overflow the query), so it is not found."""
    if not 1 <= request_id < 2**63:
        raise NotFoundError(f"no request {request_id}")
    return request_id


# Bound once: every route with `{request_id}` takes `rid`, the checked id.
RID = {"rid": Provide(_request_id, sync_to_thread=False)}


@get("/api/requests/{request_id:int}", responses=errors(404), dependencies=RID)
async def my_request(rid: NamedDependency[int], member: NamedDependency[Member]) -> RequestItem:
    """One of the caller's requests; another member's is not found."""
    return await RequestLog(member.server.db).one(member.id, rid)


@get("/api/admin/requests", guards=[requires(ADMIN_MODELS_CAP)])
async def provider_counts(server: NamedDependency[Server]) -> list[ProviderCount]:
    """The last 30 days per provider: requests and failures, counts only."""
    return await RequestLog(server.db).providers(time.time() - 30 * 86400)


@get("/api/requests/settings")
async def payload_settings(member: NamedDependency[Member]) -> PayloadSettings:
    return await Payloads(member.db).settings()


@put("/api/requests/settings", responses=errors(400))
async def save_payload_settings(
    data: JSONBody[PayloadSettings], member: NamedDependency[Member]
) -> PayloadSettings:
    """Keep (or stop keeping, deleting what was kept) the full requests and answers, in
    the caller's own encrypted database."""
    return await Payloads(member.db).save_settings(data)


@get("/api/requests/{request_id:int}/payload", responses=errors(404), dependencies=RID)
async def my_payload(rid: NamedDependency[int], member: NamedDependency[Member]) -> Payload:
    """What was sent and what came back, when the caller kept it; else not found."""
    await RequestLog(member.server.db).one(member.id, rid)  # theirs, or 404
    found = await Payloads(member.db).get(rid)
    if found is None:
        raise NotFoundError("this request's content was not kept")
    return found


ROUTES = [
    my_requests,
    my_request,
    provider_counts,
    payload_settings,
    save_payload_settings,
    my_payload,
]
