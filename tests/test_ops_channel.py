"""The instance lock and the local ops channel (`skald/ops/channel.py`, `/api/ops/*`).

In process: the gate in front of the app (token, loopback, exactly one header; a plain
404 for everything else, every method). Against a real server: the lock refuses a
second `skald serve`, the token file lives as long as the server, sessions never open
the routes, and the client tells "nothing serving" from "serving but not answering".
"""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from conftest import PASSWORD, TEST_ENV
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, free_port, household

from skald.api.app import create_asgi
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import SkaldError
from skald.ops.channel import (
    OPS_HEADER,
    InstanceBusyError,
    InstanceLock,
    holder,
    is_serving,
    ops_request,
    read_token,
    remove_token,
    token_path,
    write_token,
)
from skald.paths import DataLayout

TOKEN = "the-test-ops-token"
NOT_FOUND = {"error": {"code": "not_found", "message": "Not Found"}}


# -- the lock and the token file ---------------------------------------------------------


def test_lock_is_exclusive_across_processes_and_names_its_holder(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    assert not is_serving(layout)
    with InstanceLock(layout, "serve", host="127.0.0.1", port=9999):
        assert is_serving(layout)
        info = holder(layout)
        assert info is not None and info.role == "serve" and info.port == 9999
        code = (
            "import sys; from pathlib import Path; from skald.paths import DataLayout;"
            "from skald.ops.channel import InstanceLock, is_serving;"
            f"l = DataLayout(Path({str(layout.root)!r}));"
            "assert is_serving(l);"
            "InstanceLock(l, 'serve').acquire()"
        )
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        assert r.returncode != 0
        assert "another Skald is already serving this data directory" in r.stderr
        # In this process too: the lock is per open file, not per process.
        with pytest.raises(InstanceBusyError, match="already serving"):
            InstanceLock(layout, "serve").acquire()
        with pytest.raises(InstanceBusyError, match="stop it first"):
            InstanceLock(layout, "restore").acquire()
    assert not is_serving(layout)
    assert holder(layout) is None
    assert stat.S_IMODE((layout.root / ".serve.lock").stat().st_mode) == 0o600


def test_busy_message_names_a_running_backup(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data")
    with InstanceLock(layout, "backup"), pytest.raises(InstanceBusyError, match="`skald backup`"):
        InstanceLock(layout, "serve").acquire()


def test_token_file_is_private_fresh_and_removed_only_by_its_owner(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data").ensure()
    first = write_token(layout)
    assert stat.S_IMODE(token_path(layout).stat().st_mode) == 0o600
    assert read_token(layout) == first
    second = write_token(layout)
    assert second != first and read_token(layout) == second
    remove_token(layout, first)  # an older server's exit must not take a newer token away
    assert read_token(layout) == second
    remove_token(layout, second)
    assert read_token(layout) is None
    assert [p.name for p in layout.root.iterdir() if "ops.token" in p.name] == []


# -- the gate, in process ----------------------------------------------------------------


@pytest.fixture
async def ops_app(runtime: Runtime, household: dict[str, str]) -> AsyncIterator[Runtime]:
    yield runtime


def _client(
    runtime: Runtime, peer: str = "127.0.0.1", token: str | None = TOKEN
) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_asgi(runtime, ops_token=token), client=(peer, 5))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def test_status_and_integrity_with_the_token(ops_app: Runtime) -> None:
    async with _client(ops_app) as http:
        login = await http.post("/api/auth/login", json={"username": "ada", "password": PASSWORD})
        assert login.status_code == 200
        r = await http.get("/api/ops/status", headers={OPS_HEADER: TOKEN})
        assert r.status_code == 200, r.text
        assert r.headers["x-skald-ops"] == "1"
        body = r.json()
        assert body["version"] and body["pid"] > 0 and body["uptime_s"] >= 0
        assert body["containers"] == []  # sandbox disabled in tests
        users = {u["username"]: u for u in body["users"]}
        assert users["ada"] == {
            "username": "ada",
            "role": "member",
            "active": True,
            "encrypted": True,
            "unlocked": True,
        }
        assert users["mum"]["unlocked"] is False
        # Created after boot and never signed in: not open yet, encrypted or not.
        assert users["tim"]["encrypted"] is False and users["tim"]["unlocked"] is False

        r = await http.get("/api/ops/integrity", headers={OPS_HEADER: TOKEN})
        assert r.status_code == 200, r.text
        checks = {c["name"]: c for c in r.json()["databases"]}
        assert set(checks) == {"registry", "owner:ada"}
        assert all(c["ok"] and c["detail"] == "ok" for c in checks.values())


async def test_everything_else_gets_the_plain_404(ops_app: Runtime) -> None:
    async with _client(ops_app) as http:
        unknown = await http.get("/api/no-such-route")
        assert unknown.status_code == 404 and unknown.json() == NOT_FOUND
        admin = await http.post("/api/auth/login", json={"username": "mum", "password": PASSWORD})
        csrf = {"X-CSRF-Token": admin.json()["csrf_token"]}
        cases: list[tuple[str, str, dict[str, str | bytes]]] = [
            ("GET", "/api/ops/status", {}),  # a session (an admin's) is not enough
            ("GET", "/api/ops/integrity", csrf),
            ("POST", "/api/ops/backup", csrf),
            ("GET", "/api/ops/status", {OPS_HEADER: "wrong"}),
            ("GET", "/api/ops/status", {OPS_HEADER: TOKEN[:-1]}),
            ("GET", "/api/ops/status", {OPS_HEADER: "ünïcödé".encode()}),
            ("DELETE", "/api/ops/status", {}),  # no 405 either
            ("GET", "/api/ops/backup", {}),
            ("GET", "/api/ops", {}),
            ("GET", "/api/ops/", {}),
            ("GET", "/api/ops/nothing-here", {}),
            ("GET", "/api//ops/status", {}),
        ]
        for method, path, headers in cases:
            r = await http.request(method, path, headers=headers, json={})
            assert r.status_code == 404, (method, path, headers, r.status_code)
            assert r.json() == NOT_FOUND and "x-skald-ops" not in r.headers
            assert r.headers["content-type"] == unknown.headers["content-type"]
        # The same header twice is refused even if one copy is right.
        r = await http.get("/api/ops/status", headers=[(OPS_HEADER, TOKEN), (OPS_HEADER, "x")])
        assert r.status_code == 404


async def test_token_from_another_host_or_without_a_server_token_is_refused(
    ops_app: Runtime,
) -> None:
    for peer in ("192.168.1.20", "10.0.0.2", "::ffff:192.168.1.20", "testclient"):
        async with _client(ops_app, peer=peer) as http:
            r = await http.get("/api/ops/status", headers={OPS_HEADER: TOKEN})
            assert r.status_code == 404, peer
    for peer in ("::1", "::ffff:127.0.0.1", "127.0.0.2"):
        async with _client(ops_app, peer=peer) as http:
            r = await http.get("/api/ops/status", headers={OPS_HEADER: TOKEN})
            assert r.status_code == 200, peer
    async with _client(ops_app, token=None) as http:
        for sent in ("", "None", TOKEN):
            r = await http.get("/api/ops/status", headers={OPS_HEADER: sent})
            assert r.status_code == 404


async def test_backup_route_validates_its_body(ops_app: Runtime, tmp_path: Path) -> None:
    async with _client(ops_app) as http:
        headers = {OPS_HEADER: TOKEN}
        r = await http.post("/api/ops/backup", json={"out": "relative.tar"}, headers=headers)
        assert r.status_code == 400 and "absolute" in r.json()["error"]["message"]
        r = await http.post("/api/ops/backup", json={"quick": "yes"}, headers=headers)
        assert r.status_code == 400
        r = await http.post("/api/ops/backup", json={"bogus": 1}, headers=headers)
        assert r.status_code == 400
        out = tmp_path / "x.tar"
        r = await http.post(
            "/api/ops/backup", json={"quick": True, "out": str(out)}, headers=headers
        )
        assert r.status_code == 200, r.text
        assert r.json()["path"] == str(out) and r.json()["bytes"] == out.stat().st_size
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        r = await http.post("/api/ops/backup", json={"out": str(out)}, headers=headers)
        assert r.status_code == 400 and "already exists" in r.json()["error"]["message"]


# -- against a real server -----------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path) as srv:
        yield srv


def test_second_serve_on_one_data_dir_refuses(server: ServerProcess) -> None:
    other_port = free_port()
    r = server.cli("serve", "--host", "127.0.0.1", "--port", str(other_port))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("skald: another Skald is already serving this data directory")
    assert "Traceback" not in r.stderr
    # The first one is unharmed and its token still works.
    token = (server.data / "ops.token").read_text().strip()
    r2 = httpx.get(f"{server.url}/api/ops/status", headers={OPS_HEADER: token}, timeout=10)
    assert r2.status_code == 200


def test_real_server_token_lifecycle_and_sessions(server: ServerProcess) -> None:
    token_file = server.data / "ops.token"
    token = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    api = Api(server.url)
    api.login(ADMIN, ADMIN_PW)
    try:
        for method, path in (
            ("GET", "/api/ops/status"),
            ("GET", "/api/ops/integrity"),
            ("POST", "/api/ops/backup"),
            ("PUT", "/api/ops/status"),
        ):
            r = api.request(method, path, json={})
            assert r.status_code == 404 and r.json() == NOT_FOUND, (method, path)
        # The token is the key, not the session; both together work, of course.
        r = api.get("/api/ops/status", headers={OPS_HEADER: token})
        assert r.status_code == 200 and r.json()["users"][0]["username"] == ADMIN
    finally:
        api.close()
    layout = DataLayout(server.data)
    config = load_config(server.data, server.env)
    status = asyncio.run(ops_request(layout, config, "GET", "/api/ops/status"))
    assert status is not None and status["pid"] == server.proc.pid  # type: ignore[union-attr]
    code, _ = server.stop()
    assert code == 0
    assert not token_file.exists()
    assert not is_serving(layout)
    assert asyncio.run(ops_request(layout, config, "GET", "/api/ops/status")) is None
    # The next start writes a new token.
    server.start()
    assert token_file.read_text().strip() != token


def test_client_says_when_a_server_holds_the_lock_but_cannot_be_asked(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path / "data").ensure()
    config = load_config(layout.root, TEST_ENV)
    port = free_port()  # nobody listens there
    with InstanceLock(layout, "serve", host="127.0.0.1", port=port):
        with pytest.raises(SkaldError, match=r"ops\.token is missing"):
            asyncio.run(ops_request(layout, config, "GET", "/api/ops/status"))
        write_token(layout)
        with pytest.raises(SkaldError, match="does not answer"):
            asyncio.run(ops_request(layout, config, "GET", "/api/ops/status", timeout=2))
    with InstanceLock(layout, "backup"), pytest.raises(SkaldError, match="`skald backup`"):
        asyncio.run(ops_request(layout, config, "GET", "/api/ops/status"))


async def test_runtime_fixture_without_gate_never_serves_ops(runtime: Runtime) -> None:
    # create_app alone (no gate): the routes' own guard refuses, whatever is sent.
    from skald.api.app import create_app

    transport = httpx.ASGITransport(app=create_app(runtime), client=("127.0.0.1", 5))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        r = await http.get("/api/ops/status", headers={OPS_HEADER: TOKEN})
        assert r.status_code == 404 and r.json() == NOT_FOUND
