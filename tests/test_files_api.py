"""The Files API in process: real homes on disk, the shipped manual, real note stores."""

from __future__ import annotations

import asyncio
import io
import os
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import msgspec
import pytest
from conftest import Client, MakeClient, asgi_scope, signed_in
from links_support import escaping, plant_links

from skald.api.app import create_app
from skald.core.runtime import Runtime

SECRET = "MUM-SECRET-0815"


def home(runtime: Runtime, user_id: str) -> Path:
    path = runtime.core.layout.home(user_id)
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@pytest.fixture
async def ada(make_client: MakeClient, household: dict[str, str]) -> Client:
    return await signed_in(make_client, "ada")


@pytest.fixture
def homes(runtime: Runtime, household: dict[str, str], tmp_path: Path) -> dict[str, Path]:
    """Ada's home with a few files; mum's home with a secret; a folder outside both."""
    ada_home, mum_home = home(runtime, household["ada"]), home(runtime, household["mum"])
    (ada_home / "notes").mkdir()
    (ada_home / "notes" / "plan.md").write_text("# Plan\nbuy milk\n")
    (ada_home / "hello.txt").write_text("hello\n")
    (mum_home / "private").mkdir()
    (mum_home / "private" / "diary.txt").write_text(SECRET)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    return {"ada": ada_home, "mum": mum_home, "outside": outside}


def plant(homes: dict[str, Path]) -> None:
    """Links Ada plants in her home from inside her sandbox."""
    plant_links(homes["ada"], "mum", homes["mum"], homes["outside"], "planted.txt")


def snapshot(*roots: Path) -> dict[str, bytes]:
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for name in files + dirs:
                item = Path(dirpath) / name
                out[str(item)] = item.read_bytes() if item.is_file() else b"<dir>"
    return out


async def raw_get(
    runtime: Runtime, client: Client, path: str, params: dict[str, str]
) -> tuple[int, dict[str, str], list[bytes]]:
    """GET straight through ASGI, keeping every body message the app sends (httpx's
    in-process transport joins them, which would hide whether a response streams)."""
    scope = asgi_scope(client, "GET", path, urlencode(params), (b"accept-encoding", b"identity"))
    finished = asyncio.Event()
    sent = False
    status = 0
    headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.update({k.decode(): v.decode() for k, v in message["headers"]})
        elif message["type"] == "http.response.body":
            if message.get("body"):
                chunks.append(message["body"])
            if not message.get("more_body"):
                finished.set()

    await create_app(runtime)(scope, receive, send)
    return status, headers, chunks


def error_of(r: Any) -> str:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


# -- browsing and reading ----------------------------------------------------------------


async def test_places(ada: Client, homes: dict[str, Path]) -> None:
    r = await ada.call("GET", "/api/files/places")
    assert r.status_code == 200
    assert [(p["name"], p["path"], p["writable"], p["virtual"]) for p in r.json()] == [
        ("home", "~", True, False),
        ("docs", "docs", False, False),
        ("skills/shared", "skills/shared", False, False),
        ("skills/mine", "skills/mine", False, False),
        ("user-memory", "user-memory", False, True),
        ("shared-memory", "shared-memory", False, True),
    ]


async def test_listing(ada: Client, homes: dict[str, Path]) -> None:
    r = await ada.call("GET", "/api/files/dir")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["path"], body["place"], body["writable"]) == ("~", "home", True)
    assert [(e["name"], e["type"], e["path"]) for e in body["entries"]] == [
        ("notes", "dir", "~/notes"),
        ("hello.txt", "file", "~/hello.txt"),
    ]
    hello = body["entries"][1]
    assert hello["size"] == 6 and hello["mime"] == "text/plain" and hello["mtime"].endswith("Z")
    docs = (await ada.call("GET", "/api/files/dir", params={"path": "docs"})).json()
    assert docs["writable"] is False and any(e["name"] == "README.md" for e in docs["entries"])
    r = await ada.call("GET", "/api/files/dir", params={"path": "hello.txt"})
    assert r.status_code == 400 and error_of(r) == "invalid_input"
    r = await ada.call("GET", "/api/files/dir", params={"path": "nothing"})
    assert r.status_code == 404 and error_of(r) == "not_found"


