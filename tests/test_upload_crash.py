"""A server killed (kill -9) in the middle of an upload (issue 12, item 10).

The upload's temporary file stays behind: it must never be listed, zipped or backed up,
and the next start removes it (and nothing else).
"""

from __future__ import annotations

import json
import os
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import PASSWORD
from harness import Api, ServerProcess

from skald import walk as tree
from skald.files.homes import remove_partial_writes

BOUNDARY = "crashtestboundary"


def _partials(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if tree.is_temp_name(p.name)]


def _wait_for(what: str, check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_kill_during_an_upload_leaves_a_file_nobody_sees_and_the_next_start_removes(
    tmp_path: Path,
) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user("ada", PASSWORD)
    srv.start()
    release = threading.Event()
    try:
        api = Api(srv.url)
        home = srv.data / "homes" / api.login("ada", PASSWORD)["id"]
        inbox = home / "inbox"
        inbox.mkdir(parents=True)
        (inbox / "kept.txt").write_text("mine")
        (inbox / ".skald-notes.tmp").write_text("the member's own file, not ours")

        def body() -> Iterator[bytes]:
            yield (
                f"--{BOUNDARY}\r\n"
                'Content-Disposition: form-data; name="file"; filename="big.bin"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            yield b"x" * (512 * 1024)
            release.wait(60)
            yield b"y" * 1024 + f"\r\n--{BOUNDARY}--\r\n".encode()

        def upload() -> None:
            headers = {
                "X-CSRF-Token": api.csrf,
                "content-type": f"multipart/form-data; boundary={BOUNDARY}",
            }
            uploader = httpx.Client(base_url=srv.url, cookies=api.http.cookies, timeout=60)
            try:
                uploader.post("/api/file/upload?path=~/inbox", content=body(), headers=headers)
            except httpx.HTTPError:
                pass  # the server died under it
            finally:
                uploader.close()

        thread = threading.Thread(target=upload)
        thread.start()
        _wait_for(
            "the upload's temporary file",
            lambda: any(p.stat().st_size >= 512 * 1024 for p in _partials(inbox)),
        )
        [partial] = _partials(inbox)

        listing = api.get("/api/files/dir", params={"path": "inbox"}).json()
        assert [e["name"] for e in listing["entries"]] == [".skald-notes.tmp", "kept.txt"]
        zipped = api.get("/api/files/zip", params={"path": "inbox"})
        assert zipped.status_code == 200 and partial.name.encode() not in zipped.content

        srv.proc.kill()  # type: ignore[union-attr]
        srv.proc.wait()  # type: ignore[union-attr]
        release.set()
        thread.join(30)
        assert partial.exists(), "kill -9 should leave the partial file behind"

        r = srv.cli("backup")
        assert r.returncode == 0, r.stderr
        archive = Path(r.stdout.split("Backup written: ", 1)[1].split("\n", 1)[0])
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            manifest = json.loads(tar.extractfile("backup.json").read())  # type: ignore[union-attr]
        inbox_arc = f"homes/{home.name}/inbox"
        assert f"{inbox_arc}/kept.txt" in names
        assert not any(tree.is_temp_name(n.rsplit("/", 1)[-1]) for n in names)
        assert not any(partial.name in e["path"] for e in manifest["files"])

        srv.start()
        _wait_for("the start-up sweep", lambda: not partial.exists())
        assert (inbox / ".skald-notes.tmp").exists() and (inbox / "kept.txt").exists()
        assert "removed partial uploads" in srv.log()
    finally:
        release.set()
        srv.close()


def test_the_sweep_spares_a_write_that_started_after_the_server(tmp_path: Path) -> None:
    homes = tmp_path / "homes"
    (homes / "ada1" / "deep" / "er").mkdir(parents=True)
    old = homes / "ada1" / "deep" / "er" / tree.temp_name()
    old.write_text("left by a killed server")
    started = time.time() + 5  # `old` predates this start
    young = homes / "ada1" / tree.temp_name()
    young.write_text("an upload running now")
    os.utime(young, (started + 1, started + 1))
    (homes / "ada1" / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    outside = tmp_path / "elsewhere" / tree.temp_name()
    outside.write_text("not in a home")
    removed = remove_partial_writes(homes, started)
    assert removed == [f"ada1/deep/er/{old.name}"]
    assert not old.exists() and young.exists() and outside.exists()


@pytest.mark.parametrize("name", [".skald-0123.tmp", ".skald-0123456789abcdeF.tmp", "skald-x.tmp"])
def test_only_names_of_our_exact_shape_are_temporary(name: str) -> None:
    assert not tree.is_temp_name(name)
    assert tree.is_temp_name(tree.temp_name())
