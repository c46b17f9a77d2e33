"""Files members attach in the chat: stored in their home under `uploads/<conversation>/`,
typed by their content (never by what the browser claims), inlined for vision models
within a per-turn budget."""

from __future__ import annotations

import base64
import re

from skald.errors import InvalidInputError
from skald.files.mime import sniff
from skald.files.router import PathRouter, Resolved, open_read
from skald.llm.types import ContentPart, ImagePart, TextPart, VideoPart
from skald.paths import DataLayout
from skald.store.conversations import ATTACHMENT_NOTE, Attachment

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGES_PER_TURN = 4
MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_INLINE_TOTAL = 20 * 1024 * 1024
# Videos (issue 31) for models marked `video`: mp4, webm, mov, each within its own budget.
VIDEO_TYPES = frozenset({"video/mp4", "video/webm", "video/quicktime"})
MAX_VIDEO_BYTES = 32 * 1024 * 1024
MAX_VIDEO_TOTAL = 48 * 1024 * 1024


def _router(layout: DataLayout, user_id: str) -> PathRouter:
    router = PathRouter.for_member(layout, user_id)
    router.ensure_home()
    return router


def _conversation_folder(conversation_id: str) -> str:
    if not re.fullmatch(r"[a-f0-9]{1,64}", conversation_id):
        raise InvalidInputError("not a conversation id")
    return f"uploads/{conversation_id}"


def _physical(router: PathRouter, agent_path: str) -> Resolved:
    found = router.resolve(agent_path)
    if not isinstance(found, Resolved) or found.mount != "home":
        raise InvalidInputError(f"{agent_path!r} is not in your home")
    return found


def conversation_folder(layout: DataLayout, user_id: str, conversation_id: str) -> Resolved:
    """The member's uploads/<conversation>/ folder, resolved by the router. In a thread."""
    return _physical(_router(layout, user_id), _conversation_folder(conversation_id))


def _read_upload(router: PathRouter, agent_path: str, limit: int) -> tuple[bytes, int]:
    handle, st = open_read(_physical(router, agent_path))
    with handle:
        return handle.read(limit), st.st_size


def resolve_attachment(
    layout: DataLayout, user_id: str, conversation_id: str, agent_path: str
) -> Attachment:
    """An attachment named by the client must be one of this conversation's uploads."""
    prefix = _conversation_folder(conversation_id) + "/"
    name = agent_path[len(prefix) :]
    if not agent_path.startswith(prefix) or not name or "/" in name or name in (".", ".."):
        raise InvalidInputError(f"{agent_path!r} is not an upload of this conversation")
    head, size = _read_upload(_router(layout, user_id), agent_path, 512)
    return Attachment(name=name, path=agent_path, mime=sniff(head), size=size)


PICTURE_NOT_SEEN = (
    " (a picture: not shown to you, the model in use cannot see pictures; if it matters, "
    "say you could not look at it)"
)


VIDEO_NOT_SEEN = (
    " (a video: not shown to you, the model in use cannot watch videos; if it matters, "
    "say you could not watch it)"
)
VIDEO_TOO_BIG = (
    f" (a video: not shown to you, over the {MAX_VIDEO_BYTES // (1024 * 1024)} MiB a video "
    f"or the {MAX_VIDEO_TOTAL // (1024 * 1024)} MiB a message may send)"
)


def content_for(
    layout: DataLayout,
    user_id: str,
    text: str,
    attachments: list[Attachment],
    see_images: bool = True,
    watch_videos: bool = False,
) -> list[ContentPart]:
    """The user message's parts: the text, images and videos inlined within budget, notes
    for the rest. `see_images` False: no image is inlined and each picture's note says it
    was not seen; `watch_videos` the same for videos (only a model marked `video`)."""
    parts: list[ContentPart] = [TextPart(text)] if text.strip() else []
    if not attachments:
        return parts  # no disk access: the caller may skip the thread for this case
    images = 0
    inlined = 0
    videos = 0
    router = _router(layout, user_id)
    for a in attachments:
        if a.mime in VIDEO_TYPES:
            fits = a.size <= MAX_VIDEO_BYTES and videos + a.size <= MAX_VIDEO_TOTAL
            if watch_videos and fits:
                data, _ = _read_upload(router, a.path, MAX_VIDEO_BYTES)
                parts.append(VideoPart(media_type=a.mime, data_b64=base64.b64encode(data).decode()))
                videos += a.size
            unwatched = (
                "" if watch_videos and fits else VIDEO_TOO_BIG if watch_videos else VIDEO_NOT_SEEN
            )
            note = f"{ATTACHMENT_NOTE}{a.path} ({a.mime}, {a.size} bytes){unwatched}]"
            parts.append(TextPart(note))
            continue
        if (
            see_images
            and a.mime in IMAGE_TYPES
            and images < MAX_IMAGES_PER_TURN
            and a.size <= MAX_IMAGE_BYTES
            and inlined + a.size <= MAX_INLINE_TOTAL
        ):
            # Read again through the router: never follow a link swapped in since the check.
            data, _ = _read_upload(router, a.path, MAX_IMAGE_BYTES)
            parts.append(ImagePart(media_type=a.mime, data_b64=base64.b64encode(data).decode()))
            images += 1
            inlined += a.size
        unseen = PICTURE_NOT_SEEN if not see_images and a.mime.startswith("image/") else ""
        parts.append(TextPart(f"{ATTACHMENT_NOTE}{a.path} ({a.mime}, {a.size} bytes){unseen}]"))
    return parts


MAX_PICTURE_BYTES = 20 * 1024 * 1024


def read_picture(
    layout: DataLayout, user_id: str, conversation_id: str, name: str
) -> tuple[bytes, str]:
    """A picture among the member's own uploads of a conversation (a drawn one, or one
    they attached), with its sniffed type, for the chat to show. In a thread."""
    found = resolve_attachment(
        layout, user_id, conversation_id, f"uploads/{conversation_id}/{name}"
    )
    if found.mime not in IMAGE_TYPES:
        raise InvalidInputError(f"{found.path!r} is not a picture")
    data, _ = _read_upload(_router(layout, user_id), found.path, MAX_PICTURE_BYTES)
    return data, found.mime
