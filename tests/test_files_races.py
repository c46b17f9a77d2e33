"""Every Files route while the member swaps a folder for a link (issue 12, item 7), and
a ZIP that fails once its response has started.

Whatever the timing, the answer is the operation done inside the home, or a clean
403/404/409 with a message and the security headers; never a 500, never a byte from
outside, and the access log records the status the client really got.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import PASSWORD
from swap_support import Swapper, swapper_fixture  # noqa: F401  (registers `swapper`)

from skald.api.app import create_asgi
from skald.core.runtime import Runtime
from skald.errors import ConflictError, NotFoundError
from skald.files import router as fs

SECRET = b"OUTSIDE-SECRET"
CLEAN = {200, 201, 204, 403, 404, 409}


@pytest.fixture
async def ada(runtime: Runtime, household: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_asgi(runtime), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        r = await http.post("/api/auth/login", json={"username": "ada", "password": PASSWORD})
        assert r.status_code == 200, r.text
        http.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        yield http


def _lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


def _requests() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("GET", "/api/files/dir", {"params": {"path": "f"}}),
        ("GET", "/api/files/dir", {"params": {"path": "f/sub"}}),
        ("GET", "/api/file", {"params": {"path": "f/a.txt"}}),
        ("GET", "/api/file", {"params": {"path": "f/sub/b.txt", "download": "1"}}),
        ("GET", "/api/files/zip", {"params": {"path": "f"}}),
        ("GET", "/api/files/zip", {"params": {"path": "f/sub"}}),
        ("POST", "/api/file", {"json": {"path": "f/new.txt", "content": "mine"}}),
        ("POST", "/api/file", {"json": {"path": "f/sub/newdir", "mkdir": True}}),
        ("PATCH", "/api/file", {"json": {"from": "f/new.txt", "to": "f/moved.txt"}}),
        ("PATCH", "/api/file", {"json": {"from": "f/moved.txt", "to": "kept.txt"}}),
        ("DELETE", "/api/file", {"params": {"path": "kept.txt"}}),
        ("DELETE", "/api/file", {"params": {"path": "f/sub/newdir", "recursive": "1"}}),
        ("POST", "/api/file/upload", {"params": {"path": "f/sub"}, "files": {"file": b"up"}}),
    ]


async def test_every_files_route_answers_cleanly_while_a_folder_is_swapped_for_a_link(
    runtime: Runtime,
    household: dict[str, str],
    ada: httpx.AsyncClient,
    swapper: Swapper,
    tmp_path: Path,
) -> None:
    home = runtime.core.layout.home(household["ada"])
    home.mkdir(exist_ok=True)
    (home / "f" / "sub").mkdir(parents=True)
    (home / "f" / "a.txt").write_text("a")
    (home / "f" / "sub" / "b.txt").write_text("b")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/b.txt", "new.txt", "moved.txt"):
        (outside / name).write_bytes(SECRET)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    swapper(home, "f", outside)
    seen: dict[int, int] = {}
    for _ in range(25):
        for method, url, kw in _requests():
            if "files" in kw:
                kw = {**kw, "files": {"file": ("up.txt", b"up")}}
            r = await ada.request(method, url, **kw)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code in CLEAN, f"{method} {url} {kw}: {r.status_code} {r.text}"
            assert r.headers.get("content-security-policy"), (method, url)
            assert SECRET not in r.content, (method, url)
            if r.status_code >= 400:
                assert r.json()["error"]["message"], r.text
    assert seen.get(200, 0) > 0 and sum(seen[s] for s in seen if s >= 400) > 0, seen
    after = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    assert after == before, "something was written outside the home"
    assert not (outside / "sub" / "newdir").exists() and not (outside / "up.txt").exists()


def test_a_folder_swapped_during_resolution_is_a_conflict_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath sees a link, and the link is a folder again when it reads it: that
    used to escape as FileNotFoundError/OSError (a 500)."""
    home = tmp_path / "home"
    (home / "f").mkdir(parents=True)
    router = fs.PathRouter(home)
    real = os.readlink

    def gone(path: Any, *args: Any, **kw: Any) -> str:
        if str(path).endswith("/f"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *args, **kw)

    (home / "f").rmdir()
    (home / "f").symlink_to(home / "g")
    monkeypatch.setattr(os, "readlink", gone)
    with pytest.raises(ConflictError, match="changed while it was being looked up"):
        router.resolve("f/x")


# -- a ZIP that fails before or after its response started ---------------------------------


def _fails_after_one_chunk(found: Any, **_: Any) -> Generator[bytes, None, None]:
    yield b""
    yield b"PK\x03\x04" + bytes(70_000)
    raise OSError(5, "Input/output error")


def _fails_at_once(found: Any, **_: Any) -> Generator[bytes, None, None]:
    raise NotFoundError("nothing at ~/gone")
    yield b""  # a generator


async def test_a_zip_that_fails_mid_stream_is_cut_off_and_logged_as_such(
    runtime: Runtime,
    household: dict[str, str],
    ada: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    logged: io.StringIO,
) -> None:
    home = runtime.core.layout.home(household["ada"])
    (home / "d").mkdir(parents=True)
    monkeypatch.setattr(fs, "zip_stream", _fails_at_once)
    r = await ada.get("/api/files/zip", params={"path": "d"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert r.headers["content-security-policy"] and r.headers["x-frame-options"] == "DENY"

    monkeypatch.setattr(fs, "zip_stream", _fails_after_one_chunk)
    with pytest.raises(Exception):  # noqa: B017  (the transport reports a broken body)
        await ada.get("/api/files/zip", params={"path": "d"})
    lines = _lines(logged)
    zips = [x for x in lines if x.get("event") == "request" and x.get("path") == "/api/files/zip"]
    assert [(x["status"], x.get("aborted")) for x in zips] == [(404, None), (200, True)]
    failed = [x for x in lines if x.get("event") == "response stream failed"]
    assert len(failed) == 1 and failed[0]["what"] == "zip" and "Input/output" in failed[0]["error"]


async def test_an_error_before_any_response_is_our_500_with_headers_and_logged_as_500(
    runtime: Runtime, logged: io.StringIO
) -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("a bug")

    app = create_asgi(runtime)
    app.app = broken  # what the edge wraps
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        r = await http.get("/api/anything")
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
    assert r.headers["content-security-policy"]
    access = [x for x in _lines(logged) if x.get("event") == "request"]
    assert [x["status"] for x in access] == [500]
