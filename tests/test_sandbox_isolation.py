"""A hostile member in their own sandbox, against real containers: no raw sockets, no
way to another member's container, no standing root, nothing root makes left setuid or
foreign-owned in the home, no command outliving its call or a server crash, networks
from Skald's own address pool that go with their member, and a sandbox that cannot be
made says why."""

from __future__ import annotations

import asyncio
import ipaddress
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from prerequisites import unavailable
from sandbox_support import (  # noqa: F401
    as_service_account,
    docker_fixture,
    remove_instance_containers,
    run_in_sandbox,
    sandbox_runtime_fixture,
)

from skald.agent.cancel import CancelScope
from skald.agent.tools import ToolContext
from skald.config import SandboxConfig
from skald.core.runtime import Runtime
from skald.sandbox.execute import run_command
from skald.sandbox.manager import LABEL_INSTANCE, LABEL_USER
from skald.sandbox.tool import ExecuteCmdTool

pytestmark = pytest.mark.docker

RAW = """python3 - <<'EOF'
import socket
for name, args in (("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0x0806)),
                   ("raw", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))):
    try:
        socket.socket(*args).close()
        print(name, "open")
    except OSError as e:
        print(name, "refused", e.errno)
EOF"""


async def _root(rt: Runtime, user_id: str, command: str) -> str:
    """A root shell in the member's container (what a maintainer script could do)."""
    assert rt.sandbox is not None
    client = rt.sandbox.client()
    name = rt.sandbox.container_name(user_id)

    def run() -> str:
        out = client.containers.get(name).exec_run(["bash", "-c", command], user="0:0")
        return str(out.output.decode())

    return await asyncio.to_thread(run)


def _subnet(docker: Any, name: str) -> ipaddress.IPv4Network:
    attrs = docker.networks.get(name).attrs
    return ipaddress.IPv4Network(attrs["IPAM"]["Config"][0]["Subnet"])


