"""`generate_image`: a picture from the household's image models, saved in the
requester's own uploads of the conversation and shown in the chat.

The rule: a picture costs money on most providers, so the call declares the `@paid`
category and the approval rules decide on it like on any paid call (seeded: a person
approves); every request to an image model gets its usage row (`LlmService._media`).
The file goes through the member's own path router and storage budget, named after
the call (`uploads/<conversation>/picture-<call>.png`), so the chat finds it from the
call alone and another member's request can never reach it.

Trap: the bytes come from a remote server: the type is sniffed, and only the picture
types the chat shows are kept (anything else is an error, never a stored file).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from skald.agent.tools import PAID, Tool, ToolContext, ToolResult, Touches
from skald.core.uploads import IMAGE_TYPES, MAX_PICTURE_BYTES
from skald.files.mime import sniff
from skald.files.tools import write_within
from skald.llm.errors import LlmError
from skald.llm.types import ToolSpec

if TYPE_CHECKING:
    from skald.core.user_runtime import UserRuntime

SIZES: Final = ("256x256", "512x512", "1024x1024")
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def picture_path(conversation_id: str, call_id: str, mime: str = "image/png") -> str:
    """Where the picture of one call is stored, in the requester's home."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "", call_id)[:64] or "picture"
    return f"uploads/{conversation_id}/picture-{safe}.{_EXT.get(mime, 'png')}"


class GenerateImageTool(Tool):
    spec = ToolSpec(
        name="generate_image",
        description=(
            "Draw a picture from a description, with the household's image model. The "
            "picture is saved in the member's uploads and shown in the chat."
        ),
        parameters={
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What the picture shows."},
                "size": {"type": "string", "enum": list(SIZES)},
            },
            "required": ["prompt"],
        },
    )
    kind = "write"
    chat_only = True

    def __init__(self, member: UserRuntime) -> None:
        self.member = member

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches(categories=frozenset({PAID}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        prompt = str(args.get("prompt") or "").strip()
        if not prompt:
            return ToolResult.error("say what the picture should show (prompt)")
        size = str(args.get("size") or "1024x1024")
        if size not in SIZES:
            return ToolResult.error(f"size is one of {', '.join(SIZES)}")
        member = self.member
        try:
            data = await member.llm.generate_image(member.user.id, prompt, size)
        except LlmError as exc:
            return ToolResult.error(f"no picture: {exc}")
        mime = sniff(data[:64])
        if mime not in IMAGE_TYPES or len(data) > MAX_PICTURE_BYTES:
            return ToolResult.error("the image model answered something that is not a picture")
        path = picture_path(ctx.conversation_id, ctx.call_id, mime)
        budget = None if member.budget is None else await member.budget()
        found = member.router.writable(path)
        entry, _ = await asyncio.to_thread(write_within, budget, found, data)
        return ToolResult(
            content=f"Drew the picture and saved it as {path} ({entry.size} bytes); the "
            "member sees it in the chat.",
            metadata={"path": path, "mime": mime},
        )
