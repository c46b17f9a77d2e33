"""The shared multipart reader (`skald/api/multipart.py`) on its own: what its callers
see, and that a file it was saving never stays half-written, whoever stops the reading.
(The routes that use it are covered through HTTP by test_upload_multipart.py,
test_chat_multipart.py and test_storage_limits.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from skald.api.multipart import Part, read_multipart
from skald.errors import InvalidInputError
from skald.files.router import FileEntry, PathRouter, Resolved, make_dir

BOUNDARY = "b0undary"


class _Request:
    """What the reader uses of a request: its content type and its body, piece by piece."""

    def __init__(self, body: bytes, piece: int) -> None:
        self.headers = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
        self._pieces = [body[i : i + piece] for i in range(0, len(body), piece)]

    async def stream(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def _part(name: str, data: bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
    return head + data + b"\r\n"


def _body(*parts: bytes, closed: bool = True) -> bytes:
    return b"".join(parts) + (f"--{BOUNDARY}--\r\n".encode() if closed else b"")


@pytest.fixture
def inbox(tmp_path: Path) -> tuple[Resolved, Path]:
    home = tmp_path / "home"
    home.mkdir()
    folder = PathRouter(home, tmp_path / "docs").writable("inbox")
    make_dir(folder)
    return folder, home / "inbox"


def _reader(body: bytes, piece: int) -> Any:
    return read_multipart(_Request(body, piece), 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("piece", [1, 7, 4096])
async def test_saved_parts_end_as_entries_and_the_others_come_as_data(
    inbox: tuple[Resolved, Path], piece: int
) -> None:
    folder, path = inbox
    body = _body(_part("note", b"hello"), _part("file", b"x" * 300, "a.txt"))
    seen: list[object] = []
    note = b""
    async with aclosing(_reader(body, piece)) as events:
        async for event in events:
            if isinstance(event, Part):
                seen.append(event.segment.name)
                if event.segment.filename:
                    await event.save(folder, event.segment.filename)
            elif isinstance(event, FileEntry):
                seen.append(event.name)
            elif event is None:
                seen.append(None)
            else:
                note += event
    assert seen == ["note", None, "file", "a.txt"]
    assert note == b"hello"
    assert (path / "a.txt").read_bytes() == b"x" * 300


async def test_a_caller_that_stops_while_a_file_is_open_leaves_nothing(
    inbox: tuple[Resolved, Path],
) -> None:
    folder, path = inbox
    body = _body(_part("file", b"x" * 300, "a.txt"))
    with pytest.raises(RuntimeError, match="the caller refuses"):
        async with aclosing(_reader(body, 7)) as events:
            async for event in events:
                if isinstance(event, Part):
                    await event.save(folder, "a.txt")
                    assert list(path.iterdir()) != []  # the hidden temporary file
                    raise RuntimeError("the caller refuses")
    assert list(path.iterdir()) == []


async def test_a_body_cut_short_leaves_nothing(inbox: tuple[Resolved, Path]) -> None:
    folder, path = inbox
    body = _body(_part("file", b"x" * 300, "a.txt"), closed=False)[:-10]
    with pytest.raises(InvalidInputError, match="the multipart body ended early"):
        async with aclosing(_reader(body, 64)) as events:
            async for event in events:
                if isinstance(event, Part):
                    await event.save(folder, "a.txt")
    assert list(path.iterdir()) == []
