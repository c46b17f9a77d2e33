"""What can go wrong talking to a model, and whether trying another model may help.

Every `LlmError` has a `kind`: a short code for the member's plain sentence (the
product translates it; see `skald/core/plain_errors.py`), while the message keeps the
technical detail for the log and administrators. Trap: the kind is derived from the
HTTP status when the raiser gave none, so a new failure path should name its kind
rather than rely on the status.
"""

from __future__ import annotations

import re
from typing import Literal

from skald.errors import SkaldError

# Worth trying again (or the next model): rate limits, provider trouble, timeouts.
RETRIABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})

ErrorKind = Literal[
    "unreachable",  # no connection (refused, DNS, network down)
    "timeout",  # connected, then silence past the provider's silence timeout
    "interrupted",  # the answer broke off (connection dropped, stream ended early)
    "overloaded",  # busy, rate-limited, overloaded (429, 503, 529, and such 400s)
    "auth",  # the key was refused or has no access (401, 403)
    "billing",  # no credit left (402)
    "not_found",  # the model id is unknown (404)
    "context_overflow",  # the conversation is too long for the model
    "bad_request",  # the request was refused as invalid (400, 422...)
    "server_error",  # the provider's own failure (5xx)
    "no_model",  # nothing is set up (or enabled) to answer
    "no_capable_model",  # no enabled model can handle this message (a picture)
    "background_limit",  # a member's unattended runs asked too often this minute
    "model_error",  # anything else the provider reported
]


def kind_for_status(status: int | None) -> ErrorKind:
    if status is None:
        return "model_error"
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "billing"
    if status == 404:
        return "not_found"
    if status in (408, 504):
        return "timeout"
    if status == 413:
        return "context_overflow"
    if status in (429, 503, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    if 400 <= status < 500:
        return "bad_request"
    return "model_error"


class LlmError(SkaldError):
    code = "llm_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retriable: bool,
        kind: ErrorKind | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retriable = retriable
        self.kind: ErrorKind = kind or kind_for_status(status)


def every_model_failed(last: LlmError, models: str = "model") -> LlmError:
    """The error after falling back through every model (`models`: what they were, e.g.
    "speech model"): retriable, as another moment may go better, and with the last
    failure's status and kind, which is what the member is told."""
    return LlmError(
        f"every {models} failed; the last said: {last}",
        status=last.status,
        retriable=True,
        kind=last.kind,
    )


# Some providers answer 400 (or 413/422) for what is not the request's fault. Matched
# against the whole error body (message and code), case-insensitively. Documented in
# docs/dev/agent-loop.md ("Provider errors"); add a pattern there and here together.
CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded"  # OpenAI's code
    r"|maximum context length"  # OpenAI, vLLM, OpenRouter: "This model's maximum context length is"
    r"|prompt is too long"  # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    r"|exceeds? the (?:available )?context"  # llama.cpp: "the request exceeds the available context size"
    r"|exceed_context_size"  # llama.cpp's error type
    r"|context (?:window|size|length) (?:exceeded|is too small|overflow)"
    r"|input (?:is )?too long|too many (?:input )?tokens",
    re.IGNORECASE,
)
OVERLOADED = re.compile(
    r"overloaded"  # Anthropic's overloaded_error (some proxies send it with 400)
    r"|server is busy|service (?:is )?(?:temporarily )?unavailable|temporarily unavailable"
    r"|no (?:available )?capacity|at capacity|too many requests|rate.?limit",
    re.IGNORECASE,
)
_MISUSED_STATUSES = frozenset({400, 413, 422})


def error_for_status(status: int, provider: str, detail: str, body: str = "") -> LlmError:
    """401/403/404/422 and other 4xx are the caller's fault: never retried or fallen back,
    except a 400/413/422 whose body says overload (retriable: the next model may answer)
    or context overflow (not retriable; the loop compacts and asks again once)."""
    message = f"{provider} answered {status}: {detail[:300]}"
    if status in _MISUSED_STATUSES:
        text = f"{detail}\n{body}"
        if CONTEXT_OVERFLOW.search(text):
            return LlmError(message, status=status, retriable=False, kind="context_overflow")
        if OVERLOADED.search(text):
            return LlmError(message, status=status, retriable=True, kind="overloaded")
    retriable = status in RETRIABLE_STATUSES or status >= 500
    return LlmError(message, status=status, retriable=retriable)
