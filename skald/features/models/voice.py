"""Voice in the chat (capability `chat`): a recorded clip → its transcript, and an
answer → audio read aloud. The work is `LlmService.transcribe` / `speak`, which any
channel (a Telegram bridge's voice notes) calls the same way.

Trap: the clip's type is judged by its first bytes, never by the Content-Type the
browser sent alone: both must say audio (or the WebM/MP4 containers browsers record
in), and the sniffed type is what goes to the provider.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import msgspec
from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from skald.api.deps import AnyRequest, requires
from skald.api.errors import ApiError
from skald.api.openapi import errors
from skald.core.llm_service import Transcript
from skald.core.plain_errors import plain
from skald.core.uploads import read_picture
from skald.errors import InvalidInputError
from skald.files.mime import sniff
from skald.llm.errors import LlmError
from skald.permissions import CHAT as CHAT_CAP
from skald.plugins.facade import Server  # Litestar reads the annotations

CHAT = [requires(CHAT_CAP)]
# A minute or two of speech in any of the recorded formats; longer is not a message.
MAX_CLIP_BYTES = 10 * 1024 * 1024
# What a recorded clip may be (sniffed type → file extension the provider sees).
CLIP_TYPES = {
    "audio/wav": "wav",
    "audio/ogg": "ogg",
    "audio/mpeg": "mp3",
    "audio/flac": "flac",
    "video/webm": "webm",
    "video/mp4": "mp4",
}
# Declared types browsers and apps send for those (parameters like codecs= dropped).
_DECLARED = {"video/webm", "video/mp4", "application/ogg"}
MAX_READ_CHARS = 4000


class VoiceOffer(msgspec.Struct, frozen=True, kw_only=True):
    """Which voice controls the chat shows: a button without a model behind it only
    ever fails."""

    transcription: bool
    speech: bool


@get("/api/voice", guards=CHAT)
async def voice_offer(server: NamedDependency[Server]) -> VoiceOffer:
    kinds = {m.kind for m in await server.llm.models() if m.enabled}
    return VoiceOffer(transcription="transcription" in kinds, speech="speech" in kinds)


class SpeechIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_READ_CHARS)]


@post(
    "/api/voice/transcribe",
    guards=CHAT,
    status_code=200,
    responses=errors(400, 409, 413, 415, 502),
    request_max_body_size=MAX_CLIP_BYTES,
)
async def transcribe(request: AnyRequest, server: NamedDependency[Server]) -> Transcript:
    """A recorded clip (the raw body, Content-Type audio/…) → its transcript."""
    declared = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if not (declared.startswith("audio/") or declared in _DECLARED):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the recording as audio (got {declared or 'no type'!r})",
        )
    audio = await request.body()
    if not audio:
        raise InvalidInputError("the recording is empty")
    kind = sniff(audio[:64])
    ext = CLIP_TYPES.get(kind)
    if ext is None:
        known = ", ".join(sorted(set(CLIP_TYPES.values())))
        raise ApiError(
            415,
            "unsupported_media_type",
            f"the recording is not an audio format Skald knows ({known})",
        )
    try:
        return await server.llm.transcribe(request.user.user.id, audio, f"clip.{ext}", kind)
    except LlmError as exc:
        raise _unavailable(exc) from None


@post("/api/voice/speech", guards=CHAT, status_code=200, responses=errors(409, 502))
async def speech(
    data: JSONBody[SpeechIn], request: AnyRequest, server: NamedDependency[Server]
) -> Stream:
    """Read `text` aloud: the audio, streamed as the speech model produces it."""
    try:
        content_type, chunks = await server.llm.speak(request.user.user.id, data.text)
    except LlmError as exc:
        raise _unavailable(exc) from None
    return Stream(chunks, media_type=content_type, headers={"cache-control": "no-store"})


def _unavailable(exc: LlmError) -> ApiError:
    """A model failure as the member reads it (the detail is in the log and the usage
    rows): nothing set up says which kind is missing; the rest is the plain sentence."""
    message = str(exc) if exc.kind == "no_model" else plain(exc.kind)
    # Nothing set up is the household's state, not a server failure: 409, like any
    # request the current state refuses.
    return ApiError(409 if exc.kind == "no_model" else 502, "llm_error", message)


@get("/api/pictures/{conversation_id:str}/{name:str}", guards=CHAT, responses=errors(400, 404))
async def picture(
    conversation_id: FromPath[str],
    name: FromPath[str],
    request: AnyRequest,
    server: NamedDependency[Server],
) -> Response[bytes]:
    """A picture among the member's own uploads of a conversation (drawn by
    `generate_image`, or attached), for the chat to show."""
    data, mime = await asyncio.to_thread(
        read_picture, server.layout, request.user.user.id, conversation_id, name
    )
    return Response(data, media_type=mime, headers={"cache-control": "private, max-age=3600"})


ROUTES = [voice_offer, transcribe, speech, picture]
