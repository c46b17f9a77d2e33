"""The real server process: WebSocket revocation, protections at the edge, shutdown,
exit codes, and what a restart keeps."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

PW = "member's long password"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path, ("ada", PW)) as srv:
        yield srv


def _ws(srv: ServerProcess, api: Api, origin: str | None = None) -> ClientConnection:
    return connect(
        f"ws://127.0.0.1:{srv.port}/api/ws",
        additional_headers={"Cookie": f"skald_session={api.session_cookie}"},
        origin=Origin(origin or srv.url),
        open_timeout=10,
        legacy=True,  # a plain connection, closed by the test (no context manager)
    )


def _next(ws: ClientConnection, kind: str, timeout: float = 10) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        event: dict[str, object] = json.loads(
            ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        )
        if event["type"] == kind:
            return event


def test_events_reach_every_tab_and_deactivation_closes_them(server: ServerProcess) -> None:
    admin, ada = Api(server.url), Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    me = ada.login("ada", PW)
    tab1, tab2 = _ws(server, ada), _ws(server, ada)
    for tab in (tab1, tab2):
        assert _next(tab, "hello")["user_id"] == me["id"]
        tab.send("this is not JSON")  # ignored, not fatal
        tab.send(json.dumps({"type": "subscribe"}))
    # A change to Ada's account reaches both tabs.
    assert admin.patch(f"/api/users/{me['id']}", json={"display_name": "Ada L."}).status_code == 200
    for tab in (tab1, tab2):
        assert _next(tab, "user_updated")["user_id"] == me["id"]
    # Deactivation: both sockets are told why and closed before the admin gets the answer.
    assert admin.post(f"/api/users/{me['id']}/deactivate").status_code == 200
    for tab in (tab1, tab2):
        assert "deactivated" in str(_next(tab, "session_revoked")["reason"])
        with pytest.raises(ConnectionClosed) as closed:
            tab.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    assert ada.get("/api/auth/me").status_code == 401


def test_logout_closes_only_that_sessions_socket(server: ServerProcess) -> None:
    phone, laptop = Api(server.url), Api(server.url)
    phone.login("ada", PW)
    laptop.login("ada", PW)
    ws_phone, ws_laptop = _ws(server, phone), _ws(server, laptop)
    _next(ws_phone, "hello")
    _next(ws_laptop, "hello")
    assert phone.post("/api/auth/logout").status_code == 204
    assert _next(ws_phone, "session_revoked")["code"] == "signed_out"
    ws_laptop.send(json.dumps({"type": "pong", "t": 1}))
    assert laptop.get("/api/auth/me").status_code == 200
    ws_laptop.close()


def test_websocket_needs_a_session_and_the_same_origin(server: ServerProcess) -> None:
    api = Api(server.url)
    api.login("ada", PW)
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{server.port}/api/ws", origin=Origin(server.url), open_timeout=10)
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        ws = _ws(server, api, origin="http://evil.example")
        ws.recv(timeout=5)


# Host `skald.lan` (the port of the address typed in the browser is part of it).
FOREIGN_ORIGINS = [
    "http://skald.lan.evil.example",  # our name as a prefix of another site's
    "http://evil.example.skald.lan.example",
    "http://skald.lan:8081",  # our host, another port: another origin
    "http://evil.example",
    "null",
]


def test_the_same_origin_check_compares_the_whole_origin(server: ServerProcess) -> None:
    def login_from(origin: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/api/auth/login",
            json={"username": "ada", "password": "not the password"},
            headers={"Host": "skald.lan", "Origin": origin},
        )

    api = Api(server.url)
    api.login("ada", PW)

    def ws_from(origin: str) -> ClientConnection:
        # The Host header comes from the URI; the socket says where to connect.
        return connect(
            "ws://skald.lan/api/ws",
            sock=socket.create_connection(("127.0.0.1", server.port)),
            additional_headers={"Cookie": f"skald_session={api.session_cookie}"},
            origin=Origin(origin),
            open_timeout=10,
            legacy=True,  # a plain connection, closed by the test (no context manager)
        )

    for origin in FOREIGN_ORIGINS:
        r = login_from(origin)
        assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin", origin
        with pytest.raises((InvalidStatus, ConnectionClosed)):
            ws = ws_from(origin)
            ws.recv(timeout=5)
    # The check itself lets our own origin through.
    assert login_from("http://skald.lan").status_code == 401
    ours = ws_from("http://skald.lan")
    assert _next(ours, "hello")["type"] == "hello"
    ours.close()


def test_edge_protections(server: ServerProcess) -> None:
    api = Api(server.url)
    api.login("ada", PW)
    # A browser on another site cannot make the household's browser write anything.
    r = api.patch("/api/auth/me", json={"locale": "it"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin"
    r = httpx.post(
        f"{server.url}/api/auth/login",
        json={"username": "ada", "password": PW},
        headers={"Origin": "http://evil.example"},
    )
    assert r.status_code == 403
    r = api.get("/api/health")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert (
        r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    )
    r = api.get("/api/schema/openapi.json", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.headers.get("content-encoding") == "gzip"
    assert "/api/auth/login" in r.json()["paths"]
    # The access log names paths and statuses, never cookies or query strings.
    api.get("/api/health?token=sneaky-value")
    time.sleep(0.3)
    log = server.log()
    assert '"path": "/api/health"' in log and "sneaky-value" not in log
    assert api.session_cookie not in log and PW not in log


def test_a_client_that_answers_no_pings_is_closed_with_a_code_that_says_so(
    tmp_path: Path,
) -> None:
    with household(tmp_path, SKALD_SERVER_HEARTBEAT_S="0.5") as srv:
        api = Api(srv.url)
        api.login(ADMIN, ADMIN_PW)
        answering, silent = _ws(srv, api), _ws(srv, api)
        for ws in (answering, silent):
            _next(ws, "hello")
        deadline = time.monotonic() + 3.0  # six heartbeats; the silent one is gone after 2.5
        while time.monotonic() < deadline:
            ping = _next(answering, "ping")
            answering.send(json.dumps({"type": "pong", "t": ping["t"]}))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                silent.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408
        # The one that answered is still there.
        ping = _next(answering, "ping")
        answering.send(json.dumps({"type": "pong", "t": ping["t"]}))


def test_sigterm_with_an_open_socket_and_a_pending_request(tmp_path: Path) -> None:
    # The memory-hard KDF makes the sign-in slow enough to still be running at SIGTERM.
    with household(tmp_path, SKALD_SECURITY_KDF_PROFILE="default") as srv:
        api = Api(srv.url)
        api.login(ADMIN, ADMIN_PW)
        ws = _ws(srv, api)
        _next(ws, "hello")
        result: dict[str, int] = {}

        def slow_login() -> None:
            r = httpx.post(
                f"{srv.url}/api/auth/login",
                json={"username": ADMIN, "password": ADMIN_PW},
                timeout=30,
            )
            result["status"] = r.status_code

        pending = threading.Thread(target=slow_login)
        pending.start()
        time.sleep(0.25)
        code, elapsed = srv.stop(signal.SIGTERM, timeout=15)
        pending.join(15)
        assert code == 0, srv.log()
        assert elapsed < 10
        assert result.get("status") == 200, "the request in flight was not finished"
        # A restart is not a revocation: the socket just closes and the client reconnects.
        with pytest.raises(ConnectionClosed) as closed:
            _next(ws, "session_revoked")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        log = srv.log()
        assert '"event": "stopped"' in log
        # Every background service was cancelled and waited for, none abandoned.
        assert '"event": "services stopped"' in log and "session-purge" in log
        assert "did not stop" not in log


def test_restart_keeps_unencrypted_members_unlocked_and_signs_out_encrypted_ones(
    tmp_path: Path,
) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    srv.add_user("tim", PW, "children")
    srv.start()
    admin, tim = Api(srv.url), Api(srv.url)
    admin.login(ADMIN, ADMIN_PW)
    tim.login("tim", PW)
    assert srv.stop()[0] == 0
    srv.start()
    # The admin's key left memory with the old process: sign in again.
    assert admin.get("/api/auth/me").status_code == 401
    assert tim.get("/api/auth/me").status_code == 200
    assert '"unlocked_users": 1' in srv.log()
    srv.close()


def test_exit_codes_for_bad_config_and_busy_port(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path)
    srv.create_admin()
    (srv.data / "config.toml").write_text("[server]\nport = 70000\n")
    r = srv.cli("serve")
    assert r.returncode == 78 and "config.toml line 2" in r.stderr and "server.port" in r.stderr
    (srv.data / "config.toml").unlink()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", srv.port))
        busy.listen()
        r = srv.cli("serve", "--host", "127.0.0.1", "--port", str(srv.port))
    assert r.returncode == 1 and "already in use" in r.stderr
    assert "Traceback" not in r.stderr
