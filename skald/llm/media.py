"""Voice and pictures on OpenAI-compatible servers: one request each, no streaming of
the request, the wire formats as OpenAI documents them.

- `/audio/transcriptions`: multipart (`file`, `model`, `response_format=json`) →
  `{"text": ...}`.
- `/audio/speech`: JSON (`model`, `input`, `voice`, `response_format`) → audio bytes,
  streamed back as they come.
- `/images/generations`: JSON (`model`, `prompt`, `n=1`, `size`,
  `response_format=b64_json`) → `{"data": [{"b64_json": ...}]}`.

Trap: failures go through the same `LlmError` kinds as chat (status → kind, the key
redacted), so AUTO's fallback treats a busy speech server like a busy chat server;
anything the server sends that is not the documented shape is a `model_error`, never
a KeyError in the caller.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from skald.llm.errors import LlmError, error_for_status
from skald.llm.wire import error_detail, network_error, redact

# Seconds a media request may take: a long clip or a picture on a CPU is slow.
MEDIA_TIMEOUT = httpx.Timeout(300.0, connect=10.0)


@dataclass(frozen=True)
class Endpoint:
    """Where one provider's requests go, with its key (None: none needed)."""

    name: str
    base_url: str
    api_key: str | None

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def url(self, path: str) -> str:
        return f"{self.base_url.rstrip('/')}/{path}"


async def _check(response: httpx.Response, where: Endpoint) -> None:
    if response.status_code != 200:
        body = await response.aread()
        detail = redact(error_detail(body), (where.api_key,))
        raise error_for_status(response.status_code, where.name, detail)


async def _post(http: httpx.AsyncClient, where: Endpoint, path: str, **body: Any) -> httpx.Response:
    """One request to the provider's `path` (`body`: httpx's `data`/`files` or `json`),
    read whole: a refusal raises by its status, a network failure as `network_error`."""
    try:
        response = await http.post(
            where.url(path), headers=where.headers(), timeout=MEDIA_TIMEOUT, **body
        )
        await _check(response, where)
    except httpx.HTTPError as exc:
        raise network_error(where.name, exc, (where.api_key,)) from exc
    return response


async def transcribe(
    http: httpx.AsyncClient,
    where: Endpoint,
    model: str,
    audio: bytes,
    filename: str,
    content_type: str,
    language: str | None = None,
) -> str:
    """The transcript of one clip."""
    data = {"model": model, "response_format": "json"}
    if language:
        data["language"] = language
    response = await _post(
        http,
        where,
        "audio/transcriptions",
        data=data,
        files={"file": (filename, audio, content_type)},
    )
    try:
        text = response.json()["text"]
    except (ValueError, KeyError, TypeError):
        raise LlmError(f"{where.name}: the transcription has no text", retriable=False) from None
    if not isinstance(text, str):
        raise LlmError(f"{where.name}: the transcription has no text", retriable=False)
    return text.strip()


async def speak(
    http: httpx.AsyncClient,
    where: Endpoint,
    model: str,
    text: str,
    voice: str,
    audio_format: str,
) -> tuple[str, AsyncIterator[bytes]]:
    """Start reading `text` aloud: the audio's content type and its bytes as they come.
    Failures before the first byte raise here; the iterator closes the response."""
    request = http.build_request(
        "POST",
        where.url("audio/speech"),
        headers=where.headers(),
        json={"model": model, "input": text, "voice": voice, "response_format": audio_format},
        timeout=MEDIA_TIMEOUT,
    )
    try:
        response = await http.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise network_error(where.name, exc, (where.api_key,)) from exc
    try:
        await _check(response, where)
    except BaseException:
        await response.aclose()
        raise
    content_type = response.headers.get("content-type", "application/octet-stream")

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise network_error(where.name, exc, (where.api_key,)) from exc
        finally:
            await response.aclose()

    return content_type, chunks()


async def generate_image(
    http: httpx.AsyncClient, where: Endpoint, model: str, prompt: str, size: str
) -> bytes:
    """One picture for `prompt`, as the image file's bytes."""
    body = {"model": model, "prompt": prompt, "n": 1, "size": size, "response_format": "b64_json"}
    response = await _post(http, where, "images/generations", json=body)
    try:
        encoded = response.json()["data"][0]["b64_json"]
        return base64.b64decode(encoded, validate=True)
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise LlmError(f"{where.name}: the answer holds no picture", retriable=False) from None
