"""`send_attachment`: the assistant sends one of the member's files to their Telegram chat.

Rule: the size is checked on the file's metadata before a byte is read (50 MB, the Bot
API's upload limit); a photo over 10 MB (Telegram's limit for photos) goes as a
document; notes are not files and cannot be sent. The chat is the one the conversation
is carried on, else the member's home chat.

Trap: the path is the model's: it is resolved through the member's own path router
(their mounts only, links checked), never joined onto a folder here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skald.agent.tools import FS_READ, Tool, ToolContext, ToolResult, Touches
from skald.errors import SkaldError
from skald.features.telegram.botapi import NetworkDown, TelegramError
from skald.files.router import Resolved
from skald.llm.types import tool_spec

if TYPE_CHECKING:
    from skald.features.telegram.bridge import Bridge
    from skald.plugins.facade import Member

__all__ = ["PHOTO_MAX", "SEND_MAX", "SendAttachmentTool"]

SEND_MAX = 50 * 1024 * 1024
PHOTO_MAX = 10 * 1024 * 1024
_PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


class SendAttachmentTool(Tool):
    spec = tool_spec(
        "send_attachment",
        "Send one of the member's files to their Telegram chat (at most 50 MB; "
        "notes cannot be sent). Pictures go as photos unless as_document is true.",
        {
            "path": {"type": "string", "description": "the file, as the file tools name it"},
            "caption": {"type": "string", "maxLength": 1024},
            "as_document": {"type": "boolean"},
        },
        ["path"],
    )
    kind = "read"

    def __init__(self, member: Member, bridge: Bridge) -> None:
        self.member = member
        self.bridge = bridge

    def touches(self, args: Mapping[str, Any]) -> Touches:
        return Touches(categories=frozenset({FS_READ}), paths=(args.get("path"),))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        api = self.bridge.api
        if api is None:
            return ToolResult(content="Telegram is not connected.", is_error=True)
        store = self.bridge.store
        chat = await store.chat_of(self.member.id, ctx.conversation_id.split("/", 1)[0])
        if chat is None:
            chat = await store.home_of(self.member.id)
        if chat is None:
            return ToolResult(content="The member has no paired Telegram chat.", is_error=True)
        try:
            found = self.member.router.resolve(str(args["path"]))
        except SkaldError as exc:
            return ToolResult(content=str(exc), is_error=True)
        if not isinstance(found, Resolved):
            return ToolResult(content="Notes cannot be sent; only files.", is_error=True)
        try:
            size = (await asyncio.to_thread(os.stat, found.path)).st_size
        except OSError:
            return ToolResult(content=f"{args['path']}: no such file", is_error=True)
        if size > SEND_MAX:
            return ToolResult(
                content=f"{args['path']} is {size / 1e6:.0f} MB; Telegram takes at most 50 MB.",
                is_error=True,
            )
        photo = found.path.suffix.lower() in _PHOTO_SUFFIXES
        as_photo = photo and not args.get("as_document") and size <= PHOTO_MAX
        data = await asyncio.to_thread(found.path.read_bytes)
        field = "photo" if as_photo else "document"
        params: dict[str, Any] = {"chat_id": chat}
        if args.get("caption"):
            params["caption"] = str(args["caption"])[:1024]
        try:
            await api.call(
                "sendPhoto" if as_photo else "sendDocument",
                params,
                files={field: (found.path.name, data)},
            )
        except (TelegramError, NetworkDown) as exc:
            return ToolResult(content=f"Telegram did not take the file: {exc}", is_error=True)
        return ToolResult(content=f"Sent {found.path.name} as a {field}.")
