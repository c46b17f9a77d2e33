"""`BlockingStream` (skald/api/streaming.py): a blocking generator served as an async
response body, one step per worker thread, closed as soon as the client leaves."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator

import pytest

from skald.api.streaming import BlockingStream
from skald.files.router import PathDeniedError


async def test_each_step_runs_off_the_loop_and_an_abandoned_stream_is_closed() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []
    closed = threading.Event()

    def steps() -> Generator[bytes, None, None]:
        try:
            for n in range(1000):
                threads.append(threading.get_ident())
                yield str(n).encode()
        finally:
            closed.set()

    stop = threading.Event()
    stream = BlockingStream(steps(), stop)

    async def consume_two() -> list[bytes]:
        got = []
        async for chunk in stream:
            got.append(chunk)
            if len(got) == 2:
                break  # the client left: nobody closes the iterator
        return got

    assert await asyncio.create_task(consume_two()) == [b"0", b"1"]
    for _ in range(200):
        if closed.is_set():
            break
        await asyncio.sleep(0.01)
    assert closed.is_set() and stop.is_set()
    assert loop_thread not in threads


async def test_priming_raises_the_first_steps_error_before_anything_is_sent() -> None:
    def steps() -> Generator[bytes, None, None]:
        raise PathDeniedError("a symbolic link is in the way")
        yield b""

    stream = BlockingStream(steps(), threading.Event())
    with pytest.raises(PathDeniedError):
        await stream.prime()

    def ok() -> Generator[bytes, None, None]:
        yield b""
        yield b"a"
        yield b""
        yield b"b"

    stream = BlockingStream(ok(), threading.Event())
    await stream.prime()
    assert [c async for c in stream] == [b"a", b"b"]


async def test_an_error_after_the_first_chunk_is_raised_for_the_server_to_cut_the_body() -> None:
    closed = threading.Event()

    def steps() -> Generator[bytes, None, None]:
        try:
            yield b"first"
            raise OSError(5, "Input/output error")
        finally:
            closed.set()

    stop = threading.Event()
    stream = BlockingStream(steps(), stop)
    got = []
    with pytest.raises(OSError, match="Input/output"):
        async for chunk in stream:
            got.append(chunk)
    assert got == [b"first"] and stop.is_set() and closed.is_set()
