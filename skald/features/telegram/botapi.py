"""The Telegram Bot API over httpx: one method call, with Telegram's own flow control.

Rule: every call goes through `BotApi.call`: a 429 waits the `retry_after` Telegram
names (capped) and tries again; a network failure raises `NetworkDown` so the poller
backs off; any other refusal raises `TelegramError` with Telegram's description.

Trap: the token is part of every URL (`/bot<token>/method`). httpx puts the URL into
its exception texts, so nothing here lets an httpx error text out: `NetworkDown` and
`TelegramError` carry only the method name and Telegram's own description.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import msgspec

__all__ = ["MAX_RETRY_AFTER_S", "BotApi", "NetworkDown", "TelegramError"]

MAX_RETRY_AFTER_S = 60.0  # a longer flood wait is retried by the caller's back-off


class TelegramError(Exception):
    def __init__(self, method: str, code: int, description: str) -> None:
        super().__init__(f"Telegram refused {method}: {code} {description}")
        self.code = code
        self.description = description


class NetworkDown(Exception):
    """The Bot API could not be reached (the text never holds the URL, hence the token)."""


class _Answer(msgspec.Struct):
    ok: bool
    result: Any = None
    error_code: int = 0
    description: str = ""
    parameters: dict[str, Any] | None = None


class BotApi:
    def __init__(self, base_url: str, token: str, *, poll_timeout_s: int = 25) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.poll_timeout_s = poll_timeout_s
        # Long polls hold the connection for poll_timeout_s: the read timeout is longer.
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(30.0, read=poll_timeout_s + 15.0), trust_env=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(
        self, method: str, params: dict[str, Any] | None = None, files: dict[str, Any] | None = None
    ) -> Any:
        url = f"{self.base_url}/bot{self._token}/{method}"
        while True:
            try:
                if files:
                    data = {k: _form(v) for k, v in (params or {}).items() if v is not None}
                    response = await self._http.post(url, data=data, files=files)
                else:
                    response = await self._http.post(url, json=params or {})
                answer = msgspec.json.decode(response.content, type=_Answer)
            except (httpx.HTTPError, msgspec.DecodeError) as exc:
                raise NetworkDown(f"Telegram {method}: {type(exc).__name__}") from None
            if answer.ok:
                return answer.result
            wait = (answer.parameters or {}).get("retry_after")
            if answer.error_code == 429 and isinstance(wait, int | float):
                # Flood control: Telegram says how long; waiting less only gets refused again.
                await asyncio.sleep(min(float(wait), MAX_RETRY_AFTER_S))
                continue
            raise TelegramError(method, answer.error_code, answer.description)

    async def download(self, file_path: str, limit: int) -> bytes:
        """A file `getFile` named, refused past `limit` bytes (read in chunks)."""
        url = f"{self.base_url}/file/bot{self._token}/{file_path}"
        out = bytearray()
        try:
            async with self._http.stream("GET", url) as response:
                if response.status_code != 200:
                    raise TelegramError("download", response.status_code, "file not served")
                async for chunk in response.aiter_bytes():
                    out += chunk
                    if len(out) > limit:
                        raise TelegramError("download", 413, "file too large")
        except httpx.HTTPError as exc:
            raise NetworkDown(f"Telegram download: {type(exc).__name__}") from None
        return bytes(out)


def _form(value: Any) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()
