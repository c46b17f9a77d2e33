"""The HTTP side of `skald chat`: one turn through a running server, as a member with a
password (session and CSRF) or with an API token (Bearer), files in and out.

Rule: files go up first (`POST /api/uploads`, into a conversation made for them), then
the message names them; files the turn wrote come back as paths, fetched with
`GET /api/file` when the caller wants them saved (the token needs `files:read`).
Trap: a streamed answer is printed as it arrives, so the caller must not print the
reply again; the `done` event carries the same reply `POST /api/chat` answers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import httpx
import msgspec

from skald.errors import SkaldError


def raise_for(r: httpx.Response) -> None:
    if r.status_code >= 400:
        try:
            message = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {r.status_code}"
        raise SkaldError(message)


class ChatClient:
    def __init__(self, base_url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(600.0, connect=5.0)
        )
        self.csrf = ""

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.http.aclose()

    def _headers(self) -> dict[str, str]:
        return {"X-CSRF-Token": self.csrf} if self.csrf else {}

    async def login(self, username: str, password: str) -> None:
        r = await self.http.post(
            "/api/auth/login", json={"username": username, "password": password}
        )
        raise_for(r)
        self.csrf = r.json()["csrf_token"]

    async def logout(self) -> None:
        await self.http.post("/api/auth/logout", headers=self._headers())

    async def _post(self, path: str, **kw: Any) -> Any:
        r = await self.http.post(path, headers=self._headers(), **kw)
        raise_for(r)
        return r.json()

    async def send(
        self, text: str, *, conversation: str | None, files: list[Path], stream: TextIO | None
    ) -> dict[str, Any]:
        if conversation is None and (files or stream is not None):
            conversation = (await self._post("/api/conversations", json={}))["id"]
        attachments = []
        for path in files:
            # Read whole: uploads are capped by the server (upload_max_mb).
            data = await asyncio.to_thread(path.read_bytes)
            sent = await self._post(
                "/api/uploads",
                params={"conversation_id": conversation},
                files={"file": (path.name, data)},
            )
            attachments.append(sent["path"])
        body: dict[str, Any] = {"text": text, "conversation_id": conversation}
        if attachments:
            body["attachments"] = attachments
        if stream is None:
            out: dict[str, Any] = await self._post("/api/chat", json=body)
            return out
        return await self._stream(body, stream)

    async def _stream(self, body: dict[str, Any], out: TextIO) -> dict[str, Any]:
        event = ""
        async with self.http.stream(
            "POST", "/api/chat/stream", json=body, headers=self._headers()
        ) as r:
            if r.status_code >= 400:
                await r.aread()
                raise_for(r)
            async for line in r.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data = msgspec.json.decode(line[6:])
                    if event == "delta":
                        out.write(data["text"])
                        out.flush()
                    elif event == "done":
                        out.write("\n")
                        result: dict[str, Any] = data
                        return result
        raise SkaldError("the server ended the stream before the answer was complete")

    async def fetch(self, paths: list[str], folder: Path) -> list[Path]:
        """Save each file the turn wrote into `folder` (by its last name)."""
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        saved = []
        for path in paths:
            r = await self.http.get("/api/file", params={"path": path}, headers=self._headers())
            raise_for(r)
            target = folder / Path(path).name
            await asyncio.to_thread(target.write_bytes, r.content)
            saved.append(target)
        return saved
