"""`skald serve`: Granian, embedded in our own event loop, serving the ASGI app.

Embedded (not Granian's process manager) because the server holds unlocked keys and
live agent loops in memory: there must be exactly one process and one loop, and we
must own the shutdown order (close sockets, stop services, lock databases).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import gc
import os
import signal
import threading
import time

from granian.constants import Interfaces
from granian.server.embed import Server

import skald.lean  # noqa: F401  (first: httpx and structlog without their CLI extras)
from skald.api.app import create_asgi
from skald.assets import asset_dir
from skald.config import Config
from skald.core.runtime import Runtime
from skald.errors import SkaldError
from skald.features.backups.restart import RESTART, restore_on_request
from skald.files.homes import move_out_of_groups, remove_partial_writes
from skald.log import get_logger
from skald.ops.channel import InstanceLock, bind_error, remove_token, write_token
from skald.paths import DataLayout
from skald.plugins.web import Catalogues

log = get_logger("skald.server")

SHUTDOWN_GRACE_S = 8.0
# mallopt's parameter number for the arena limit (glibc's malloc.h).
M_ARENA_MAX = -8
# Time the socket handlers get to send their close frames before Granian stops.
SOCKETS_CLOSE_S = 0.3


def _check_port(host: str, port: int) -> None:
    # Granian reports a busy port deep inside its worker; say it plainly up front.
    exc = bind_error(host, port)
    if exc is None:
        return
    if exc.errno == errno.EADDRINUSE:
        raise SkaldError(f"port {port} on {host} is already in use (is Skald already running?)")
    raise SkaldError(f"cannot listen on {host}:{port}: {exc.strerror}")


async def serve(layout: DataLayout, config: Config, host: str, port: int) -> int:
    _fewer_malloc_arenas()
    # One process per data directory, for the whole life of this one: two servers would
    # each open the databases and hold their own keys. The lock goes with the process,
    # so a crash or kill -9 never leaves it behind.
    with InstanceLock(layout, "serve", host=host, port=port):
        _check_port(host, port)
        code = await _serve_locked(layout, config, host, port)
        # Still locked: a restore asked for on the Backups page runs now (skald.features.backups.restart).
        docker_host = config.sandbox.docker_host if config.sandbox.enabled else None
        if await restore_on_request(layout, docker_host) is not None:
            return RESTART
        return code


async def _serve_locked(layout: DataLayout, config: Config, host: str, port: int) -> int:
    # A fresh token for the local ops channel (`skald status`, `backup`...) at every start.
    ops_token = await asyncio.to_thread(write_token, layout)
    try:
        return await _run(layout, config, host, port, ops_token)
    finally:
        remove_token(layout, ops_token)


async def _remove_partial_writes(layout: DataLayout, before: float, stop: threading.Event) -> None:
    # Uploads and writes a kill -9 cut off; in the background: homes can be large.
    try:
        removed = await asyncio.to_thread(remove_partial_writes, layout.homes_dir, before, stop)
    except OSError as exc:
        log.warning("could not sweep partial uploads", error=str(exc))
        return
    if removed:
        log.info("removed partial uploads", count=len(removed), first=removed[0])


async def _move_out_of_groups(layout: DataLayout) -> None:
    # What older versions let land in the homes' `shared`, `projects` and `skills`
    # folders (reserved now: out of every member's reach) moves to `shared (own)`, …
    # Before the sandbox watcher looks (it waits for the app): a member's link at
    # `~/shared` moves away before their sandbox needs the name as a mountpoint.
    try:
        moved = await asyncio.to_thread(move_out_of_groups, layout.homes_dir)
    except Exception as exc:  # best effort: a failure here must not stop the start
        log.warning("could not sweep the reserved folders of the homes", error=str(exc))
        return
    if moved:
        log.info("moved files out of reserved folders", count=len(moved), first=moved[0])


def _freeze_the_start() -> None:
    """What the start built (modules, classes, the app's routes: most of the heap) lives
    as long as the process: moved out of the cyclic collector's sight, so a full
    collection later walks only what serving made. Without it every full collection
    walked the whole heap, a 50-60 ms pause of the event loop that landed in a turn
    (bench/README.md, goal 4). No collection first: it cost the start 30-60 ms and found
    about ten objects to free (what it would free stays for good, a few hundred bytes)."""
    gc.freeze()


def _fewer_malloc_arenas() -> None:
    """glibc gives each thread that meets a busy allocator an arena of its own, up to
    eight per core, and an arena keeps what it freed: with a database thread per unlocked
    member, Granian's threads and the Docker pool, that was about 1.2 MiB of the server's
    memory at rest (bench/README.md, goal 5). Two arenas are enough: Python's small
    objects do not use malloc's arenas, and the threads mostly wait on I/O. Set before the
    first thread starts (an arena, once made, stays); a libc that is not glibc is left
    alone. The same as `MALLOC_ARENA_MAX=2`, which a self-hoster may still override."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "gnu_get_libc_version") and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, 2)


async def _run(layout: DataLayout, config: Config, host: str, port: int, ops_token: str) -> int:
    started = time.time()
    runtime = await Runtime.boot(layout, config, listen=(host, port))
    # The translations of every feature, read off the loop before anything is served
    # (a broken file stops the start with a ConfigError naming it).
    try:
        parts = runtime.plugins.web_files()
        catalogues = await asyncio.to_thread(Catalogues, asset_dir("web"), parts)
    except BaseException:
        await runtime.shutdown()
        raise
    await _move_out_of_groups(layout)
    stop_sweep = threading.Event()  # set at shutdown
    sweep = asyncio.create_task(_remove_partial_writes(layout, started, stop_sweep))
    app = create_asgi(runtime, ops_token=ops_token, catalogues=catalogues)
    runtime.app_built.set()
    _freeze_the_start()
    server = Server(
        app,
        address=host,
        port=port,
        interface=Interfaces.ASGINL,
        websockets=True,
        log_enabled=False,
    )
    server.workers_kill_timeout = int(SHUTDOWN_GRACE_S)
    loop = asyncio.get_running_loop()

    def stop(signame: str) -> None:
        log.info("stopping", signal=signame)
        # Sockets first: Granian waits for open connections, and a WebSocket never ends
        # on its own. Their handlers send the "restart" close frame (1012) from their own
        # tasks, so Granian stops a moment later: stopped at once, a loaded machine cut
        # the connections before the frame went out and clients saw a bare drop.
        runtime.events.close_all()
        loop.call_later(SOCKETS_CLOSE_S, server.stop)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)

    async def stop_when_asked() -> None:
        await runtime.stop_requested.wait()
        stop("restore")

    asked = asyncio.create_task(stop_when_asked())
    log.info("listening", url=f"http://{host}:{port}/", data=str(layout.root))
    try:
        await server.serve()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        stop_sweep.set()
        sweep.cancel()
        asked.cancel()
        await runtime.shutdown()
    return 0
