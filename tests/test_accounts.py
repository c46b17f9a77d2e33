"""One account service for the web API and the CLI: the two ways to reactivate leave the
same state, a deactivation deletes sessions at once and never half-happens, and
`skald user deactivate` against a running server closes what that server holds open."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PASSWORD, TEST_ENV, Cli, MakeClient, signed_in
from harness import Api, ServerProcess, household
from test_server import _next, _ws
from websockets.exceptions import ConnectionClosed

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import ConflictError
from skald.paths import DataLayout

PW = "member's long password"


async def _state(runtime: Runtime, user_id: str) -> tuple[object, ...]:
    user = await runtime.core.registry.get_user(user_id)
    assert user is not None
    return (
        user.active,
        runtime.core.users.is_unlocked(user_id),
        user_id in runtime.user_runtimes,
        await runtime.sessions.store.count_for_user(user_id),
    )


@pytest.mark.parametrize("role", ["children", "member"])  # unencrypted and encrypted
async def test_patch_active_true_and_post_activate_leave_the_same_state(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, role: str
) -> None:
    one = await runtime.core.users.create("one", PASSWORD, role)
    two = await runtime.core.users.create("two", PASSWORD, role)
    admin = await signed_in(make_client, "mum")
    for created in (one, two):
        r = await admin.call("POST", f"/api/users/{created.user.id}/deactivate")
        assert r.status_code == 200 and r.json()["active"] is False
    r = await admin.call("PATCH", f"/api/users/{one.user.id}", json={"active": True})
    assert r.status_code == 200 and r.json()["active"] is True
    r = await admin.call("POST", f"/api/users/{two.user.id}/activate")
    assert r.status_code == 200 and r.json()["active"] is True
    assert await _state(runtime, one.user.id) == await _state(runtime, two.user.id)
    # Unencrypted accounts are unlocked again, as at boot; encrypted ones wait for a login.
    assert runtime.core.users.is_unlocked(one.user.id) == (role == "children")


async def test_deactivation_deletes_sessions_at_once_and_reactivation_revives_no_cookie(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    tim = await signed_in(make_client, "tim")
    r = await admin.call("PATCH", f"/api/users/{household['tim']}", json={"active": False})
    assert r.status_code == 200
    assert await runtime.sessions.store.count_for_user(household["tim"]) == 0
    r = await admin.call("PATCH", f"/api/users/{household['tim']}", json={"active": True})
    assert r.status_code == 200
    assert (await tim.call("GET", "/api/auth/me")).status_code == 401


async def test_a_refused_account_change_changes_nothing(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    r = await admin.call(
        "PATCH", f"/api/users/{household['mum']}", json={"display_name": "Gone", "active": False}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "own_account"
    assert (await runtime.core.users.get("mum")).display_name != "Gone"
    # The last administrator, from the operator's side (no actor): refused before any
    # session is touched.
    with pytest.raises(ConflictError, match="last active administrator"):
        await runtime.accounts.deactivate(household["mum"])
    assert (await admin.call("GET", "/api/auth/me")).status_code == 200
    assert (await runtime.core.users.get("mum")).active


def test_cli_deactivation_without_a_server_deletes_the_accounts_sessions(
    tmp_path: Path, cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    data = tmp_path / "data"
    assert cli("setup", "--admin", "mum", "--password-stdin", stdin=PASSWORD + "\n") == 0
    assert cli("user", "add", "tim", "--role", "children", "--password-stdin", stdin=PW + "\n") == 0

    async def sign_in() -> str:
        rt = await Runtime.boot(
            DataLayout(data), load_config(data, TEST_ENV), announce=io.StringIO()
        )
        try:
            return await rt.sessions.create(await rt.core.users.get("tim"))
        finally:
            await rt.shutdown()

    async def still_valid(token: str) -> bool:
        rt = await Runtime.boot(
            DataLayout(data), load_config(data, TEST_ENV), announce=io.StringIO()
        )
        try:
            return await rt.sessions.resolve(token) is not None
        finally:
            await rt.shutdown()

    token = asyncio.run(sign_in())
    assert asyncio.run(still_valid(token))  # an unencrypted member's session outlives a restart
    assert cli("user", "deactivate", "tim") == 0
    assert cli("user", "activate", "tim") == 0
    assert not asyncio.run(still_valid(token))
    capsys.readouterr()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(tmp_path, ("ada", PW)) as srv:
        yield srv


def test_cli_deactivate_while_a_server_runs_closes_the_members_socket_and_session(
    server: ServerProcess,
) -> None:
    ada = Api(server.url)
    me = ada.login("ada", PW)
    tab = _ws(server, ada)
    assert _next(tab, "hello")["user_id"] == me["id"]

    r = server.cli("user", "deactivate", "ada")
    assert r.returncode == 0, r.stderr
    assert "by the running server" in r.stdout
    # Before the command returned, the server told the tab why and closed it.
    assert "deactivated" in str(_next(tab, "session_revoked")["reason"])
    with pytest.raises(ConnectionClosed) as closed:
        tab.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    assert ada.get("/api/auth/me").status_code == 401
    listed = json.loads(server.cli("user", "list", "--json").stdout)
    assert next(u for u in listed if u["username"] == "ada")["active"] is False

    # Reactivated through the server too: the old cookie stays dead, a new login works.
    r = server.cli("user", "activate", "ada")
    assert r.returncode == 0, r.stderr
    assert ada.get("/api/auth/me").status_code == 401
    again = Api(server.url)
    assert again.login("ada", PW)["id"] == me["id"]

    # The server's rules apply to the CLI as well: the last administrator stays.
    r = server.cli("user", "deactivate", "mum")
    assert r.returncode == 1 and "last active administrator" in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    r = server.cli("user", "delete", "ada", "--yes")
    assert r.returncode == 0 and "by the running server" in r.stdout, r.stderr
    assert again.get("/api/auth/me").status_code == 401


@pytest.mark.docker
def test_cli_deactivate_while_a_server_runs_stops_the_members_sandbox(tmp_path: Path) -> None:
    from sandbox_support import docker_client, remove_server_containers

    from skald.sandbox.manager import LABEL_USER

    docker = docker_client()
    srv = ServerProcess(tmp_path, SKALD_SANDBOX_ENABLED="true", SKALD_SANDBOX_MEMORY_MB="512")
    srv.create_admin()
    srv.add_user("ada", PW)
    try:
        srv.start()
        me = Api(srv.url).login("ada", PW)  # the login starts and probes her sandbox

        def ada_containers() -> list[str]:
            found = docker.containers.list(all=True, filters={"label": f"{LABEL_USER}={me['id']}"})
            return [c.status for c in found]

        deadline = time.monotonic() + 60
        while "running" not in ada_containers():
            assert time.monotonic() < deadline, srv.log()[-3000:]
            time.sleep(0.2)
        r = srv.cli("user", "deactivate", "ada")
        assert r.returncode == 0 and "by the running server" in r.stdout, r.stderr
        # Gone (container and network: deactivation removes them) before the command
        # returned, not at some later reconciliation.
        assert ada_containers() == [], srv.log()[-3000:]
        networks = docker.networks.list(filters={"label": f"{LABEL_USER}={me['id']}"})
        assert networks == [], [n.name for n in networks]
    finally:
        srv.close()
        remove_server_containers(docker, srv.data)
        docker.close()


async def test_an_administrator_adds_a_member_while_strangers_fill_the_key_derivation_pool(
    runtime: Runtime,
) -> None:
    """A flood of strangers' sign-ins takes the pool's public slots; adding a member is
    the administrator's (trusted) work and still gets one."""
    import asyncio
    import threading

    from skald.core.kdf_pool import KdfBusyError

    pool = runtime.core.users.kdf_pool
    release = threading.Event()

    def stranger() -> None:
        release.wait(30)

    strangers = [asyncio.ensure_future(pool.run(stranger)) for _ in range(pool.capacity)]
    try:
        await asyncio.sleep(0)
        with pytest.raises(KdfBusyError):
            await pool.run(stranger)  # the public slots are all taken
        created = asyncio.ensure_future(runtime.accounts.create("newkid", PASSWORD, "member"))
        await asyncio.sleep(0.2)
        release.set()
        assert (await created).user.username == "newkid"
    finally:
        release.set()
        await asyncio.gather(*strangers)
