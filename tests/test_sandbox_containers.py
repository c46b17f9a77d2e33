"""Per-member containers against a real Docker: isolation, identity, network per role,
drift and reuse, deactivation and deletion, orphan sweeps."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from docker import errors as docker_errors
from sandbox_support import (  # noqa: F401
    as_service_account,
    docker_fixture,
    new_member_container,
    remove_instance_containers,
    run_in_sandbox,
    sandbox_runtime_fixture,
)
from tool_support import CTX

from skald.config import SandboxConfig
from skald.core.runtime import Runtime
from skald.sandbox.execute import CommandResult, probe, run_command
from skald.sandbox.image import dockerfile_path, image_tag
from skald.sandbox.manager import (
    LABEL_INSTANCE,
    LABEL_SPEC,
    LABEL_USER,
    SandboxUnavailable,
)

pytestmark = pytest.mark.docker


async def _run(rt: Runtime, username: str, command: str, **kw: Any) -> CommandResult:
    """`run_in_sandbox` for the member named `username`, 20 s unless `kw` says otherwise."""
    kw.setdefault("timeout_s", 20)
    return await run_in_sandbox(rt, (await rt.core.users.get(username)).id, command, **kw)


async def test_two_members_two_containers_isolated(
    sandbox_runtime: Runtime, docker: Any, tmp_path: Path
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ids = {}
    for name in ("ada", "bob"):
        ids[name] = (await rt.core.users.create(name, PASSWORD, "member")).user.id
    (rt.core.layout.home(ids["bob"])).mkdir(parents=True, exist_ok=True)
    bob_mark, host_mark = secrets.token_hex(16), secrets.token_hex(16)
    (rt.core.layout.home(ids["bob"]) / "bob-secret.txt").write_text(bob_mark + "\n")
    (tmp_path / "host-marker.txt").write_text(host_mark + "\n")

    a = await _run(rt, "ada", "echo hi > ~/ada.txt; id -u; id -g; whoami; hostname")
    b = await _run(rt, "bob", "hostname")
    assert a.exit_code == 0 and b.exit_code == 0
    uid, gid, _who, host_a = a.output.split()
    assert (int(uid), int(gid)) == (os.getuid(), os.getgid())
    assert host_a != b.output.strip()
    # Ada's file landed in Ada's home on the host, nowhere else.
    assert (rt.core.layout.home(ids["ada"]) / "ada.txt").read_text() == "hi\n"

    containers = docker.containers.list(
        filters={"label": f"{LABEL_INSTANCE}={rt.sandbox.instance_id}"}
    )
    names = sorted(c.name for c in containers)
    assert names == sorted(rt.sandbox.container_name(i) for i in ids.values())
    assert {c.labels[LABEL_USER] for c in containers} == set(ids.values())
    attrs = containers[0].attrs["HostConfig"]
    assert attrs["Init"] is True and attrs["RestartPolicy"]["Name"] == "unless-stopped"
    assert attrs["Memory"] == 512 * 1024 * 1024 and attrs["PidsLimit"] > 0
    assert attrs["NanoCpus"] > 0 and not attrs["Privileged"]

    look = await _run(
        rt,
        "ada",
        f"ls -a /home; grep -rslF {bob_mark} / --exclude-dir=proc --exclude-dir=sys; "
        f"ls {tmp_path} 2>&1; grep -rslF {host_mark} / --exclude-dir=proc --exclude-dir=sys; "
        "ls -l /var/run/docker.sock /run/docker.sock 2>&1; echo done",
        timeout_s=60,
    )
    out = look.output
    assert bob_mark not in out and host_mark not in out, out
    assert "bob-secret" not in out
    assert "No such file or directory" in out and out.rstrip().endswith("done")
    assert out.splitlines()[:3] == [".", "..", "skald"]

    # No sudo: members have no standing root (install_packages is Skald's root step).
    sudo = await _run(rt, "ada", "command -v sudo || echo no-sudo")
    assert sudo.output.strip() == "no-sudo", sudo.output
    # The docs are there, read-only.
    docs = await _run(rt, "ada", "ls ~/docs; touch ~/docs/x")
    assert "README.md" in docs.output and "Read-only file system" in docs.output


async def test_child_has_no_network_adult_has(sandbox_runtime: Runtime) -> None:
    rt = sandbox_runtime
    await rt.core.users.create("tim", PASSWORD, "children")
    await rt.core.users.create("ada", PASSWORD, "member")
    connect = (
        "python3 -c 'import socket\n"
        "try:\n"
        '    socket.create_connection(("172.17.0.1", 9), 2)\n'
        "except OSError as e:\n"
        "    print(e.errno)'"
    )
    child = await _run(rt, "tim", f"ls /sys/class/net; getent hosts localhost.invalid; {connect}")
    assert child.output.split()[0] == "lo" and "eth0" not in child.output
    assert child.output.split()[-1] == "101"  # ENETUNREACH: no route anywhere
    adult = await _run(rt, "ada", "ls /sys/class/net")
    assert "eth0" in adult.output.split()


async def test_members_sandboxes_cannot_reach_each_other(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    await rt.core.users.create("ada", PASSWORD, "member")
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user
    # Bob's command serves while Ada looks (a server left behind would end with its call).
    server = asyncio.create_task(_run(rt, "bob", "exec python3 -m http.server 8080", timeout_s=120))
    check = "curl -s -o /dev/null -w '%{http_code}' localhost:8080"
    await _run(rt, "ada", "true")
    container = None
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(docker_errors.NotFound):
                container = docker.containers.get(rt.sandbox.container_name(bob.id))
                if "200" in container.exec_run(["sh", "-c", check]).output.decode():
                    break
            await asyncio.sleep(0.2)
    assert container is not None
    networks = container.attrs["NetworkSettings"]["Networks"]
    assert list(networks) == [rt.sandbox.network_name(bob.id)]
    bob_ip = networks[rt.sandbox.network_name(bob.id)]["IPAddress"]
    probe = await _run(
        rt,
        "ada",
        f"curl -s -m 2 -o /dev/null -w '%{{http_code}}' http://{bob_ip}:8080; echo \" $?\"",
    )
    assert probe.output.split()[-1] in ("7", "28"), probe.output  # refused or timed out
    server.cancel()
    with pytest.raises(asyncio.CancelledError):
        await server


async def test_probe_lists_the_usual_commands(sandbox_runtime: Runtime) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    _, _, cid = await new_member_container(rt, "ada")
    found = await probe(rt.sandbox, cid)
    for name in ("python3", "node", "git", "rg", "ffmpeg", "convert", "pdftotext", "tesseract"):
        assert name in found
    assert "cargo" not in found


async def test_drift_recreates_and_unchanged_is_reused(
    sandbox_runtime: Runtime, docker: Any, tmp_path: Path
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    user, role, first = await new_member_container(rt, "ada")
    assert await rt.sandbox.ensure(user, role) == first  # unchanged: the same container

    # Stopped (e.g. by a daemon restart): started again, still the same container.
    await asyncio.to_thread(docker.containers.get(first).stop, timeout=1)
    assert await rt.sandbox.ensure(user, role) == first
    assert docker.containers.get(first).status == "running"

    # An edited Dockerfile means a new tag; the container follows it.
    original = dockerfile_path().read_bytes()
    new_tag = image_tag(original + b"\n# an edit\n")
    assert new_tag != image_tag(original) == rt.sandbox.image
    repo, _, version = new_tag.partition(":")
    docker.images.get(rt.sandbox.image).tag(repo, version)  # stands in for a rebuild
    try:
        rt.sandbox.image = new_tag
        second = await rt.sandbox.ensure(user, role)
        assert second != first
        assert docker.containers.get(second).attrs["Config"]["Image"] == new_tag
        assert not [c for c in docker.containers.list(all=True) if c.id == first]
        assert await rt.sandbox.ensure(user, role) == second
    finally:
        rt.sandbox.image = image_tag(original)
        await asyncio.to_thread(remove_instance_containers, docker, rt.sandbox.instance_id)
        # Another run on the same engine may have removed the shared tag already.
        with contextlib.suppress(docker_errors.ImageNotFound):
            docker.images.remove(new_tag)

    # A limit changed in the configuration is drift too.
    third = await rt.sandbox.ensure(user, role)
    rt.sandbox.config = SandboxConfig(memory_mb=768)
    fourth = await rt.sandbox.ensure(user, role)
    assert fourth != third
    assert docker.containers.get(fourth).attrs["HostConfig"]["Memory"] == 768 * 1024 * 1024


async def test_deactivate_stops_delete_removes_sweep_spares_others(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user
    for user in (ada, bob):
        u, role = await rt.member(user.id)
        await rt.sandbox.ensure(u, role)
    # A container of another Skald installation, and one without any label.
    image = rt.sandbox.image
    stranger = docker.containers.create(
        image, ["sleep", "60"], labels={LABEL_INSTANCE: "other", LABEL_USER: ada.id}
    )
    plain = docker.containers.create(image, ["sleep", "60"])
    try:
        await rt.deactivate(ada)
        # Nothing of a deactivated member's runs or holds an address (the home stays).
        assert not docker.containers.list(
            all=True, filters={"name": rt.sandbox.container_name(ada.id)}
        )
        user, role = await rt.member(ada.id)
        with pytest.raises(SandboxUnavailable):
            await rt.sandbox.ensure(user, role)

        await rt.delete(bob)
        assert not docker.containers.list(
            all=True, filters={"name": rt.sandbox.container_name(bob.id)}
        )
        # An orphan (its member vanished behind Skald's back) goes at reconciliation.
        orphan = rt.sandbox.container_name("gone0000")
        docker.containers.create(
            image,
            ["sleep", "60"],
            name=orphan,
            labels={LABEL_INSTANCE: rt.sandbox.instance_id, LABEL_USER: "gone0000"},
        )
        await rt.sandbox.reconcile()
        assert not docker.containers.list(all=True, filters={"name": orphan})
        # Other installations' containers and unlabelled ones are never touched.
        stranger.reload()
        plain.reload()
    finally:
        stranger.remove(force=True)
        plain.remove(force=True)


async def test_a_container_with_this_instances_name_but_another_installations_label_is_never_adopted(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user
    user, role = await rt.member(ada.id)
    spec = rt.sandbox.spec_for(user, role)
    # Everything matches but the installation: our name, the member, even the spec hash.
    foreign = docker.containers.create(
        rt.sandbox.image,
        ["sleep", "60"],
        name=spec.name,
        labels={
            LABEL_INSTANCE: "another-installation",
            LABEL_USER: ada.id,
            LABEL_SPEC: spec.digest,
        },
    )
    try:
        for _ in range(2):  # a login's ensure, then the reconciliation
            with pytest.raises(SandboxUnavailable, match="exists but is not this Skald's"):
                await rt.sandbox.ensure(user, role)
            await rt.sandbox.reconcile()
            foreign.reload()
            assert foreign.status == "created"  # neither started, nor removed, nor relabelled
            assert foreign.labels[LABEL_INSTANCE] == "another-installation"
        reason = rt.sandbox.failures[ada.id]
        assert spec.name in reason and "remove or rename it" in reason
        assert any("not this Skald's" in r for r in rt.sandbox.health_reasons())
        ur = await rt.attach(await rt.core.users.unlock("ada", PASSWORD))
        tool = ur.tool_named("execute_cmd")
        assert tool is not None
        result = await tool.run({"command": "echo never"}, CTX)
        assert result.is_error and "not this Skald's" in result.content, result.content
        assert "never" not in result.content
    finally:
        foreign.remove(force=True)
    # Once the stranger is gone, the member's own sandbox is made.
    assert await rt.sandbox.ensure(user, role)
    assert ada.id not in rt.sandbox.failures


async def test_member_uid_without_passwd_entry(
    docker: Any, tmp_path: Path, sandbox_runtime: Runtime
) -> None:
    """A host uid the image does not know still gets a name and a home (and no root)."""
    homes = tmp_path / "homes"
    async with as_service_account(sandbox_runtime, docker, homes, "u") as (manager, ada, cid):
        r = await run_command(
            manager,
            cid,
            "id -un; id -u; echo $HOME; touch ~/mine && stat -c %u ~/mine; "
            "su -c id 2>/dev/null || echo no-root",
            workdir="/home/skald",
            timeout_s=20,
            max_bytes=4096,
        )
        assert r.output.split() == ["skald", "4321", "/home/skald", "4321", "no-root"], r.output
        assert (homes / ada / "mine").stat().st_uid == 4321


async def test_links_planted_from_inside_a_sandbox_are_refused_on_the_host(
    sandbox_runtime: Runtime,
) -> None:
    """The container sees none of Bob's home, but a link it writes into Ada's home is read
    by Skald on the host, where the target exists: every host-side path check must refuse it."""
    from skald.agent.tools import ToolContext
    from skald.files.router import PathDeniedError, PathRouter
    from skald.files.tools import file_tools

    rt = sandbox_runtime
    ada = (await rt.core.users.create("ada", PASSWORD, "member")).user.id
    bob = (await rt.core.users.create("bob", PASSWORD, "member")).user.id
    bob_home = rt.core.layout.home(bob)
    bob_home.mkdir(parents=True, exist_ok=True)
    (bob_home / "diary.txt").write_text("bob's diary\n")
    planted = await _run(
        rt,
        "ada",
        f"ln -s {bob_home} ~/bob && ln -s {bob_home}/diary.txt ~/diary.txt && ln -s /etc ~/etc && ls -l ~",
    )
    assert planted.exit_code == 0, planted.output
    router = PathRouter.for_member(rt.core.layout, ada)
    for path in ("~/bob/diary.txt", "~/diary.txt", "~/etc/passwd", "bob", "~/bob"):
        with pytest.raises(PathDeniedError):
            router.resolve(path)
    tools = {t.spec.name: t for t in file_tools(router)}
    from skald.agent.cancel import CancelScope

    ctx = ToolContext(
        conversation_id="c", call_id="x", depth=0, cancel=CancelScope(), sink=None, extras={}
    )  # type: ignore[arg-type]
    for name, args in (
        ("read_file", {"path": "~/diary.txt"}),
        ("list_files", {"path": "~/bob"}),
        ("write_file", {"path": "~/bob/new.txt", "content": "x"}),
        ("grep", {"pattern": "diary", "path": "~"}),
    ):
        result = await tools[name].run(args, ctx)
        assert "bob's diary" not in result.content, (name, result.content)
        if name != "grep":
            assert result.is_error, (name, result.content)
    assert sorted(p.name for p in bob_home.iterdir()) == ["diary.txt"]
