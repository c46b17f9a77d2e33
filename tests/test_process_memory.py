"""How `skald serve` keeps its memory at rest (issue 22, goal 5): counted in a fresh
interpreter, never timed or measured in bytes (bench/bench_web.py does that)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Six threads, each holding its first malloc while glibc's arenas are counted
# (malloc_info writes one <heap> element per arena).
ARENAS = """
import ctypes, sys, threading
import skald.server
if sys.argv[1] == "serve":
    skald.server._fewer_malloc_arenas()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.open_memstream.restype = ctypes.c_void_p
both = threading.Barrier(7)
def thread():
    libc.malloc(4000)  # a thread's first malloc picks, or makes, its arena
    both.wait()
    both.wait()
threads = [threading.Thread(target=thread) for _ in range(6)]
for t in threads:
    t.start()
both.wait()
text, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(text.value.decode().count("<heap nr="))
both.wait()
for t in threads:
    t.join()
"""


def _arenas(how: str, **env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", ARENAS, how],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_the_server_keeps_two_malloc_arenas_however_many_threads_it_runs() -> None:
    # Without the limit every new thread got an arena of its own (one per database
    # thread), each keeping what it freed.
    assert _arenas("plain") == 7
    assert _arenas("serve") == 2


def test_a_self_hosters_own_arena_limit_is_left_as_it_is() -> None:
    assert _arenas("serve", MALLOC_ARENA_MAX="4") == 4
