"""The errors the OpenAPI document lists for every route (skald/api/openapi.py): a 400
only where the request carries input Litestar reads (a body, a path or query
parameter), or where the route reads its body itself and says so. Injected parameters
(`server`, `member`, `rt`, a group's `me`, whatever their name) are not input: the
routes moved onto the Server/Member facade documented a 400 they never answer."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery

from skald.api.app import create_app
from skald.api.openapi import document_errors
from skald.core.runtime import Runtime
from skald.features.accounts.users import create_user, list_users

# Routes that read the body themselves (no input Litestar parses) and declare their 400.
READS_BODY = {
    "POST /api/plugins",  # a multipart form of wheels
    "POST /api/voice/transcribe",  # the raw audio
    "POST /v1/chat/completions",  # OpenAI's JSON, decoded by the route
}


def _operations(runtime: Runtime) -> dict[str, dict[str, Any]]:
    doc = create_app(runtime).openapi_schema.to_schema()
    return {
        f"{method.upper()} {path}": operation
        for path, item in doc["paths"].items()
        for method, operation in item.items()
    }


def _errors(operation: dict[str, Any]) -> set[str]:
    """The statuses documented as Skald's `ErrorBody` (Litestar adds a 400 of its own
    shape to any operation with parameters; ours must replace it)."""
    return {
        status
        for status, response in operation["responses"].items()
        if response.get("content", {}).get("application/json", {}).get("schema")
        == {"$ref": "#/components/schemas/ErrorBody"}
    }


def _takes_input(operation: dict[str, Any]) -> bool:
    return bool(operation.get("requestBody") or operation.get("parameters"))


async def test_a_400_is_documented_exactly_where_the_request_carries_input(
    runtime: Runtime,
) -> None:
    operations = _operations(runtime)
    assert len(operations) > 200, len(operations)
    never_answered = [
        label
        for label, operation in operations.items()
        if "400" in operation["responses"]
        and not _takes_input(operation)
        and label not in READS_BODY
    ]
    assert not never_answered, "\n".join(sorted(never_answered))
    undocumented = [
        label
        for label, operation in operations.items()
        if "400" not in _errors(operation) and (_takes_input(operation) or label in READS_BODY)
    ]
    assert not undocumented, "\n".join(sorted(undocumented))


async def test_facade_routes_without_input_do_not_document_a_400(runtime: Runtime) -> None:
    operations = _operations(runtime)
    # `server` only; `member` only; both (no body, no parameter).
    for label in ("GET /api/users", "GET /api/inbox", "GET /api/reports"):
        assert "400" not in operations[label]["responses"], label
        assert "401" in _errors(operations[label]), label  # the shared statuses stay
    # With input, on the same facade: the 400 stays.
    assert "400" in _errors(operations["POST /api/users"])
    assert "400" in _errors(operations["GET /api/requests/{request_id}"])  # via `rid`


async def test_the_modules_handlers_stay_as_declared(runtime: Runtime) -> None:
    """The document is written on Litestar's registered copies, never on the module's."""
    assert list_users.responses is None
    declared = create_user.responses
    assert declared is not None
    assert set(declared) == {409}
    create_app(runtime)
    create_app(runtime)
    assert list_users.responses is None
    assert create_user.responses is declared
    assert set(declared) == {409}


def test_injected_is_what_the_app_provides_not_a_list_of_names() -> None:
    """Any name given with `Provide`, at any layer, is injected; what a dependency itself
    reads from the request (here a query parameter) is input of the route."""

    async def provide_thing() -> int:
        return 1

    async def provide_page(page: FromQuery[int]) -> int:
        return page

    @get("/plain", sync_to_thread=False)
    def plain(thing: NamedDependency[int]) -> int:
        return thing

    @get("/paged", sync_to_thread=False, dependencies={"paged": Provide(provide_page)})
    def paged(paged: NamedDependency[int]) -> int:
        return paged

    @post("/named/{item_id:str}", sync_to_thread=False)
    def named(item_id: FromPath[str], thing: NamedDependency[int]) -> None:
        return None

    app = Litestar([plain, paged, named], dependencies={"thing": Provide(provide_thing)})
    document_errors(app)
    doc = app.openapi_schema.to_schema()["paths"]
    assert set(doc["/plain"]["get"]["responses"]) == {"200", "401"}
    assert _errors(doc["/paged"]["get"]) == {"400", "401"}
    assert _errors(doc["/named/{item_id}"]["post"]) == {"400", "401", "403", "404"}
