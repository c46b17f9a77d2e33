"""Files members attach in the chat: stored in their home under `uploads/<conversation>/`,
typed by their content (never by what the browser claims), inlined for vision models
within a per-turn budget."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from skald.errors import InvalidInputError, NotFoundError
from skald.llm.types import ContentPart, ImagePart, TextPart
from skald.paths import DataLayout
from skald.store.conversations import ATTACHMENT_NOTE, Attachment

_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"%PDF-", 0, "application/pdf"),
    (b"PK\x03\x04", 0, "application/zip"),
    (b"ID3", 0, "audio/mpeg"),
    (b"OggS", 0, "audio/ogg"),
    (b"ftyp", 4, "video/mp4"),
]
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGES_PER_TURN = 4
MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_INLINE_TOTAL = 20 * 1024 * 1024
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")


def sniff(head: bytes) -> str:
    for magic, offset, mime in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return mime
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character cut at the end of the sample is still text.
        try:
            head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return "application/octet-stream"
    return "text/plain"


def safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = _SAFE_NAME.sub("_", base).strip(" .") or "file"
    return cleaned[:120]


def upload_dir(layout: DataLayout, user_id: str, conversation_id: str) -> Path:
    if not re.fullmatch(r"[a-f0-9]{1,64}", conversation_id):
        raise InvalidInputError("not a conversation id")
    return layout.home(user_id) / "uploads" / conversation_id


def store_upload(
    layout: DataLayout, user_id: str, conversation_id: str, name: str, data: bytes
) -> Attachment:
    """Write the file (never over another one) and describe it. Runs in a thread."""
    folder = upload_dir(layout, user_id, conversation_id)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    clean = safe_name(name)
    target = folder / clean
    stem, suffix = Path(clean).stem, Path(clean).suffix
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{stem} ({n}){suffix}"
    target.write_bytes(data)
    target.chmod(0o600)
    return Attachment(
        name=target.name,
        path=f"uploads/{conversation_id}/{target.name}",
        mime=sniff(data[:512]),
        size=len(data),
    )


def resolve_attachment(
    layout: DataLayout, user_id: str, conversation_id: str, agent_path: str
) -> Attachment:
    """An attachment named by the client must be one of this conversation's uploads."""
    folder = upload_dir(layout, user_id, conversation_id)
    prefix = f"uploads/{conversation_id}/"
    if not agent_path.startswith(prefix) or "/" in agent_path[len(prefix) :]:
        raise InvalidInputError(f"{agent_path!r} is not an upload of this conversation")
    target = (folder / agent_path[len(prefix) :]).resolve()
    if target.parent != folder.resolve() or not target.is_file():
        raise NotFoundError(f"no upload at {agent_path}")
    with target.open("rb") as f:
        head = f.read(512)
    return Attachment(
        name=target.name, path=agent_path, mime=sniff(head), size=target.stat().st_size
    )


def content_for(
    layout: DataLayout, user_id: str, text: str, attachments: list[Attachment]
) -> list[ContentPart]:
    """The user message's parts: the text, images inlined within budget, notes for the rest."""
    parts: list[ContentPart] = [TextPart(text)] if text.strip() else []
    images = 0
    inlined = 0
    for a in attachments:
        path = layout.home(user_id) / a.path
        if (
            a.mime in IMAGE_TYPES
            and images < MAX_IMAGES_PER_TURN
            and a.size <= MAX_IMAGE_BYTES
            and inlined + a.size <= MAX_INLINE_TOTAL
        ):
            parts.append(
                ImagePart(media_type=a.mime, data_b64=base64.b64encode(path.read_bytes()).decode())
            )
            images += 1
            inlined += a.size
        parts.append(TextPart(f"{ATTACHMENT_NOTE}{a.path} ({a.mime}, {a.size} bytes)]"))
    return parts
