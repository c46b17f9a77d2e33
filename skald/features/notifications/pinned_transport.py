"""The push client's transport: httpx's pool on a network backend that connects only to
an address `pinned.py`'s rules accepted, looked up once (those rules and their trap are
in that module's docstring).

Its own module, imported at the first push (`NotificationService._client`, in a
thread): it is what loads httpcore and the CA bundle, which a household without push
devices never needs (bench/README.md, goal 5).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

from skald.features.notifications.pinned import Address, EndpointRefusedError, Resolver

__all__ = ["PinnedBackend", "PinnedTransport", "system_resolve"]


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives for `host` (in the default executor)."""
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"{host} could not be resolved") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to an address of the host that `permit` accepted, looked up once here."""

    def __init__(
        self,
        permit: Callable[[Address], bool],
        resolve: Resolver = system_resolve,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._permit = permit
        self._resolve = resolve
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            found = await asyncio.wait_for(self._resolve(host, port), timeout)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"looking up {host} took too long") from None
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
        if not addresses or not all(self._permit(a) for a in addresses):
            raise EndpointRefusedError(f"{host} does not resolve to public addresses only")
        last: Exception = httpcore.ConnectError(f"{host}: no address answered")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("push endpoints are never Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool on a `PinnedBackend`.

    httpx's own constructor has no way to pass a network backend, so the pool is built
    here (the one attribute `handle_async_request` and `aclose` use) instead of calling
    it; no proxy, ever (a proxy would do the lookup itself).
    """

    def __init__(
        self,
        permit: Callable[[Address], bool],
        *,
        resolve: Resolver = system_resolve,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=PinnedBackend(permit, resolve),
        )
