"""Every failure becomes `{"error": {"code", "message"}}` with an honest status.

Bad input is always a 4xx that says what was wrong; a 500 only ever means a bug, and
then the person sees a calm sentence while the log gets the details.
"""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from skald.api.invalid_input import sentence
from skald.api.schemas import ErrorBody, ErrorDetail
from skald.core.kdf_pool import KdfBusyError
from skald.core.throttle import ThrottledError
from skald.errors import (
    AccountInactiveError,
    AuthenticationError,
    ConflictError,
    DatabaseClosedError,
    DiskFullError,
    InvalidInputError,
    LimitReachedError,
    NotFoundError,
    QuotaExceededError,
    RetryLaterError,
    SkaldError,
    StorageError,
)
from skald.files.router import PathDeniedError
from skald.log import get_logger

log = get_logger("skald.api")

_SKALD_STATUS: list[tuple[type[SkaldError], int]] = [
    (PathDeniedError, 403),
    (ThrottledError, 429),
    (KdfBusyError, 503),
    (NotFoundError, 404),
    (ConflictError, 409),
    (InvalidInputError, 400),
    (AuthenticationError, 401),
    (AccountInactiveError, 403),
    (DatabaseClosedError, 401),
    (StorageError, 503),
    (QuotaExceededError, 413),
    (DiskFullError, 507),
    (LimitReachedError, 429),
]

_HTTP_CODES = {
    400: "invalid_input",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
    507: "disk_full",
}


class ApiError(HTTPException):
    """An HTTP error with our own error code (e.g. `csrf`, `wrong_password`)."""

    def __init__(
        self, status_code: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail=message, status_code=status_code, headers=headers)
        self.code = code


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(
        ErrorBody(error=ErrorDetail(code=code, message=message)),
        status_code=status,
        media_type=MediaType.JSON,
        headers=headers,
    )


def _skald_error(_: Request[Any, Any, Any], exc: SkaldError) -> Response[Any]:
    status = next((s for cls, s in _SKALD_STATUS if isinstance(exc, cls)), 400)
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RetryLaterError) else None
    return error_response(status, exc.code, str(exc), headers)


def _validation_message(exc: ValidationException) -> str:
    """What was wrong, as sentences (skald/api/invalid_input.py): the page shows it."""
    extra = exc.extra if isinstance(exc.extra, list) else []
    parts = [
        sentence(str(item.get("key") or ""), str(item.get("message") or ""))
        for item in extra
        if isinstance(item, dict)
    ]
    return " ".join(dict.fromkeys(parts)) or sentence("", str(exc.detail))


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if isinstance(exc, ValidationException):
        return error_response(400, "invalid_input", _validation_message(exc))
    code = exc.code if isinstance(exc, ApiError) else _HTTP_CODES.get(exc.status_code, "error")
    detail = str(exc.detail)
    if exc.status_code == 400 and detail.startswith("JSON is malformed"):
        detail = sentence("", detail)  # the decoder's byte offsets mean nothing on a page
    if exc.status_code >= 500:
        log.error("server error", status=exc.status_code, detail=exc.detail)
    headers = {
        k: v
        for k, v in (exc.headers or {}).items()
        if k.lower() in ("allow", "retry-after", "cache-control")
    }
    return error_response(exc.status_code, code, detail, headers or None)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.error(
        "unhandled error", path=request.url.path, error=f"{type(exc).__name__}: {exc}", exc_info=exc
    )
    return error_response(
        HTTP_500_INTERNAL_SERVER_ERROR,
        "internal_error",
        "something went wrong on the server; it has been logged",
    )


def _recursion(request: Request[Any, Any, Any], exc: RecursionError) -> Response[Any]:
    # The JSON decoder gives up on absurdly nested bodies (`[[[[...` thousands deep) with a
    # RecursionError, not a decode error: that is bad input. Any other recursion is a bug.
    if "deserializ" in str(exc):
        return error_response(400, "invalid_input", "The request is nested too deeply.")
    return _unexpected(request, exc)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    SkaldError: _skald_error,
    HTTPException: _http_error,
    RecursionError: _recursion,
    Exception: _unexpected,
}