async def test_reading_files(ada: Client, homes: dict[str, Path]) -> None:
    r = await ada.call("GET", "/api/file", params={"path": "notes/plan.md"})
    assert r.status_code == 200
    assert r.content == b"# Plan\nbuy milk\n"
    assert r.headers["content-type"] == "text/markdown; charset=utf-8"
    assert r.headers["content-disposition"].startswith('inline; filename="plan.md"')
    r = await ada.call("GET", "/api/file", params={"path": "~/notes/plan.md", "download": "1"})
    assert r.headers["content-disposition"].startswith("attachment;")
    (homes["ada"] / "città.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(10))
    r = await ada.call("GET", "/api/file", params={"path": "città.png"})
    assert r.headers["content-type"] == "image/png"
    assert "filename*=UTF-8''citt%C3%A0.png" in r.headers["content-disposition"]
    r = await ada.call("GET", "/api/file", params={"path": "docs/README.md"})
    assert r.status_code == 200 and r.content
    r = await ada.call("GET", "/api/file", params={"path": "notes"})
    assert r.status_code == 400
    r = await ada.call("GET", "/api/file", params={"path": "missing.txt"})
    assert r.status_code == 404


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("evil.html", b"<script>alert(1)</script>"),
        ("evil.svg", b"<svg xmlns='http://www.w3.org/2000/svg'><script>1</script></svg>"),
        ("evil.js", b"alert(1)"),
        ("evil.xhtml", b"<html/>"),
    ],
)
async def test_active_content_is_never_served_as_a_page(
    ada: Client, homes: dict[str, Path], name: str, content: bytes
) -> None:
    (homes["ada"] / name).write_bytes(content)
    r = await ada.call("GET", "/api/file", params={"path": name})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_big_files_stream_in_chunks(
    ada: Client, homes: dict[str, Path], runtime: Runtime
) -> None:
    data = os.urandom(1024 * 1024)
    (homes["ada"] / "big.bin").write_bytes(data)
    status, headers, chunks = await raw_get(runtime, ada, "/api/file", {"path": "big.bin"})
    assert status == 200
    assert headers["content-type"] == "application/octet-stream"
    assert headers["content-length"] == str(len(data))
    assert b"".join(chunks) == data and len(chunks) >= 8


# -- writing -------------------------------------------------------------------------------


async def test_write_mkdir_rename_delete(ada: Client, homes: dict[str, Path]) -> None:
    h = homes["ada"]
    r = await ada.call("POST", "/api/file", json={"path": "~/trip/list.md", "content": "a\n"})
    assert r.status_code == 201, r.text
    assert r.json()["path"] == "~/trip/list.md" and r.json()["size"] == 2
    r = await ada.call("POST", "/api/file", json={"path": "trip/list.md", "content": "b\n"})
    assert r.status_code == 200 and (h / "trip" / "list.md").read_text() == "b\n"
    r = await ada.call("POST", "/api/file", json={"path": "trip/photos", "mkdir": True})
    assert r.status_code == 201 and r.json()["type"] == "dir"
    r = await ada.call("POST", "/api/file", json={"path": "trip/photos", "mkdir": True})
    assert r.status_code == 200
    r = await ada.call("POST", "/api/file", json={"path": "x", "mkdir": True, "content": "x"})
    assert r.status_code == 400
    r = await ada.call("PATCH", "/api/file", json={"from": "trip/list.md", "to": "trip/todo.md"})
    assert r.status_code == 200 and r.json()["path"] == "~/trip/todo.md"
    assert (h / "trip" / "todo.md").exists() and not (h / "trip" / "list.md").exists()
    r = await ada.call("PATCH", "/api/file", json={"from": "hello.txt", "to": "trip/todo.md"})
    assert r.status_code == 409 and error_of(r) == "conflict"
    r = await ada.call("PATCH", "/api/file", json={"from": "nothing", "to": "else"})
    assert r.status_code == 404
    r = await ada.call("DELETE", "/api/file", params={"path": "trip"})
    assert r.status_code == 409
    r = await ada.call("DELETE", "/api/file", params={"path": "trip/todo.md"})
    assert r.status_code == 204 and not (h / "trip" / "todo.md").exists()
    r = await ada.call("DELETE", "/api/file", params={"path": "trip", "recursive": "1"})
    assert r.status_code == 204 and not (h / "trip").exists()
    r = await ada.call("DELETE", "/api/file", params={"path": "~", "recursive": "1"})
    assert r.status_code == 400 and h.is_dir()


