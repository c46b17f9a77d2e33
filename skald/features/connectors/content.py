"""A connector tool's result as the model gets it: text, pictures, and saved files.

Rule: text blocks (and embedded text resources) are the text. A picture (an image block,
or an embedded blob that is one) whose bytes are a raster type the chat shows (png,
jpeg, gif, webp: sniffed, never the server's word) goes to the model as an image part,
within the chat's attachment limits (`skald.core.uploads`: 4 pictures, 10 MiB each,
20 MiB in all); a model not marked `vision` gets a note instead (`model_select`). A
picture or blob over `SAVE_ABOVE` is also saved in the member's uploads of the
conversation (`uploads/<conversation>/<server>-<call>-<n>.<ext>`, through their path
router and storage budget) and the text names the file; anything else is only named.

Traps:
- The server's base64 may be malformed and its MIME type may lie: decode strictly and
  sniff; a block that does not decode is named, never stored.
- The pictures are kept in the conversation's history like an attached picture is
  (base64 in the tool message), which is why only a few, bounded ones go in.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skald.core.uploads import IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGES_PER_TURN, MAX_INLINE_TOTAL
from skald.errors import SkaldError
from skald.files.mime import sniff
from skald.files.tools import write_within
from skald.llm.types import ImagePart
from skald.mcp.wire import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

if TYPE_CHECKING:
    from skald.plugins.facade import Member

# Larger pictures and blobs are also saved as files the member can open.
SAVE_ABOVE = 64 * 1024
_EXT = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "application/pdf": "pdf",
    "audio/mpeg": "mp3",
    "audio/wav": "wav",
}


@dataclass
class Rendered:
    text: str
    images: list[ImagePart] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)  # agent paths of the saved files


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def upload_path(conversation_id: str, server: str, call_id: str, n: int, mime: str) -> str:
    folder = re.sub(r"[^A-Za-z0-9_-]", "", conversation_id)[:64] or "connector"
    safe_call = re.sub(r"[^A-Za-z0-9_-]", "", call_id)[:48] or "call"
    ext = _EXT.get(mime, "bin")
    return f"uploads/{folder}/{server}-{safe_call}-{n}.{ext}"


class _Budget:
    """What is left of the attachment limits for one result."""

    def __init__(self) -> None:
        self.images = 0
        self.inlined = 0

    def take(self, size: int) -> bool:
        if self.images >= MAX_IMAGES_PER_TURN or size > MAX_IMAGE_BYTES:
            return False
        if self.inlined + size > MAX_INLINE_TOTAL:
            return False
        self.images += 1
        self.inlined += size
        return True


async def render(
    result: CallToolResult,
    *,
    server: str,
    member: Member,
    conversation_id: str,
    call_id: str,
) -> Rendered:
    out = Rendered(text="")
    parts: list[str] = []
    budget = _Budget()
    for n, block in enumerate(result.content):
        if isinstance(block, TextContent):
            parts.append(block.text)
            continue
        if isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
            continue
        if isinstance(block, EmbeddedResource) and isinstance(block.resource.text, str):
            parts.append(block.resource.text)
            continue
        data, claimed, kind = _binary(block)
        if data is None:
            parts.append(f"[{kind} {claimed}: not valid base64]")
            continue
        mime = sniff(data[:64])
        mime = mime if mime in IMAGE_TYPES else claimed
        note = f"[{kind} {mime}, {len(data)} bytes"
        if len(data) > SAVE_ABOVE:
            path = upload_path(conversation_id, server, call_id, n, mime)
            saved = await _save(member, path, data)
            note += f", saved as {path}" if saved is None else f", not saved: {saved}"
            if saved is None:
                out.saved.append(path)
        if mime in IMAGE_TYPES and budget.take(len(data)):
            out.images.append(ImagePart(media_type=mime, data_b64=base64.b64encode(data).decode()))
            note += ", shown to you"
        parts.append(note + "]")
    if not parts:
        parts.append(result.text())  # structured content only
    out.text = "\n".join(parts)
    return out


def _binary(block: ImageContent | AudioContent | EmbeddedResource) -> tuple[bytes | None, str, str]:
    """The block's bytes (None: malformed), its claimed type, and what to call it."""
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return _decode(block.data), block.mime_type, kind
    res = block.resource
    claimed = res.mime_type if isinstance(res.mime_type, str) else "application/octet-stream"
    blob = res.blob if isinstance(res.blob, str) else ""
    return _decode(blob), claimed, f"resource {res.uri}"


async def _save(member: Member, path: str, data: bytes) -> str | None:
    """Write the file in the member's home; None, or why it was not written."""
    try:
        budget = None if member.budget is None else await member.budget()
        found = member.router.writable(path)
        await asyncio.to_thread(write_within, budget, found, data)
    except SkaldError as exc:
        return str(exc)[:200]
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None
