"""`skald status` with the server stopped and running, and `skald update` handing over to
the installed update.sh."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from test_doctor import VERSION, Install

from skald import __version__
from skald.cli import main
from skald.core.runtime import Runtime
from skald.core.services import ServiceSpec
from skald.ops.inspect import server_status
from skald.ops.status import Running, ServiceInfo, _services


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Install:
    return Install(tmp_path, monkeypatch)


def _status(environ: dict[str, str], *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main([*argv, "status"], environ=environ, stdout=out)
    return code, out.getvalue()


def _status_json(environ: dict[str, str], *argv: str) -> dict[str, Any]:
    out = io.StringIO()
    code = main([*argv, "status", "--json"], environ=environ, stdout=out)
    assert code == 0
    return dict(json.loads(out.getvalue()))


def test_status_of_a_stopped_install(install: Install) -> None:
    report = _status_json(install.environ)
    assert report["data_dir"] == str(install.data)
    assert report["install_root"] == str(install.root)
    assert report["installed_version"] == VERSION
    assert report["service"]["installed"] is True
    assert report["service"]["enabled"] == "enabled"
    assert report["running"] is None
    assert [u["username"] for u in report["users"]] == [ADMIN]
    assert report["users"][0]["unlocked"] is False
    assert report["containers"] is None  # sandbox disabled in these tests
    code, text = _status(install.environ)
    assert code == 0
    lines = dict(line.split(None, 1) for line in text.splitlines())
    assert lines["installed"].startswith(f"{VERSION} ")
    assert lines["running"] == "no server serves this data directory"
    assert lines["users"] == "1 (server down: all locked)"
    assert lines["containers"] == "none (sandbox disabled)"


def test_status_without_install_or_data(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "SKALD_SANDBOX_ENABLED": "false"}
    code, text = _status(environ, "--data", str(tmp_path / "nowhere"))
    assert code == 0
    assert "service     not installed as a service" in text
    assert "not installed (no install root)" in text
    assert "not set up" in text
    assert not (tmp_path / "nowhere").exists()


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with household(tmp_path / "srv") as srv:
        yield srv


def test_status_of_a_running_server(server: ServerProcess) -> None:
    # Another port in the environment: the lock file tells where the server listens.
    environ = {**server.env, "SKALD_SERVER_PORT": "1"}
    report = _status_json(environ, "--data", str(server.data))
    running = report["running"]
    assert running["version"] == __version__
    assert running["pid"] == server.proc.pid  # type: ignore[union-attr]
    assert running["url"] == server.url
    assert running["uptime_s"] >= 0
    assert report["users"] == [
        {
            "username": ADMIN,
            "role": "admin",
            "active": True,
            "encrypted": True,
            "unlocked": False,
        }
    ]
    api = Api(server.url)
    try:
        api.login(ADMIN, ADMIN_PW)
        report = _status_json(environ, "--data", str(server.data))
        assert report["users"][0]["unlocked"] is True
        code, text = _status(environ, "--data", str(server.data))
        assert code == 0
        lines = dict(line.split(None, 1) for line in text.splitlines())
        assert lines["running"].startswith(f"{__version__}, pid {server.proc.pid}, up ")  # type: ignore[union-attr]
        assert lines["users"] == "1 (1 unlocked)"
        # The server's services, and the admin's own (their data is unlocked now).
        assert lines["services"].endswith(" ok") and "degraded" not in lines["services"]
        names = {s["name"]: s["state"] for s in report["running"]["services"]}
        assert names["session-purge"] == "ok"
    finally:
        api.close()
    server.stop()
    report = _status_json(environ, "--data", str(server.data))
    assert report["running"] is None
    assert report["users"][0]["unlocked"] is False


# -- skald update ---------------------------------------------------------------------------


def test_update_without_an_install_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["update", "--force"], environ={"HOME": str(tmp_path)}, stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("skald: ")]
    assert len(lines) == 1 and "update.sh" in lines[0] and "install.sh | bash" in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "passed"),
    [
        (["update"], []),
        (["update", "--force", "--channel", "nightly"], ["--force", "--channel", "nightly"]),
        (["--data", "/x", "update", "--help"], ["--help"]),
        (["update", "--", "--data", "y"], ["--data", "y"]),
    ],
)
def test_update_execs_the_installed_script(
    install: Install, monkeypatch: pytest.MonkeyPatch, argv: list[str], passed: list[str]
) -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake_execve(path: str, args: list[str], env: dict[str, str]) -> None:
        calls.append((path, list(args), dict(env)))

    monkeypatch.setattr(os, "execve", fake_execve)
    # A broken config.toml must not stop an update (it may be what the update fixes).
    (install.data / "config.toml").write_text("[nope\n")
    main(argv, environ=install.environ, stdout=io.StringIO())
    script = str(install.root / "update.sh")
    assert calls == [(script, [script, *passed], {**install.environ, "SKALD_HOME": script[:-10]})]


async def test_status_names_a_degraded_service_and_its_reason(runtime: Runtime) -> None:
    async def broken() -> None:
        raise OSError("disk on fire")

    runtime.services.initial_backoff_s = 30
    runtime.services.add(ServiceSpec("broken", broken))
    await asyncio.sleep(0.05)
    services = msgspec.convert(
        msgspec.to_builtins((await server_status(runtime.server)).services), list[ServiceInfo]
    )
    run = Running(version="x", services=services, degraded=[s.reason for s in services if s.reason])
    line = _services(run)
    ok = sum(1 for s in services if s.state == "ok")
    assert ok >= 1  # the built-in services run beside the broken one
    assert line.startswith(f"1 degraded, {ok} ok: background service broken is restarting after")
    assert "OSError: disk on fire" in line
