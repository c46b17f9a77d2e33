"""Addresses for the members' sandbox networks: small subnets from a range Skald owns.

Each member with network access gets a bridge network of their own, with one subnet
(default a /28) carved from `[sandbox] subnet_pool` (default 10.213.0.0/16) and given to
Docker explicitly, so Docker's default pools (about 30 networks in all, shared with
everything else on the host) are never used.

- A subnet is free when it overlaps no Docker network on the engine (any owner) and no
  route of this host. Docker refuses an overlapping pool itself, so two instances picking
  the same subnet at once lose nothing: the loser tries the next one.
- The pool as a whole must not overlap a host route that is not inside it (a LAN route
  such as 10.0.0.0/8 would shadow the sandboxes' addresses): that is refused with the
  route named, in `/api/health`, in `skald doctor` and in the member's chat.

Trap: routes *inside* the pool are normal (Docker adds one per bridge, ours and other
instances'); they only mark those subnets as taken.

The gateway of a member's bridge is this host: a sandbox reaches every service of the
host that listens on all addresses. Skald's own server refuses requests from the pool
(`in_pool`, used by the API's edge) unless `[sandbox] allow_skald_access`; the others
are listed by `skald doctor` (`listening_on_all_addresses`, from /proc/net/tcp{,6}).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

Net = ipaddress.IPv4Network


class Route(NamedTuple):
    """One IPv4 route of this host."""

    iface: str
    net: Net


def host_routes(table: Path = Path("/proc/net/route")) -> list[Route]:
    """This host's IPv4 routes, default routes left out ([] when the table is unreadable)."""
    try:
        lines = table.read_text(encoding="ascii", errors="replace").splitlines()[1:]
    except OSError:
        return []
    routes: list[Route] = []
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest = socket.inet_ntoa(struct.pack("<I", int(fields[1], 16)))
            mask = socket.inet_ntoa(struct.pack("<I", int(fields[7], 16)))
            net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        except (ValueError, struct.error, OSError):
            continue
        if net.prefixlen == 0:
            continue  # the default route covers everything and says nothing
        routes.append(Route(fields[0], net))
    return routes


def pool_conflict(pool: Net, routes: Iterable[Route]) -> str | None:
    """Why `pool` cannot be used on this host (a route covering part of it from outside),
    or None."""
    for route in routes:
        if route.net.overlaps(pool) and not route.net.subnet_of(pool):
            return (
                f"the sandbox address pool {pool} overlaps this host's route to "
                f"{route.net} (via {route.iface}); set [sandbox] subnet_pool to a free range"
            )
    return None


def docker_subnets(networks: Iterable[Any]) -> list[Net]:
    """The IPv4 subnets of Docker networks (SDK objects or their attrs dicts)."""
    out: list[Net] = []
    for network in networks:
        attrs = network if isinstance(network, dict) else network.attrs
        for config in (attrs.get("IPAM") or {}).get("Config") or []:
            try:
                net = ipaddress.ip_network(str(config.get("Subnet", "")), strict=False)
            except ValueError:
                continue
            if isinstance(net, ipaddress.IPv4Network):
                out.append(net)
    return out


def free_subnets(pool: Net, prefix: int, taken: Iterable[Net]) -> Iterable[Net]:
    """The pool's subnets of size `prefix` that overlap nothing in `taken`, in order."""
    busy = [t for t in taken if t.overlaps(pool)]
    for candidate in pool.subnets(new_prefix=prefix):
        if not any(candidate.overlaps(t) for t in busy):
            yield candidate


def capacity(pool: Net, prefix: int) -> int:
    return 1 << (prefix - pool.prefixlen)


def in_pool(client_host: str | None, pool: Net) -> bool:
    """Whether a peer address (as the server saw it; an IPv4-mapped IPv6 spelling
    included) is in the sandboxes' pool. Anything unparsable is not."""
    if not client_host:
        return False
    try:
        address = ipaddress.ip_address(client_host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return isinstance(address, ipaddress.IPv4Address) and address in pool


_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
_ANY = {"00000000", "00000000000000000000000000000000", "0000000000000000FFFF000000000000"}


def listening_on_all_addresses(proc_net: Path = Path("/proc/net")) -> list[int]:
    """TCP ports of this host (its network namespace) listening on 0.0.0.0 or ::, so
    reachable from every sandbox through its gateway; sorted, each once."""
    ports: set[int] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if address.upper() in _ANY:
                ports.add(int(port, 16))
    return sorted(ports)
