"""`notify`: the assistant sends the member a notification (their bell, their phone).

The tool only ever reaches the member it works for: it is built per member with a
function bound to their id. Links are in-app paths (`/tasks`), never a URL elsewhere, so
a prompt-injected assistant cannot send the member to a page it chose.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from skald.agent.tools import Tool, ToolContext, ToolResult
from skald.errors import InvalidInputError
from skald.llm.types import ToolSpec

__all__ = ["MAX_BODY", "MAX_TITLE", "NotifyTool"]

MAX_TITLE = 200
MAX_BODY = 2000

Notify = Callable[..., Awaitable[object]]

_SPEC = ToolSpec(
    name="notify",
    description=(
        "Notify the user (the bell and their devices, even away from this chat) of what "
        "they asked to be told about, never for ordinary replies. Short title; `link`: an "
        "app page such as /tasks; `urgency` high only for what cannot wait."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE},
            "body": {"type": "string", "maxLength": MAX_BODY},
            "link": {"type": "string", "maxLength": 500},
            "urgency": {"type": "string", "enum": ["low", "normal", "high"]},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
)


class NotifyTool(Tool):
    spec = _SPEC
    kind = "other"
    concurrency_safe = False
    chat_only = True  # a helper's result comes back to the chat, which tells the member
    rerun_on_recovery = False  # a second notification after a crash is worse than none

    def __init__(self, notify: Notify) -> None:
        self._notify = notify

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            await self._notify(
                title=str(args["title"]),
                body=str(args.get("body") or ""),
                link=args.get("link") or None,
                source="assistant",
                urgency=str(args.get("urgency") or "normal"),
            )
        except InvalidInputError as exc:
            return ToolResult.error(str(exc))
        return ToolResult(content="The notification was sent.")
