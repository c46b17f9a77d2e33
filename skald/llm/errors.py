"""What can go wrong talking to a model, and whether trying another model may help."""

from __future__ import annotations

from skald.errors import SkaldError

# Worth trying again (or the next model): rate limits, provider trouble, timeouts.
RETRIABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class LlmError(SkaldError):
    code = "llm_error"

    def __init__(self, message: str, *, status: int | None = None, retriable: bool) -> None:
        super().__init__(message)
        self.status = status
        self.retriable = retriable

    @property
    def code_name(self) -> str:
        """What kind of failure this is, for the member's plain sentence."""
        return "model_error"


def error_for_status(status: int, provider: str, detail: str) -> LlmError:
    """401/403/404/422 and other 4xx are the caller's fault: never retried or fallen back."""
    retriable = status in RETRIABLE_STATUSES or status >= 500
    return LlmError(
        f"{provider} answered {status}: {detail[:300]}", status=status, retriable=retriable
    )
