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
- The connection goes to an address that was checked (`PinnedBackend.connect_tcp` in
  `pinned_transport.py` looks the name up itself and connects to the result). TLS still verifies the certificate for
  the name and sends it as SNI, and `Host` is the name: httpcore takes both from the URL,
  not from the socket.

Trap: checking the name, then letting the HTTP client connect by name, looks the name up
twice: a DNS server answering a public address first and 127.0.0.1 second (rebinding)
gets through. Never hand the name to a connector that resolves it again.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable

from skald.errors import InvalidInputError

__all__ = [
    "EndpointRefusedError",
    "Resolver",
    "check_host",
    "is_public",
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
