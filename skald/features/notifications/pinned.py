"""Where the server may post a push message: the host is looked up once, every address it
gave is checked, and the connection goes to a checked address.

Rules:
- An IPv4 host written as a number must be written the usual way (`203.0.113.9`).
  `2130706433`, `0x7f000001`, `127.1`, `0x7f.1`, `017700000001`, `0`, `10.1` all reach
  127.0.0.1 or a private network through `inet_aton`, and a check that only parses
  dotted quads waves them through (`check_host`).
- Every address a name resolves to must be public (`is_public`): `ipaddress.is_global`
  (so shared 100.64/10, benchmarking 198.18/15, reserved 240/4, link-local, private and
  loopback are out), and not multicast (which `is_global` lets through on Python 3.11),
  and an IPv4 address carried inside an IPv6 one (mapped, 6to4, NAT64) must be public too.
  One bad address refuses the host: a name that answers "public, private" is an attack.
- The connection goes to an address that was checked (`PinnedBackend.connect_tcp` looks
  the name up itself and connects to the result). TLS still verifies the certificate for
  the name and sends it as SNI, and `Host` is the name: httpcore takes both from the URL,
  not from the socket.

Trap: checking the name, then letting the HTTP client connect by name, looks the name up
twice: a DNS server answering a public address first and 127.0.0.1 second (rebinding)
gets through. Never hand the name to a connector that resolves it again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from skald.errors import InvalidInputError

__all__ = [
    "EndpointRefusedError",
    "PinnedBackend",
    "PinnedTransport",
    "Resolver",
    "check_host",
    "is_public",
    "system_resolve",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

# A last label of digits or 0x-hex: the whole host is a number in some spelling.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.?")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class EndpointRefusedError(Exception):
    """The host resolved to an address the server must not post to."""


def check_host(host: str) -> None:
    """InvalidInputError unless `host` is a name or a number in its canonical spelling."""
    if ":" in host:  # urlsplit gives an IPv6 literal without its brackets
        try:  # every IPv6 spelling means one address to both parsers: no zone ids
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidInputError("the push endpoint's address is not valid") from None
        return
    last = host.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last):
        try:
            canonical = str(ipaddress.IPv4Address(host))
        except ValueError:
            canonical = ""
        if canonical != host:
            raise InvalidInputError("the push endpoint's address is not written the usual way")
        return
    if _NAME.fullmatch(host) is None:
        raise InvalidInputError("the push endpoint's host name is not valid")


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    inner = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if any(address in net for net in _NAT64):
        inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return inner


def is_public(address: Address) -> bool:
    """True for an address on the public internet (see the module's rules)."""
    if isinstance(address, ipaddress.IPv6Address) and address.sixtofour is not None:
        # 6to4 is as public as the IPv4 address inside it; Debian 12's Python (3.11.2)
        # calls all of 2002::/16 not global, newer ones judge the inside, as here.
        return not address.is_multicast and is_public(address.sixtofour)
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        return all(is_public(inner) for inner in _embedded(address))
    return True


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
