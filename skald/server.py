"""`skald serve`: Granian, embedded in our own event loop, serving the ASGI app.

Embedded (not Granian's process manager) because the server holds unlocked keys and
live agent loops in memory: there must be exactly one process and one loop, and we
must own the shutdown order (close sockets, stop services, lock databases).
"""

from __future__ import annotations

import asyncio
import errno
import signal
import socket

from granian.constants import Interfaces
from granian.server.embed import Server

from skald.api.app import create_asgi
from skald.config import Config
from skald.core.runtime import Runtime
from skald.errors import SkaldError
from skald.log import get_logger
from skald.paths import DataLayout

log = get_logger("skald.server")

SHUTDOWN_GRACE_S = 8.0


def _check_port(host: str, port: int) -> None:
    # Granian reports a busy port deep inside its worker; say it plainly up front.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SkaldError(
                    f"port {port} on {host} is already in use (is Skald already running?)"
                ) from None
            raise SkaldError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


async def serve(layout: DataLayout, config: Config, host: str, port: int) -> int:
    _check_port(host, port)
    runtime = await Runtime.boot(layout, config, listen=(host, port))
    server = Server(
        create_asgi(runtime),
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
        # on its own.
        runtime.hub.close_all()
        server.stop()  # type: ignore[no-untyped-call]

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)
    log.info("listening", url=f"http://{host}:{port}/", data=str(layout.root))
    try:
        await server.serve()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runtime.shutdown()
    return 0