async def test_uploads(ada: Client, homes: dict[str, Path]) -> None:
    h = homes["ada"]
    payload = os.urandom(300_000)
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": "~/inbox"},
        files=[
            ("file", ("scan.pdf", payload, "application/pdf")),
            ("note", (None, "ignored field")),
            ("file", ("scan.pdf", b"second", "application/pdf")),
            ("file", ("../../evil.txt", b"name cleaned", "text/plain")),
        ],
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 201, r.text
    assert [f["path"] for f in r.json()["files"]] == [
        "~/inbox/scan.pdf",
        "~/inbox/scan (2).pdf",
        "~/inbox/evil.txt",
    ]
    assert (h / "inbox" / "scan.pdf").read_bytes() == payload
    assert (h / "inbox" / "scan (2).pdf").read_bytes() == b"second"
    assert sorted(p.name for p in (h / "inbox").iterdir()) == [
        "evil.txt",
        "scan (2).pdf",
        "scan.pdf",
    ]
    default = await ada.http.post(
        "/api/file/upload",
        files={"file": ("a.txt", b"a")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert default.status_code == 201 and default.json()["files"][0]["path"] == "~/uploads/a.txt"
    r = await ada.http.post(
        "/api/file/upload", files={"other": ("a.txt", b"a")}, headers={"X-CSRF-Token": ada.csrf}
    )
    assert r.status_code == 400
    r = await ada.http.post(
        "/api/file/upload",
        content=b'--xx\r\nContent-Disposition: form-data; name="file"; filename="t.txt"\r\n\r\ncut',
        headers={"X-CSRF-Token": ada.csrf, "content-type": "multipart/form-data; boundary=xx"},
    )
    assert r.status_code == 400 and "ended early" in r.text
    assert not (h / "uploads" / "t.txt").exists()
    assert not [p for p in (h / "uploads").iterdir() if p.name.startswith(".skald-")]


async def test_uploads_are_capped_by_the_configured_size(
    ada: Client, homes: dict[str, Path], runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = msgspec.structs.replace(runtime.config.assistant, upload_max_mb=1)
    monkeypatch.setattr(runtime, "config", msgspec.structs.replace(runtime.config, assistant=small))
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": "big"},
        files={"file": ("big.bin", os.urandom(1024 * 1024 + 200_000))},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 413 and error_of(r) == "too_large"
    assert list((homes["ada"] / "big").iterdir()) == []
    ok = await ada.http.post(
        "/api/file/upload",
        params={"path": "big"},
        files={"file": ("fits.bin", os.urandom(1000_000))},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert ok.status_code == 201


async def test_look_alike_names_are_refused_with_a_400_that_names_the_character(
    ada: Client, homes: dict[str, Path]
) -> None:
    h = homes["ada"]
    for name, why in (
        ("p\u0430ypal.pdf", "U+0430 CYRILLIC SMALL LETTER A"),
        ("report\u2024pdf", "U+2024 ONE DOT LEADER looks like '.'"),
        ("a\u2028b.txt", "U+2028 LINE SEPARATOR"),
    ):
        r = await ada.http.post(
            "/api/file/upload",
            params={"path": "~/inbox"},
            files={"file": (name, b"%PDF", "application/pdf")},
            headers={"X-CSRF-Token": ada.csrf},
        )
        assert r.status_code == 400 and why in r.json()["error"]["message"], r.text
        r = await ada.call("PATCH", "/api/file", json={"from": "hello.txt", "to": f"~/{name}"})
        assert r.status_code == 400 and why in r.text, r.text
    assert (h / "hello.txt").exists()
    assert not (h / "inbox").exists() or list((h / "inbox").iterdir()) == []


async def test_names_that_read_differently_from_what_they_are_are_refused(
    ada: Client, homes: dict[str, Path]
) -> None:
    h = homes["ada"]
    spoof = "invoice\u202efdp.exe"  # shows as "invoiceexe.pdf"
    for name in (spoof, "zero\u200bwidth.txt"):
        r = await ada.http.post(
            "/api/file/upload",
            params={"path": "~/inbox"},
            files={"file": (name, b"MZ", "application/octet-stream")},
            headers={"X-CSRF-Token": ada.csrf},
        )
        assert r.status_code == 400 and "format characters" in r.text, r.text
        assert "\u202e" not in r.text
    assert not (h / "inbox").exists() or list((h / "inbox").iterdir()) == []
    r = await ada.call("PATCH", "/api/file", json={"from": "hello.txt", "to": f"~/{spoof}"})
    assert r.status_code == 400 and "format characters" in r.text
    assert (h / "hello.txt").exists()
    r = await ada.call("POST", "/api/file", json={"path": f"~/{spoof}", "content": "x"})
    assert r.status_code == 400
    assert sorted(p.name for p in h.iterdir() if "\u202e" in p.name) == []
    # A decomposed name is stored composed (NFC), the form the approval rules compare.
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": "~/inbox"},
        files={"file": ("cafe\u0301.txt", b"x", "text/plain")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 201 and r.json()["files"][0]["path"] == "~/inbox/caf\u00e9.txt"
    assert [p.name for p in (h / "inbox").iterdir()] == ["caf\u00e9.txt"]
    r = await ada.call("PATCH", "/api/file", json={"from": "hello.txt", "to": "he\u0301llo.txt"})
    assert r.status_code == 200 and (h / "h\u00e9llo.txt").exists()


async def test_read_only_places_refuse_writes(ada: Client, homes: dict[str, Path]) -> None:
    docs_before = snapshot(Path(__file__).parent.parent / "docs")
    writes = [
        ("POST", "/api/file", {"json": {"path": "docs/README.md", "content": "defaced"}}),
        ("POST", "/api/file", {"json": {"path": "docs/new", "mkdir": True}}),
        ("POST", "/api/file", {"json": {"path": "~/docs/x.md", "content": "x"}}),
        ("PATCH", "/api/file", {"json": {"from": "docs/README.md", "to": "~/stolen.md"}}),
        ("PATCH", "/api/file", {"json": {"from": "hello.txt", "to": "docs/hello.txt"}}),
        ("DELETE", "/api/file", {"params": {"path": "docs/README.md"}}),
        ("POST", "/api/file", {"json": {"path": "user-memory/x.md", "content": "x"}}),
        ("POST", "/api/file", {"json": {"path": "shared-memory/x.md", "content": "x"}}),
        ("DELETE", "/api/file", {"params": {"path": "user-memory/x.md"}}),
        ("PATCH", "/api/file", {"json": {"from": "hello.txt", "to": "user-memory/h.md"}}),
    ]
    for method, url, kw in writes:
        r = await ada.call(method, url, **kw)
        assert r.status_code == 403, (method, kw, r.text)
        assert error_of(r) == "read_only"
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": "docs"},
        files={"file": ("x.txt", b"x")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 403
    assert snapshot(Path(__file__).parent.parent / "docs") == docs_before
    assert (homes["ada"] / "hello.txt").exists()


async def test_notes_are_browsable_read_only(
    ada: Client, runtime: Runtime, household: dict[str, str]
) -> None:
    user = await runtime.core.registry.get_user(household["ada"])
    assert user is not None
    store = (await runtime.user_runtime(user)).handle.store
    await store.note_put("people/bob.md", "# Bob\n")
    await store.note_put("index.md", "- people/bob.md — Bob\n")
    await runtime.shared_memory.note_put("house/bins.md", "Tuesday\n", household["mum"])
    top = (await ada.call("GET", "/api/files/dir", params={"path": "user-memory"})).json()
    assert (top["path"], top["virtual"], top["writable"]) == ("user-memory", True, False)
    assert [(e["name"], e["type"]) for e in top["entries"]] == [
        ("people", "dir"),
        ("index.md", "file"),
    ]
    people = (await ada.call("GET", "/api/files/dir", params={"path": "user-memory/people"})).json()
    assert people["entries"][0]["path"] == "user-memory/people/bob.md"
    r = await ada.call("GET", "/api/file", params={"path": "user-memory/people/bob.md"})
    assert r.status_code == 200 and r.content == b"# Bob\n"
    assert r.headers["content-type"].startswith("text/markdown")
    r = await ada.call("GET", "/api/file", params={"path": "shared-memory/house/bins.md"})
    assert r.content == b"Tuesday\n"
    r = await ada.call("GET", "/api/file", params={"path": "user-memory/none.md"})
    assert r.status_code == 404
    r = await ada.call("GET", "/api/files/dir", params={"path": "user-memory/nothing"})
    assert r.status_code == 404
    r = await ada.call("GET", "/api/files/zip", params={"path": "user-memory"})
    assert r.status_code == 400


async def test_mum_cannot_see_adas_notes(
    make_client: MakeClient, runtime: Runtime, household: dict[str, str]
) -> None:
    ada = await signed_in(make_client, "ada")
    user = await runtime.core.registry.get_user(household["ada"])
    assert user is not None
    await (await runtime.user_runtime(user)).handle.store.note_put("mine.md", "ada only")
    assert (
        await ada.call("GET", "/api/file", params={"path": "user-memory/mine.md"})
    ).status_code == 200
    mum = await signed_in(make_client, "mum")
    r = await mum.call("GET", "/api/file", params={"path": "user-memory/mine.md"})
    assert r.status_code == 404 and "ada only" not in r.text


# -- ZIP ------------------------------------------------------------------------------------


async def test_zip_download(ada: Client, homes: dict[str, Path], runtime: Runtime) -> None:
    h = homes["ada"]
    plant(homes)
    (h / "notes" / "photos").mkdir()
    (h / "notes" / "photos" / "a.jpg").write_bytes(os.urandom(200_000))
    (h / "notes" / "photos" / "b.jpg").write_bytes(os.urandom(200_000))
    status, headers, chunks = await raw_get(runtime, ada, "/api/files/zip", {"path": "notes"})
    assert status == 200, chunks
    assert headers["content-type"] == "application/zip"
    assert headers["content-disposition"].startswith('attachment; filename="notes.zip"')
    assert len(chunks) >= 4, "the ZIP was not streamed"
    data = b"".join(chunks)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert sorted(archive.namelist()) == [
            "notes/photos/",
            "notes/photos/a.jpg",
            "notes/photos/b.jpg",
            "notes/plan.md",
        ]
        assert archive.read("notes/plan.md") == b"# Plan\nbuy milk\n"
        assert archive.read("notes/photos/b.jpg") == (h / "notes" / "photos" / "b.jpg").read_bytes()
    whole = await ada.call("GET", "/api/files/zip")
    assert whole.status_code == 200
    with zipfile.ZipFile(io.BytesIO(whole.content)) as archive:
        names = archive.namelist()
        assert "home/hello.txt" in names
        assert not any("mum" in n or "etc" in n or "outside" in n or "secret" in n for n in names)
    assert SECRET.encode() not in whole.content
    r = await ada.call("GET", "/api/files/zip", params={"path": "hello.txt"})
    assert r.status_code == 400
    docs = await ada.call("GET", "/api/files/zip", params={"path": "docs"})
    assert docs.status_code == 200 and "docs.zip" in docs.headers["content-disposition"]


# -- planted links, every route ------------------------------------------------------------

ESCAPING = [*escaping("mum"), "to_mum/private"]


def reads(path: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("GET", "/api/file", {"params": {"path": path}}),
        ("GET", "/api/file", {"params": {"path": path, "download": "1"}}),
        ("GET", "/api/files/dir", {"params": {"path": path}}),
        ("GET", "/api/files/zip", {"params": {"path": path}}),
    ]


def writes(path: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("POST", "/api/file", {"json": {"path": path, "content": "planted"}}),
        ("POST", "/api/file", {"json": {"path": f"{path}/new.txt", "content": "planted"}}),
        ("POST", "/api/file", {"json": {"path": f"{path}/newdir", "mkdir": True}}),
        ("PATCH", "/api/file", {"json": {"from": f"{path}/diary.txt", "to": "~/got.txt"}}),
        ("PATCH", "/api/file", {"json": {"from": "hello.txt", "to": f"{path}/hello.txt"}}),
        ("DELETE", "/api/file", {"params": {"path": f"{path}/diary.txt"}}),
        ("DELETE", "/api/file", {"params": {"path": f"{path}/private", "recursive": "1"}}),
    ]


@pytest.mark.parametrize("path", ESCAPING)
async def test_every_route_refuses_planted_links(
    ada: Client, homes: dict[str, Path], path: str
) -> None:
    plant(homes)
    before = snapshot(homes["mum"], homes["outside"])
    for method, url, kw in reads(path) + writes(path):
        r = await ada.call(method, url, **kw)
        assert r.status_code == 403, f"{method} {url} {kw}: {r.status_code} {r.text}"
        assert error_of(r) == "forbidden"
        assert SECRET not in r.text
    r = await ada.http.post(
        "/api/file/upload",
        params={"path": path},
        files={"file": ("x.txt", b"planted")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 403, r.text
    assert snapshot(homes["mum"], homes["outside"]) == before
    assert (homes["ada"] / "hello.txt").read_text() == "hello\n"
    assert not (homes["ada"] / "got.txt").exists()


async def test_deleting_or_moving_a_planted_link_touches_only_the_link(
    ada: Client, homes: dict[str, Path]
) -> None:
    plant(homes)
    before = snapshot(homes["mum"], homes["outside"])
    r = await ada.call("PATCH", "/api/file", json={"from": "to_mum", "to": "moved_link"})
    assert r.status_code == 200 and r.json()["type"] == "symlink"
    assert (homes["ada"] / "moved_link").is_symlink()
    for link in ("moved_link", "to_etc", "to_root", "dangling", "secret_link.txt", "notes/mid"):
        r = await ada.call("DELETE", "/api/file", params={"path": link, "recursive": "1"})
        assert r.status_code == 204, (link, r.text)
        assert not (homes["ada"] / link).is_symlink()
    assert snapshot(homes["mum"], homes["outside"]) == before


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/",
        "../{mum}/private/diary.txt",
        "~/../{mum}/private/diary.txt",
        "~{mum}/private/diary.txt",
        "/home/skald/../{mum}/private/diary.txt",
        "{mum_home}/private/diary.txt",
        "notes/../../{mum}/private",
    ],
)
async def test_no_path_reaches_another_members_home(
    ada: Client, homes: dict[str, Path], household: dict[str, str], path: str
) -> None:
    path = path.format(mum=household["mum"], mum_home=homes["mum"])
    before = snapshot(homes["mum"])
    for method, url, kw in reads(path) + writes(path):
        r = await ada.call(method, url, **kw)
        assert r.status_code in (400, 403), f"{method} {url} {kw}: {r.status_code} {r.text}"
        assert SECRET not in r.text
    assert snapshot(homes["mum"]) == before


async def test_bad_paths_are_clear_4xx(ada: Client, homes: dict[str, Path]) -> None:
    for params in (
        {"path": "a\x00b"},
        {"path": "x" * 5000},
        {"path": ""},
        {"path": "a/" + "n" * 300},
    ):
        r = await ada.call("GET", "/api/file", params=params)
        assert r.status_code == 400, (params, r.text)
        error_of(r)


async def test_children_have_no_files(make_client: MakeClient, household: dict[str, str]) -> None:
    tim = await signed_in(make_client, "tim")
    for method, url in (
        ("GET", "/api/files/places"),
        ("GET", "/api/files/dir"),
        ("GET", "/api/files/zip"),
        ("POST", "/api/file/upload"),
    ):
        r = await tim.call(method, url)
        assert r.status_code == 403 and error_of(r) == "forbidden"


async def test_a_client_leaving_mid_zip_stops_the_work_and_leaks_nothing(
    ada: Client, homes: dict[str, Path], runtime: Runtime
) -> None:
    folder = homes["ada"] / "many"
    folder.mkdir()
    for n in range(40):
        (folder / f"{n:02}.mp4").write_bytes(os.urandom(256 * 1024))
    app = create_app(runtime)
    first_chunk = asyncio.Event()
    bodies = 0

    def open_fds() -> int:
        return sum(1 for _ in Path("/proc/self/fd").iterdir())

    async def receive() -> dict[str, Any]:
        await first_chunk.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal bodies
        if message["type"] == "http.response.body" and message.get("body"):
            bodies += 1
            first_chunk.set()
            await asyncio.sleep(0.01)

    scope = asgi_scope(ada, "GET", "/api/files/zip", "path=many")
    baseline = open_fds()
    await asyncio.wait_for(app(scope, receive, send), 10)
    assert 1 <= bodies < 100  # ~160 chunks if it had run to the end
    for _ in range(100):  # the generator is closed by a worker once its step ends
        if open_fds() <= baseline:
            break
        await asyncio.sleep(0.02)
    assert open_fds() <= baseline
