"""`ask_user`: the assistant asks the member a question and waits for the answer.

The question becomes an Inbox item of kind `question` (its id is the call's id); the
answer, from any client, is the tool's result. A crash while waiting is harmless: the
call runs again on recovery (`rerun_on_recovery`), finds the same item and keeps
waiting; an answer given before recovery asked again is kept for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from skald.agent.subagent import root_of
from skald.agent.tools import Tool, ToolContext, ToolResult
from skald.errors import InvalidInputError, NotFoundError
from skald.llm.types import tool_spec
from skald.store.inbox import InboxStore

__all__ = ["AskUserTool"]

MAX_CHOICES = 10

_SPEC = tool_spec(
    "ask_user",
    "Ask the user a question (in their Inbox) when you cannot go on without their "
    "decision; the answer is the result. Offer `choices` for a few options.",
    {
        "question": {"type": "string", "minLength": 1, "maxLength": 2000},
        "choices": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "maxItems": MAX_CHOICES,
        },
    },
    ["question"],
)


class AskUserTool(Tool):
    spec = _SPEC
    kind = "other"
    concurrency_safe = False
    rerun_on_recovery = True  # asking again finds the same Inbox item

    def __init__(self, inbox: InboxStore, changed: Callable[[], Awaitable[None]]) -> None:
        self.inbox = inbox
        self.changed = changed
        self._waiting: dict[str, asyncio.Future[str]] = {}
        self._ahead: dict[str, str] = {}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        question = str(args["question"]).strip()
        choices = [str(c) for c in args.get("choices") or []] or None
        if not question:
            return ToolResult.error("The question is empty.")
        # A helper's question goes under the conversation it works for (its own id
        # names no stored conversation), tied to the call there that started it.
        conversation_id, parent_call = root_of(ctx.conversation_id)
        if await self.inbox.add(
            call_id=ctx.call_id,
            conversation_id=conversation_id,
            parent_call=parent_call,
            kind="question",
            tool=self.name,
            arguments=args,
            reason=question,
            choices=choices,
        ):
            await self.changed()
        answer = self._ahead.pop(ctx.call_id, None)
        if answer is None:
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._waiting[ctx.call_id] = future
            try:
                answer = await future
            finally:
                self._waiting.pop(ctx.call_id, None)
        if await self.inbox.close(ctx.call_id, "answered"):
            await self.changed()
        return ToolResult(content=f"The user answered: {answer}")

    async def wait_answer(self, item_id: str) -> str:
        """Wait for the answer to an Inbox question another feature asked (a connector's
        elicitation); the same `answer` route resolves it."""
        ahead = self._ahead.pop(item_id, None)
        if ahead is not None:
            return ahead
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[item_id] = future
        try:
            return await future
        finally:
            self._waiting.pop(item_id, None)

    async def answer(self, item_id: str, text: str) -> None:
        """A person's answer to a pending question (from any client)."""
        item = await self.inbox.get(item_id)
        if item is None:
            raise NotFoundError("no pending question with that id")
        if item.kind != "question":
            raise InvalidInputError("that item is an approval: approve or reject it")
        if not text.strip():
            raise InvalidInputError("the answer is empty")
        future = self._waiting.get(item_id)
        if future is not None and not future.done():
            future.set_result(text)
        else:  # recovery has not asked again yet: keep it for when it does
            self._ahead[item_id] = text
        if await self.inbox.close(item_id, "answered"):
            await self.changed()