async def test_one_sandbox_can_neither_sniff_nor_reach_another_members(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user.id
    # Bob's command serves on 8080 while Ada looks for it.
    server = asyncio.create_task(
        run_in_sandbox(rt, bob, "exec python3 -m http.server 8080", timeout_s=120)
    )
    await run_in_sandbox(rt, ada, "true")
    async with asyncio.timeout(30):
        while "200" not in await _root(  # noqa: ASYNC110
            rt, bob, "curl -s -o /dev/null -w '%{http_code}' localhost:8080"
        ):
            await asyncio.sleep(0.2)

    # Each on a network of their own, with a small subnet from Skald's pool.
    pool = ipaddress.IPv4Network(rt.sandbox.config.subnet_pool)
    nets = {u: rt.sandbox.network_name(u) for u in (ada, bob)}
    for user_id, net in nets.items():
        container = docker.containers.get(rt.sandbox.container_name(user_id))
        assert list(container.attrs["NetworkSettings"]["Networks"]) == [net]
        subnet = _subnet(docker, net)
        assert subnet.subnet_of(pool) and subnet.prefixlen == rt.sandbox.config.subnet_prefix
        labels = docker.networks.get(net).attrs["Labels"]
        assert labels[LABEL_INSTANCE] == rt.sandbox.instance_id and labels[LABEL_USER] == user_id
        host = container.attrs["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and "NET_RAW" not in host["CapAdd"]
        assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert _subnet(docker, nets[ada]) != _subnet(docker, nets[bob])
    bob_ip = docker.containers.get(rt.sandbox.container_name(bob)).attrs["NetworkSettings"][
        "Networks"
    ][nets[bob]]["IPAddress"]

    # The member: no capabilities, no way to gain any, no sudo, no raw socket.
    me = await run_in_sandbox(
        rt,
        ada,
        "grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; command -v sudo || echo no-sudo; "
        + RAW,
    )
    assert "CapEff:\t0000000000000000" in me.output and "CapPrm:\t0000000000000000" in me.output
    assert "NoNewPrivs:\t1" in me.output and "no-sudo" in me.output
    assert "packet refused 1" in me.output and "raw refused 1" in me.output, me.output
    # Not even root in the container may open one (NET_RAW is dropped for everybody).
    as_root = await _root(rt, ada, RAW)
    assert "packet refused 1" in as_root and "raw refused 1" in as_root, as_root
    # Bob's server is out of reach from Ada's sandbox (another network, another subnet).
    probe = await run_in_sandbox(
        rt, ada, f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://{bob_ip}:8080; echo \" $?\""
    )
    assert probe.output.split()[-1] in ("7", "28"), probe.output  # refused or timed out
    assert not probe.output.startswith("200")
    server.cancel()
    with pytest.raises(asyncio.CancelledError):
        await server


async def test_root_in_a_sandbox_leaves_no_device_setuid_or_root_file_in_the_home(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    home = rt.core.layout.home(ada)
    attempt = (
        "mknod ~/null c 1 3 && echo made-device; "
        "cp /bin/bash ~/rootsh && chmod 4755 ~/rootsh && ls -ln ~/rootsh; "
        "mkdir -p ~/d && touch ~/d/f && chmod 2755 ~/d; echo done"
    )
    result = await run_in_sandbox(rt, ada, attempt.replace("~", "/home/skald"), as_root=True)
    assert "made-device" not in result.output and "Operation not permitted" in result.output
    assert " 0 0 " in result.output, result.output  # it really was root's, setuid, inside
    assert not (home / "null").exists()
    for path in (home / "rootsh", home / "d", home / "d" / "f"):
        info = path.stat()
        assert rt.sandbox is not None and info.st_uid == rt.sandbox.uid, path
        assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID), (path, oct(info.st_mode))


SLEEPERS = "ps -eo args | grep -E '^sleep (1000|1001|1002)' || true"


async def test_detached_and_scrubbed_processes_end_with_their_call(
    sandbox_runtime: Runtime,
) -> None:
    rt = sandbox_runtime
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    result = await run_in_sandbox(
        rt,
        ada,
        "env -i setsid sleep 1000 >/dev/null 2>&1 < /dev/null & "
        "(env -i setsid --fork nohup sleep 1001 >/dev/null 2>&1 &) ; "
        "nohup sleep 1002 >/dev/null 2>&1 & "
        "sleep 0.3; ps -eo args | grep -cE '^sleep (1000|1001|1002)'",
    )
    assert result.exit_code == 0 and result.output.strip() == "3", result.output
    left = await run_in_sandbox(rt, ada, SLEEPERS)
    assert not left.output.strip(), left.output
    # A command that kills its own wrapper (which would have cleaned up; only a uid-0
    # member can, as the tests' is) still leaves nothing: Skald sees the signal's exit
    # status and kills as root.
    killer = await run_in_sandbox(
        rt,
        ada,
        "env -i setsid sleep 1000 >/dev/null 2>&1 </dev/null & sleep 0.2; "
        "pkill -KILL -f '^bash -c pidfile='",
    )
    assert killer.exit_code == 137, killer
    left = await run_in_sandbox(rt, ada, SLEEPERS)
    assert not left.output.strip(), left.output


async def test_a_sandbox_that_cannot_be_made_says_why_in_health_and_chat(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user.id
    await run_in_sandbox(rt, ada, "true")
    # A pool with room for exactly one member's subnet: Ada's.
    ada_net = _subnet(docker, rt.sandbox.network_name(ada))
    rt.sandbox.config = SandboxConfig(
        memory_mb=512, subnet_pool=str(ada_net), subnet_prefix=ada_net.prefixlen
    )
    await run_in_sandbox(rt, ada, "true")  # Ada's still fits
    tool = ExecuteCmdTool(rt.sandbox, lambda: rt.member(bob))
    ctx = ToolContext(conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None)  # type: ignore[arg-type]
    result = await tool.run({"command": "echo hi"}, ctx)
    assert result.is_error and "did not run" in result.content
    assert f"address pool {ada_net} is exhausted" in result.content, result.content
    status, reasons = rt.health()
    assert status == "degraded"
    assert any("1 member(s)" in r and "exhausted" in r for r in reasons), reasons
    assert not any("bob" in r for r in reasons)
    # Room again (Ada deleted): Bob's sandbox is made and the reason goes away.
    await rt.delete(await rt.core.registry.get_user(ada))  # type: ignore[arg-type]
    assert not docker.networks.list(names=[rt.sandbox.network_name(ada)])
    result = await tool.run({"command": "echo hi"}, ctx)
    assert not result.is_error, result.content
    assert rt.health() == ("ok", [])


async def test_networks_go_with_their_member_and_sweeps_spare_other_installations(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user
    for user in (ada, bob):
        await run_in_sandbox(rt, user.id, "true")
    # A second installation on the same engine, with a member of the same id.
    other = "other" + rt.sandbox.instance_id
    stranger_net = docker.networks.create(
        f"skald-{other}-{ada.id}-net", labels={LABEL_INSTANCE: other, LABEL_USER: ada.id}
    )
    stranger = docker.containers.create(
        rt.sandbox.image,
        ["sleep", "60"],
        name=f"skald-{other}-{ada.id}",
        labels={LABEL_INSTANCE: other, LABEL_USER: ada.id},
        network=stranger_net.name,
    )
    try:
        stranger.start()
        await rt.deactivate(ada)
        assert not docker.containers.list(
            all=True, filters={"name": rt.sandbox.container_name(ada.id)}
        )
        assert not docker.networks.list(names=[rt.sandbox.network_name(ada.id)])
        # Bob's network disappears behind Skald's back into an orphan of the same label:
        # the sweep removes what is this instance's and not wanted, nothing else.
        orphan = docker.networks.create(
            f"skald-{rt.sandbox.instance_id}-gone-net",
            labels={LABEL_INSTANCE: rt.sandbox.instance_id, LABEL_USER: "gone0000"},
        )
        await rt.sandbox.reconcile()
        assert not docker.networks.list(names=[orphan.name])
        assert docker.networks.list(names=[rt.sandbox.network_name(bob.id)])
        await rt.delete(bob)
        assert not docker.networks.list(names=[rt.sandbox.network_name(bob.id)])
        assert not docker.containers.list(
            all=True, filters={"label": f"{LABEL_INSTANCE}={rt.sandbox.instance_id}"}
        )
        # The other installation's container and network are untouched, and running.
        stranger.reload()
        assert stranger.status == "running"
        assert docker.networks.list(names=[stranger_net.name])
    finally:
        await asyncio.to_thread(remove_instance_containers, docker, other)


async def test_install_packages_runs_apt_as_root_and_takes_nothing_but_names(
    sandbox_runtime: Runtime,
) -> None:
    from skald.sandbox.tool import InstallPackagesTool

    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    tool = InstallPackagesTool(rt.sandbox, lambda: rt.member(ada))
    assert tool.always_ask and tool.kind == "exec"
    ctx = ToolContext(conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None)  # type: ignore[arg-type]
    for bad in (["--allow-unauthenticated"], ["./x.deb"], ["hello=2.10-3"], ["a b"], []):
        refused = await tool.run({"packages": bad}, ctx)
        assert refused.is_error and "package names" in refused.content, bad
    before = await run_in_sandbox(rt, ada, "command -v hello || echo none")
    assert before.output.strip() == "none"
    result = await tool.run({"packages": ["hello"]}, ctx)
    if result.is_error and ("Temporary failure" in result.content or "Could not" in result.content):
        unavailable(f"no Debian mirror reachable from the sandbox: {result.content[-300:]}")
    assert not result.is_error, result.content
    after = await run_in_sandbox(rt, ada, "hello")
    assert after.output.strip() == "Hello, world!", after.output


async def test_a_pool_overlapping_a_host_route_makes_no_network_and_says_why(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    from skald.sandbox.network import host_routes

    rt = sandbox_runtime
    assert rt.sandbox is not None
    routes = [r for r in host_routes() if r.net.prefixlen <= 24]
    assert routes, "Docker's own bridge gives this host at least one route"
    inside = next(routes[0].net.subnets(new_prefix=24))
    rt.sandbox.config = SandboxConfig(memory_mb=512, subnet_pool=str(inside), subnet_prefix=28)
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    tool = ExecuteCmdTool(rt.sandbox, lambda: rt.member(ada))
    ctx = ToolContext(conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None)  # type: ignore[arg-type]
    result = await tool.run({"command": "echo hi"}, ctx)
    assert result.is_error and f"overlaps this host's route to {routes[0].net}" in result.content
    assert not docker.networks.list(names=[rt.sandbox.network_name(ada)])
    assert any("overlaps" in r for r in rt.health()[1])
    # The watcher's look at the daemon finds it too, before any member asks.
    tool.manager.failures.clear()
    assert await rt.sandbox.check() is False  # already ok: not "just came back"
    assert any(r.startswith("the sandbox address pool") for r in rt.health()[1])


async def test_a_non_root_members_command_cannot_kill_its_wrapper_nor_keep_a_leftover(
    sandbox_runtime: Runtime, docker: Any, tmp_path: Path
) -> None:
    """As installed (a normal service account), the member is not uid 0: the root wrapper
    is out of the command's reach, and it cleans up after it."""
    homes = tmp_path / "homes"
    async with as_service_account(sandbox_runtime, docker, homes, "n") as (manager, _, cid):
        r = await run_command(
            manager,
            cid,
            "env -i setsid sleep 1000 >/dev/null 2>&1 </dev/null & sleep 0.2; "
            "pkill -KILL -f '^bash -c pidfile=' 2>&1; grep CapEff /proc/self/status",
            workdir="/home/skald",
            timeout_s=20,
            max_bytes=4096,
        )
        assert r.exit_code == 0 and "Operation not permitted" in r.output, r.output
        assert "CapEff:\t0000000000000000" in r.output
        left = await asyncio.to_thread(
            lambda: docker.containers.get(cid).exec_run(["sh", "-c", SLEEPERS]).output
        )
        assert not left.strip(), left


async def test_a_forged_pidfile_cannot_turn_the_stop_against_the_container(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    """The command's pidfile is the member's to write: pid 1 in it must not make Skald's
    root killer take the whole container down (`kill -- -1`)."""
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    await run_in_sandbox(rt, ada, "true")
    container = docker.containers.get(rt.sandbox.container_name(ada))
    started = container.attrs["State"]["StartedAt"]
    forged = await run_in_sandbox(
        rt, ada, "for f in /tmp/.skald-cmd-*.pid; do echo 1 > $f; done; sleep 30", timeout_s=1
    )
    assert forged.timed_out
    container.reload()
    assert container.status == "running"
    assert container.attrs["State"]["StartedAt"] == started
    assert "sleep infinity" in await _root(rt, ada, "ps -eo args")
    left = await run_in_sandbox(rt, ada, "ps -eo args | grep -c '^sleep 30' || true")
    assert left.output.strip() == "0", left.output
