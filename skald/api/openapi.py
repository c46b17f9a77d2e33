"""What the OpenAPI document says about errors.

Every error the API returns is an `ErrorBody` (`{"error": {"code", "message"}}`), so the
document must say so for every status an operation can answer with; otherwise clients
(and the schema fuzzer in the tests) would expect Litestar's own error shape.

The statuses all routes share follow from how a route is declared, and `document_errors`
adds them once the app is built: 401 unless the route is public (deny by default), 403
for guarded routes and for writes (CSRF token, same-origin check), 400 when the route
takes input, 404 when its path names something (`/api/users/{user_id}`). The statuses
only some routes produce (409, 429, a 404 for an id in the body, a 401 from a public
sign-in) are declared on the route itself with `responses=errors(...)`.

"Takes input" is what Litestar itself parses from the request for the route, and so can
refuse with a 400: a body (`data`, `body`), a path, query, header or cookie parameter,
the handler's own or one its dependencies (`Provide`, at any layer) ask for. Litestar's
model of the route says so once the routes are registered, which is why this runs on the
built app: an injected parameter (`server`, `member`, `rt`, `me`, ...) is never input,
whatever its name. Trap: a route that reads the body itself (`request.body()`, a stream,
a form) takes no input in that sense and declares its 400 with `errors(400)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.routes import HTTPRoute

from skald.api.schemas import ErrorBody
from skald.api.security import UNSAFE_METHODS, is_public

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar._kwargs import KwargsModel

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

# The reserved parameters that carry the body (`request`, `state`, `headers`, ... do not:
# they hand over the connection, and nothing in them is validated).
BODY_KWARGS = frozenset({"data", "body"})


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """Document `statuses` as answered with an `ErrorBody`."""
    return {
        status: ResponseSpec(
            data_container=ErrorBody, description=DESCRIPTIONS[status], generate_examples=False
        )
        for status in statuses
    }


def _takes_input(kwargs: KwargsModel) -> bool:
    """Whether Litestar reads anything from the request for the route (and so may refuse
    it with a 400); dependencies' own parameters are merged into `kwargs` already."""
    return bool(
        kwargs.expected_path_params
        or kwargs.expected_query_params
        or kwargs.expected_header_params
        or kwargs.expected_cookie_params
        or kwargs.expected_form_data
        or kwargs.expected_msgpack_data
        or BODY_KWARGS & kwargs.expected_reserved_kwargs
    )


def shared_statuses(handler: HTTPRouteHandler, *, takes_input: bool, names: bool) -> set[int]:
    """The error statuses that follow from the route's declaration alone; `takes_input`:
    Litestar parses something from the request; `names`: the path has a parameter."""
    statuses = set()
    if not is_public(handler):
        statuses.add(401)
    if handler.guards or UNSAFE_METHODS & set(handler.http_methods):
        statuses.add(403)
    if takes_input:
        statuses.add(400)
    if names:
        statuses.add(404)
    return statuses


def document_errors(app: Litestar) -> None:
    """List in the OpenAPI responses of every route of `app` (once it is built, before its
    document is) every error the route can answer with.

    Statuses the route declares itself take precedence over the shared ones. A handler
    registered on several paths is documented once, with what any of its paths takes.
    """
    handlers: dict[int, tuple[HTTPRouteHandler, bool, bool]] = {}
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler, kwargs in route.route_handler_map.values():
            _, takes_input, names = handlers.get(id(handler), (handler, False, False))
            handlers[id(handler)] = (
                handler,
                takes_input or _takes_input(kwargs),
                names or bool(route.path_parameters),
            )
    for handler, takes_input, names in handlers.values():
        if not handler.resolve_include_in_schema():
            continue
        shared = shared_statuses(handler, takes_input=takes_input, names=names)
        # The registered handler is Litestar's copy: the module's handler stays as declared.
        handler.responses = {**errors(*sorted(shared)), **(handler.responses or {})}
