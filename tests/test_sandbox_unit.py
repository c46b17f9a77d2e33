"""Sandbox pieces that need no Docker: the image tag, the probe, paths, configuration,
and how the server behaves when Docker cannot be reached."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from conftest import PASSWORD, TEST_ENV

from skald.agent.cancel import CancelScope
from skald.agent.tools import ToolContext
from skald.api.app import create_app
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.execute import (
    PROBE_COMMANDS,
    commands_block,
    container_workdir,
    parse_probe,
    probe_script,
    safe_probe_name,
)
from skald.sandbox.image import apt_mirror, dockerfile_path, image_tag
from skald.sandbox.tool import ExecuteCmdTool


def test_image_tag_follows_the_dockerfile_content() -> None:
    data = dockerfile_path().read_bytes()
    tag = image_tag()
    assert tag == image_tag(data) and tag.startswith("skald-runtime:v") and len(tag) == 27
    assert image_tag(data + b" ") != tag
    assert image_tag(data.replace(b"jq", b"jq ")) != tag


def test_dockerfile_is_lean_and_names_no_host() -> None:
    text = dockerfile_path().read_text()
    assert "--no-install-recommends" in text and "rm -rf /var/lib/apt/lists/*" in text
    for package in ("python3", "nodejs", "git", "ripgrep", "ffmpeg", "poppler-utils"):
        assert package in text
    for lang in ("eng", "ita", "fra"):
        assert f"tesseract-ocr-{lang}" in text
    assert "://" not in text


def test_probe_script_is_shell_safe_and_never_fails() -> None:
    assert len(set(PROBE_COMMANDS)) == len(PROBE_COMMANDS)
    assert all(safe_probe_name(c) for c in PROBE_COMMANDS)
    assert not safe_probe_name("a;b") and not safe_probe_name("$(x)") and not safe_probe_name("")
    assert probe_script().endswith("; exit 0")
    assert parse_probe("git\n\n  node \ngit\npython3\n") == ["git", "node", "python3"]
    assert parse_probe("") == []


def test_commands_block() -> None:
    assert commands_block([]) == ""
    block = commands_block(["python3", "git"])
    assert "`python3`, `git`" in block and "partial" in block and "execute_cmd" in block


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "/home/skald"),
        ("", "/home/skald"),
        ("~", "/home/skald"),
        ("~/a/b", "/home/skald/a/b"),
        ("projects/x/", "/home/skald/projects/x"),
        ("/tmp", "/tmp"),
        ("a/../../etc", "/home/etc"),
    ],
)
def test_container_workdir(given: str | None, expected: str) -> None:
    assert container_workdir(given) == expected


def test_apt_mirror_is_read_from_the_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
        "\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
    )
    assert apt_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text(
        "deb [arch=amd64] http://other.example/debian/ bookworm main\n"
    )
    assert apt_mirror(tmp_path) == "http://other.example/debian"
    (tmp_path / "sources.list").write_text("deb https://vendor.example/apt stable main\n")
    assert apt_mirror(tmp_path) is None


def test_docker_host_comes_from_docker_host_unless_skald_sets_it(tmp_path: Path) -> None:
    assert load_config(tmp_path, {}).sandbox.docker_host == ""
    env = {"DOCKER_HOST": "tcp://127.0.0.1:1"}
    assert load_config(tmp_path, env).sandbox.docker_host == "tcp://127.0.0.1:1"
    env["SKALD_SANDBOX_DOCKER_HOST"] = "unix:///x.sock"
    assert load_config(tmp_path, env).sandbox.docker_host == "unix:///x.sock"
    sandbox = load_config(tmp_path, {"SKALD_SANDBOX_CPUS": "1.5"}).sandbox
    assert sandbox.cpus == 1.5 and sandbox.memory_mb == 2048 and sandbox.enabled


async def test_without_docker_the_server_runs_degraded(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    env = {
        **TEST_ENV,
        "SKALD_SANDBOX_ENABLED": "true",
        "SKALD_SANDBOX_DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
    }
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    try:
        assert rt.sandbox is not None
        async with asyncio.timeout(10):
            while rt.sandbox.state != "unreachable":  # noqa: ASYNC110 - polls the watcher
                await asyncio.sleep(0.05)
        status, reasons = rt.health()
        assert status == "degraded"
        assert any("no-docker.sock" in r and "sandbox" in r for r in reasons), reasons

        import httpx

        transport = httpx.ASGITransport(app=create_app(rt), client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            body = (await http.get("/api/health")).json()
        assert body["status"] == "degraded" and body["docker"] == "unreachable"

        created = await rt.core.users.create("ada", PASSWORD, "member")
        tool = ExecuteCmdTool(rt.sandbox, lambda: rt.member(created.user.id))
        assert tool.kind == "exec" and not tool.concurrency_safe and not tool.rerun_on_recovery
        ctx = ToolContext(
            conversation_id="c", call_id="k", depth=0, cancel=CancelScope(), sink=lambda e: None
        )
        result = await tool.run({"command": "touch /tmp/never-on-host-93ab"}, ctx)
        assert result.is_error and "not available" in result.content
        assert not await asyncio.to_thread(Path("/tmp/never-on-host-93ab").exists)

        # Deactivation and deletion still work; the containers wait for reconciliation.
        await rt.deactivate(await rt.core.users.get("ada"))
        # The member's runtime offers execute_cmd only with a sandbox.
        bob = await rt.core.users.create("bob", PASSWORD, "member")
        handle = await rt.core.users.unlock("bob", PASSWORD)
        urt = await rt.attach(handle)
        names = [t.name for t in urt._tools(urt.agents["assistant"])]
        assert "execute_cmd" in names
        assert "execute_cmd" not in [t.name for t in urt._tools(urt.agents["kid"])]
        assert bob.user.id in rt.user_runtimes
    finally:
        await rt.shutdown()


async def test_sandbox_disabled_offers_no_command_tool(runtime: Runtime) -> None:
    assert runtime.sandbox is None and runtime.docker_state == "disabled"
    assert runtime.health() == ("ok", [])
    await runtime.core.users.create("ada", PASSWORD, "member")
    urt = await runtime.attach(await runtime.core.users.unlock("ada", PASSWORD))
    names = [t.name for t in urt._tools(urt.agents["assistant"])]
    assert "execute_cmd" not in names
    values = await urt._prompt_values()
    assert values["SANDBOX_COMMANDS"] == ""


async def test_closing_the_sandbox_waits_for_a_docker_call_already_under_way(
    tmp_path: Path,
) -> None:
    """A control call in Docker's thread (a container being created) cannot be
    cancelled: `close` waits for it, so nothing the manager does lands after it returns,
    when a shutdown or a test may be removing the instance's containers."""
    import threading
    import time

    from skald.config import SandboxConfig
    from skald.sandbox.manager import SandboxManager

    async def no_members() -> list[object]:
        return []

    manager = SandboxManager(
        SandboxConfig(),
        instance_id="closing",
        homes_dir=tmp_path / "homes",
        docs_dir=tmp_path / "docs",
        members=no_members,
    )
    started = threading.Event()
    finished: list[float] = []

    def slow_create() -> None:
        started.set()
        time.sleep(0.3)
        finished.append(time.monotonic())

    call = asyncio.ensure_future(manager.call(slow_create))
    assert await asyncio.to_thread(started.wait, 5)
    await manager.close()
    closed = time.monotonic()
    assert finished and finished[0] <= closed
    await call
