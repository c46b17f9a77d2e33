"""Folder watches over /api/ws on the real server: changes are reported, unwatch and
disconnect stop them, and no path leaves the member's places."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Api, ServerProcess, household
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from skald.files.router import PathRouter
from skald.files.watch import DirWatcher

PW = "member's long password"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path, ("ada", PW), ("bo", PW)) as srv:
        yield srv


def _ws(srv: ServerProcess, api: Api) -> ClientConnection:
    ws = connect(
        f"ws://127.0.0.1:{srv.port}/api/ws",
        additional_headers={"Cookie": f"skald_session={api.session_cookie}"},
        origin=Origin(srv.url),
        open_timeout=10,
        legacy=True,  # a plain connection, closed by the test (no context manager)
    )
    assert json.loads(ws.recv(timeout=10))["type"] == "hello"
    return ws


def _next(ws: ClientConnection, *kinds: str, timeout: float = 10) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        event: dict[str, object] = json.loads(
            ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        )
        if event["type"] in kinds:
            return event


def _quiet(ws: ClientConnection, seconds: float) -> list[dict[str, object]]:
    """Every watch event that arrives within `seconds`."""
    seen = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            event = json.loads(ws.recv(timeout=left))
        except TimeoutError:
            break
        if event["type"] in ("dir_changed", "watching", "watch_refused"):
            seen.append(event)
    return seen


def _send(ws: ClientConnection, kind: str, path: str) -> None:
    ws.send(json.dumps({"type": kind, "path": path}))


def _member(srv: ServerProcess, name: str) -> tuple[Api, Path]:
    api = Api(srv.url)
    me = api.login(name, PW)
    home = srv.data / "homes" / str(me["id"])
    home.mkdir(mode=0o700, exist_ok=True)
    return api, home


def test_changes_are_reported_until_unwatched(server: ServerProcess) -> None:
    ada, home = _member(server, "ada")
    (home / "x").mkdir()
    (home / "x" / "old.txt").write_text("old\n")
    ws = _ws(server, ada)
    _send(ws, "watch", "~/x")
    assert _next(ws, "watching", "watch_refused") == {"type": "watching", "path": "~/x"}
    # Nothing changed: nothing reported.
    assert _quiet(ws, 1.5) == []

    # A new entry, through the Files API like the page would.
    r = ada.post("/api/file/upload", params={"path": "~/x"}, files={"file": ("n.txt", b"hi")})
    assert r.status_code in (200, 201), r.text
    assert _next(ws, "dir_changed") == {"type": "dir_changed", "path": "~/x"}
    # Reported once per change, not again on every poll.
    assert _quiet(ws, 1.5) == []

    # A size change and a removal are changes too.
    (home / "x" / "old.txt").write_text("longer now\n")
    assert _next(ws, "dir_changed")["path"] == "~/x"
    (home / "x" / "old.txt").unlink()
    assert _next(ws, "dir_changed")["path"] == "~/x"

    # A new subfolder is; a file rewritten further down is not (the listing of ~/x
    # looks the same: writing into an existing file leaves its folder's mtime alone).
    (home / "x" / "sub").mkdir()
    (home / "x" / "sub" / "deep.txt").write_text("deep\n")
    assert _next(ws, "dir_changed")["path"] == "~/x"
    _quiet(ws, 1.5)  # a second report if the two writes straddled a poll
    (home / "x" / "sub" / "deep.txt").write_text("deeper, and longer\n")
    assert _quiet(ws, 2.5) == []

    _send(ws, "unwatch", "~/x")
    time.sleep(0.3)
    (home / "x" / "after.txt").write_text("after\n")
    assert _quiet(ws, 2.5) == []
    ws.close()
    ada.close()


def test_the_folder_disappearing_is_a_change(server: ServerProcess) -> None:
    ada, home = _member(server, "ada")
    (home / "gone").mkdir()
    ws = _ws(server, ada)
    _send(ws, "watch", "gone")
    assert _next(ws, "watching", "watch_refused")["type"] == "watching"
    (home / "gone").rmdir()
    assert _next(ws, "dir_changed") == {"type": "dir_changed", "path": "gone"}
    assert _quiet(ws, 1.5) == []
    ws.close()
    ada.close()


def test_paths_outside_the_members_places_are_refused(
    server: ServerProcess, tmp_path: Path
) -> None:
    ada, ada_home = _member(server, "ada")
    bo, bo_home = _member(server, "bo")
    (bo_home / "private").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (ada_home / "to_bo").symlink_to(bo_home)
    (ada_home / "to_outside").symlink_to(outside)
    (ada_home / "file.txt").write_text("a file\n")
    ws = _ws(server, ada)
    refused = {
        "~/../" + bo_home.name: "invalid_input",  # `..` is refused before any lookup
        "/etc": "forbidden",
        str(outside): "forbidden",
        "~/to_bo": "forbidden",
        "~/to_bo/private": "forbidden",
        "~/to_outside": "forbidden",
        "~/nothing-here": "not_found",
        "~/file.txt": "invalid_input",
        "user-memory": "invalid_input",
    }
    answers = {}
    for path in refused:
        _send(ws, "watch", path)
        event = _next(ws, "watching", "watch_refused")
        assert event["type"] == "watch_refused" and event["path"] == path, event
        answers[path] = event["code"]
    assert answers == refused
    # A malformed watch is ignored like any malformed message; the socket stays usable.
    ws.send(json.dumps({"type": "watch"}))
    ws.send(json.dumps({"type": "watch", "path": ""}))
    _send(ws, "watch", "~")
    assert _next(ws, "watching", "watch_refused") == {"type": "watching", "path": "~"}
    # The manual is a place of the member's too (read-only): watching it is fine.
    _send(ws, "watch", "docs")
    assert _next(ws, "watching", "watch_refused")["type"] == "watching"
    ws.close()
    ada.close()
    bo.close()


def test_a_few_watches_per_connection(server: ServerProcess) -> None:
    ada, home = _member(server, "ada")
    for i in range(6):
        (home / f"d{i}").mkdir()
    ws = _ws(server, ada)
    answers = []
    for i in range(6):
        _send(ws, "watch", f"~/d{i}")
        answers.append(_next(ws, "watching", "watch_refused"))
    accepted = [a for a in answers if a["type"] == "watching"]
    refused = [a for a in answers if a["type"] == "watch_refused"]
    assert len(accepted) == 4 and len(refused) == 2
    assert all(a["code"] == "invalid_input" for a in refused)
    # Watching again what is watched is no extra watch; unwatching frees a slot.
    _send(ws, "watch", "~/d0")
    assert _next(ws, "watching", "watch_refused")["type"] == "watching"
    _send(ws, "unwatch", "~/d0")
    _send(ws, "watch", "~/d5")
    assert _next(ws, "watching", "watch_refused") == {"type": "watching", "path": "~/d5"}
    (home / "d5" / "f").write_text("f\n")
    (home / "d0" / "f").write_text("f\n")
    assert _next(ws, "dir_changed") == {"type": "dir_changed", "path": "~/d5"}
    assert _quiet(ws, 1.5) == []
    # Another tab of the same member is not told about this tab's watches.
    other = _ws(server, ada)
    (home / "d1" / "g").write_text("g\n")
    assert _next(ws, "dir_changed")["path"] == "~/d1"
    assert _quiet(other, 1.5) == []
    other.close()
    ws.close()
    ada.close()


async def test_polling_stops_when_the_watcher_is_cancelled(tmp_path: Path) -> None:
    """In process: `run` polls only while it runs; `clear` (disconnect) drops every
    watch."""
    home = tmp_path / "home"
    (home / "x").mkdir(parents=True)
    seen: list[str] = []
    first = asyncio.Event()

    def notify(path: str) -> None:
        seen.append(path)
        first.set()

    watcher = DirWatcher(PathRouter(home), notify, poll_s=0.05)
    await watcher.watch("~/x")
    task = asyncio.create_task(watcher.run())
    (home / "x" / "a").write_text("a")
    async with asyncio.timeout(5):
        await first.wait()
    assert seen == ["~/x"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (home / "x" / "b").write_text("b")
    await asyncio.sleep(0.2)
    assert seen == ["~/x"]
    watcher.clear()
    assert watcher.paths == []
    await watcher.poll_once()
    assert seen == ["~/x"]
