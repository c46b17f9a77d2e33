"""Skald's own address pool for the members' networks: read from this host's routes,
refused when a route outside it covers it, carved into free subnets, reported by doctor."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import msgspec
import pytest
from prerequisites import unavailable

from skald.config import Config, SandboxConfig
from skald.ops.checks_base import Context
from skald.ops.checks_host import check_sandbox_network
from skald.paths import DataLayout
from skald.sandbox.network import Route, free_subnets, host_routes, pool_conflict

Net = ipaddress.IPv4Network

ROUTE_TABLE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
br-1\t0000D50A\t00000000\t0001\t0\t0\t0\tF0FFFFFF\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
"""


def test_host_routes_are_read_from_the_kernel_table_without_the_default_route(
    tmp_path: Path,
) -> None:
    table = tmp_path / "route"
    table.write_text(ROUTE_TABLE)
    assert host_routes(table) == [
        Route("docker0", Net("172.17.0.0/16")),
        Route("br-1", Net("10.213.0.0/28")),
        Route("eth0", Net("192.0.2.0/24")),
    ]
    assert host_routes(tmp_path / "missing") == []


def test_a_pool_covered_by_an_outside_route_is_refused_with_the_route_named() -> None:
    pool = Net("10.213.0.0/16")
    lan = pool_conflict(pool, [Route("eth0", Net("10.0.0.0/8"))])
    assert lan is not None and "10.0.0.0/8" in lan and "eth0" in lan and "subnet_pool" in lan
    part = pool_conflict(pool, [Route("wg0", Net("10.213.128.0/17"))])
    assert part is None  # inside the pool: only taken, not a conflict
    assert pool_conflict(pool, [Route("eth0", Net("192.168.1.0/24"))]) is None
    # Half in, half out: a conflict.
    assert pool_conflict(Net("10.213.0.0/16"), [Route("x", Net("10.212.0.0/15"))]) is not None


def test_free_subnets_skip_every_taken_range_in_order() -> None:
    pool = Net("10.213.0.0/26")
    taken = [Net("10.213.0.0/28"), Net("10.213.0.32/29"), Net("172.17.0.0/16")]
    assert list(free_subnets(pool, 28, taken)) == [Net("10.213.0.16/28"), Net("10.213.0.48/28")]
    assert list(free_subnets(pool, 28, [Net("10.0.0.0/8")])) == []


def test_the_pool_is_checked_when_the_configuration_is_read() -> None:
    with pytest.raises(msgspec.ValidationError, match="not an IPv4 network"):
        msgspec.convert({"subnet_pool": "fd00::/64"}, SandboxConfig)
    with pytest.raises(msgspec.ValidationError, match="larger than the pool"):
        msgspec.convert({"subnet_pool": "10.213.0.0/30"}, SandboxConfig)


async def test_doctor_fails_a_pool_that_overlaps_a_route_of_this_host(tmp_path: Path) -> None:
    # A route of the host's own interfaces: a Docker network another test is making
    # (same machine, other worker) can be gone by the time the doctor reads the table.
    routes = [
        r
        for r in host_routes()
        if r.net.prefixlen <= 28 and not r.iface.startswith(("br-", "docker", "veth"))
    ]
    if not routes:
        unavailable("this host has no route to test against")
    inside = next(routes[0].net.subnets(new_prefix=28))
    config = Config(sandbox=SandboxConfig(subnet_pool=str(inside), subnet_prefix=28))
    ctx = Context(layout=DataLayout(tmp_path), config=config, environ={})
    finding = await check_sandbox_network(ctx)
    assert finding.status == "fail" and str(routes[0].net) in finding.finding
    assert finding.fix is not None and "subnet_pool" in finding.fix
    # The default pool on this host is fine (Docker not asked here: skipped after that).
    ok = await check_sandbox_network(
        Context(layout=DataLayout(tmp_path), config=Config(), environ={})
    )
    assert ok.status == "skip" and "10.213.0.0/16" in ok.finding


def test_a_bad_pool_in_the_environment_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    from skald.config import load_config
    from skald.errors import ConfigError

    with pytest.raises(ConfigError, match=r"sandbox\.subnet_pool: 'nonsense' is not an IPv4"):
        load_config(tmp_path, {"SKALD_SANDBOX_SUBNET_POOL": "nonsense"})
    config = load_config(tmp_path, {"SKALD_SANDBOX_SUBNET_POOL": "10.99.0.0/20"})
    assert config.sandbox.subnet_pool == "10.99.0.0/20"


@pytest.mark.docker
async def test_doctor_repeats_the_running_servers_sandbox_reasons(tmp_path: Path) -> None:
    """What /api/health of the server at the configured address says about sandboxes
    that could not be made shows up in `skald doctor`."""
    import http.server
    import json
    import threading

    from sandbox_support import docker_client

    from skald.config import ServerConfig

    reason = "the sandbox of 1 member(s) could not be made: the pool is exhausted"

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"status": "degraded", "version": "0", "reasons": [reason]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = docker_client()
    try:
        config = Config(server=ServerConfig(host="127.0.0.1", port=server.server_address[1]))
        ctx = Context(layout=DataLayout(tmp_path), config=config, environ={})
        ctx.docker_client = client
        finding = await check_sandbox_network(ctx)
        assert finding.status == "warn" and reason in finding.finding, finding
    finally:
        server.shutdown()
        server.server_close()
        client.close()
