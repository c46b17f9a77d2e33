"""The interface every provider client implements (the agent loop depends on this only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from skald.llm.types import Request, StreamEvent


class ModelClient(Protocol):
    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Yield text deltas and complete tool calls, then exactly one `Finished`.

        Raises `LlmError` (with `retriable` set from the HTTP status or network failure)
        before or during the stream. Cancellation of the consuming task closes the HTTP
        response.
        """
        ...
