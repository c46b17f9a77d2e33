"""Uploads parsed as they stream by `multipart.PushMultipartParser` (issue 11, item 8):
memory stays flat whatever the size, and a body cut into any pieces parses the same."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Client, asgi_scope, signed_in

from skald.api.app import create_app
from skald.core.runtime import Runtime

BOUNDARY = "----skaldtestboundary7MA4YWxk"


@pytest.fixture
async def ada(make_client: Any, household: dict[str, str]) -> Client:
    client: Client = await signed_in(make_client, "ada")
    return client


def _head(name: str) -> bytes:
    return (
        f"--{BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()


TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()


async def _post_chunks(
    runtime: Runtime,
    client: Client,
    path: str,
    chunks: AsyncIterator[bytes],
    app: Any = None,
) -> tuple[int, bytes]:
    """POST a body piece by piece straight through ASGI (httpx would join it first)."""
    scope = asgi_scope(
        client,
        "POST",
        "/api/file/upload",
        f"path={path}",
        (b"x-csrf-token", client.csrf.encode()),
        (b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode()),
    )
    status = 0
    body = b""
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if done:
            return {"type": "http.disconnect"}
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, body
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body += message.get("body", b"")

    await (app or create_app(runtime))(scope, receive, send)
    return status, body


async def test_a_large_upload_streams_to_disk_in_flat_memory(
    runtime: Runtime, household: dict[str, str], ada: Client
) -> None:
    size = 24 * 1024 * 1024
    block = os.urandom(64 * 1024)

    async def chunks() -> AsyncIterator[bytes]:
        yield _head("big.bin")
        for _ in range(size // len(block)):
            yield block
        yield TAIL

    async def small() -> AsyncIterator[bytes]:
        yield _head("warm.bin")
        yield block
        yield TAIL

    # What one upload costs, not what building the app and the route's first call do
    # (Litestar builds its signature models lazily): a small upload warms them first.
    app = create_app(runtime)
    assert (await _post_chunks(runtime, ada, "~/in", small(), app))[0] == 201
    tracemalloc.start()
    try:
        status, body = await _post_chunks(runtime, ada, "~/in", chunks(), app)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 201, body
    home = runtime.core.layout.home(household["ada"])
    assert (home / "in" / "big.bin").stat().st_size == size
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes for a {size}-byte upload"


@pytest.mark.parametrize("piece", [1, 7, 61])
async def test_a_body_cut_anywhere_parses_the_same(
    runtime: Runtime, household: dict[str, str], ada: Client, piece: int
) -> None:
    content = b"line one\r\n--not-a-boundary\r\n" + bytes(range(256)) * 4
    whole = _head("città.txt") + content + TAIL

    async def chunks() -> AsyncIterator[bytes]:
        for at in range(0, len(whole), piece):
            yield whole[at : at + piece]

    status, body = await _post_chunks(runtime, ada, f"~/cut{piece}", chunks())
    assert status == 201, body
    home: Path = runtime.core.layout.home(household["ada"])
    assert (home / f"cut{piece}" / "città.txt").read_bytes() == content


async def test_a_malformed_body_is_a_clear_400_and_leaves_no_file(
    runtime: Runtime, household: dict[str, str], ada: Client
) -> None:
    async def garbage() -> AsyncIterator[bytes]:
        yield _head("x.txt") + b"data"
        yield b"\r\n--" + BOUNDARY.encode() + b"XX not a delimiter end"

    status, body = await _post_chunks(runtime, ada, "~/bad", garbage())
    assert status == 400, body
    assert b"multipart" in body
    home = runtime.core.layout.home(household["ada"])
    assert not (home / "bad").exists() or not list((home / "bad").iterdir())
