"""OpenAI's Chat Completions wire format: the request Skald reads, the answers and
chunks it writes, and errors in OpenAI's shape.

Rule: what the official client parses, exactly (`object`, `id`, `created`, `model`,
`choices[].index`, `finish_reason`, `usage` with `prompt_tokens`, `completion_tokens`,
`total_tokens`; errors `{"error": {"message", "type", "param", "code"}}`). Unknown
request fields are accepted and ignored, as OpenAI-compatible servers do: clients send
`temperature`, `top_p`, `n` and more that a Skald turn has no use for.

Trap: the error shape differs from the rest of the API (`{"error": {"code",
"message"}}`): only paths under `/v1` answer in it, through the router's own handlers.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from skald.log import get_logger

log = get_logger("skald.openai")


class ChatRequest(msgspec.Struct, kw_only=True):
    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    tool_choice: Any = None
    n: int | None = None


class OpenAIError(Exception):
    """A refusal answered in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or error_type(status)
        self.param = param
        self.code = code
        self.headers = headers


def error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        409: "conflict_error",
        413: "invalid_request_error",
        423: "locked_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")


# How `/v1` answers a failed turn or a refusal, by Skald's code: (HTTP status, OpenAI's
# error `type`), so OpenAI's clients raise what they would for OpenAI itself. The one
# table (docs/dev/api.md, section `/v1`; docs/connect.md): a spending cap or the storage quota
# is OpenAI's 429 `insufficient_quota` (with `x-should-retry: false`: retrying before
# the reset cannot help, and the official client obeys it); a rate limit is 429
# `rate_limit_exceeded` (retried); the request's own fault is 400; a plugin's policy
# refusal 403; the model service busy, missing or slow 503/504. A failed turn's code not
# named here is the model service behind Skald failing (unreachable, refusing Skald's
# key, breaking off, an unknown model...): 502 (`UPSTREAM`). A refusal raised before the
# turn whose code is not named keeps the status the rest of the API gives it.
FAILURES: dict[str, tuple[int, str]] = {
    "limit_reached": (429, "insufficient_quota"),
    "quota_exceeded": (429, "insufficient_quota"),
    "throttled": (429, "rate_limit_exceeded"),
    "background_limit": (429, "rate_limit_exceeded"),
    "invalid_input": (400, "invalid_request_error"),
    "context_overflow": (400, "invalid_request_error"),
    "no_capable_model": (400, "invalid_request_error"),
    "plugin_blocked": (403, "permission_error"),
    "overloaded": (503, "server_error"),
    "no_model": (503, "server_error"),
    "timeout": (504, "server_error"),
    "disk_full": (507, "server_error"),
    "internal": (500, "server_error"),
}
UPSTREAM = (502, "server_error")
NO_RETRY = frozenset({"insufficient_quota"})


def turn_failure(code: str | None) -> tuple[int, str]:
    """(HTTP status, OpenAI error type) of a failed turn's code (`Ended.code`)."""
    return FAILURES.get(code or "", UPSTREAM)


def retry_headers(kind: str) -> dict[str, str] | None:
    """`x-should-retry: false` for what a retry cannot mend (the official clients obey
    it; without it they retry a 429 twice by default)."""
    return {"x-should-retry": "false"} if kind in NO_RETRY else None


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape; `code` is always a string (Skald's code, or the type's), so
    the body is also the `{"error": {"code", "message"}}` every Skald error is."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code or kind}}


def completion_id() -> str:
    import secrets

    return "chatcmpl-" + secrets.token_hex(12)


def usage_of(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def completion(
    cid: str, model: str, content: str, finish: str, usage: dict[str, int]
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }


def chunk(
    cid: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    choices: bool = True,
) -> bytes:
    """One `data:` line of a stream (with `include_usage`, the last chunk has no choices)."""
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": (
            [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            if choices
            else []
        ),
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + msgspec.json.encode(body) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def comment(text: str) -> bytes:
    """An SSE comment: clients skip it; Skald's progress (a tool running) rides on it."""
    return b": " + " ".join(text.split()).encode() + b"\n\n"
