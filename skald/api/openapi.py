"""What the OpenAPI document says about errors.

Every error the API returns is an `ErrorBody` (`{"error": {"code", "message"}}`), so the
document must say so for every status an operation can answer with; otherwise clients
(and the schema fuzzer in the tests) would expect Litestar's own error shape.

The statuses all routes share follow from how a route is declared, and `document_errors`
adds them when the app is built: 401 unless the route is public (deny by default), 403
for guarded routes and for writes (CSRF token, same-origin check), 400 when the route
takes input, 404 when its path names something (`/api/users/{user_id}`). The statuses
only some routes produce (409, 429, a 404 for an id in the body, a 401 from a public
sign-in) are declared on the route itself with `responses=errors(...)`.
"""

from __future__ import annotations

import inspect
from copy import copy

from litestar.handlers import HTTPRouteHandler
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec

from skald.api.schemas import ErrorBody
from skald.api.security import UNSAFE_METHODS, is_public

DESCRIPTIONS = {
    400: "The request is invalid: malformed JSON, a missing, unknown or wrong field, "
    "or a value the server refuses.",
    401: "Not signed in, the session has ended, or the credentials are wrong.",
    403: "Refused: the role lacks the capability, the X-CSRF-Token header is missing or "
    "wrong, or the request came from another site.",
    404: "Nothing by that name or id.",
    409: "The request conflicts with the current state (a duplicate name, or a change "
    "that would lock the household out).",
    413: "The body is larger than the server accepts, or the write would pass the "
    "member's storage quota (`quota_exceeded`).",
    415: "The body is not of a type the endpoint takes (a recording must be audio).",
    429: "Too many failed attempts; the Retry-After header says when to try again.",
    502: "The model service failed; the message is a sentence a member can read.",
    503: "Something the request needs is unavailable (storage, a provider); try again later.",
    507: "The server's disk is nearly full: new writes are refused until space is freed.",
}

# Parameters filled in by Litestar or our dependencies, not by the caller (`me`, `mine`:
# the `Provide` dependencies of the chat and schedule route groups).
_INJECTED = frozenset(
    {"request", "rt", "socket", "state", "scope", "headers", "cookies", "me", "mine"}
)


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """Document `statuses` as answered with an `ErrorBody`."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody, description=DESCRIPTIONS[status], generate_examples=False
        )
        for status in statuses
    }


def _takes_input(handler: HTTPRouteHandler) -> bool:
    names = inspect.signature(handler.fn).parameters
    return any(name not in _INJECTED for name in names)


def shared_statuses(handler: HTTPRouteHandler) -> set[int]:
    """The error statuses that follow from the route's declaration alone."""
    statuses = set()
    if not is_public(handler):
        statuses.add(401)
    if handler.guards or UNSAFE_METHODS & set(handler.http_methods):
        statuses.add(403)
    if _takes_input(handler):
        statuses.add(400)
    if any("{" in path for path in handler.paths):
        statuses.add(404)
    return statuses


def document_errors(handler: BaseRouteHandler) -> BaseRouteHandler:
    """A copy of `handler` whose OpenAPI responses list every error it can answer with.

    Statuses the route declares itself take precedence over the shared ones.
    """
    if not isinstance(handler, HTTPRouteHandler):
        return handler
    documented = copy(handler)
    documented.responses = {
        **errors(*sorted(shared_statuses(handler))),
        **(handler.responses or {}),
    }
    return documented
