"""Sign-in, sessions, CSRF, throttling, first-run setup and account administration."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from conftest import PASSWORD, TEST_ENV, MakeClient, signed_in

from skald.api.app import create_app
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.errors import AccountInactiveError
from skald.paths import DataLayout


async def test_first_run_setup_with_the_token(runtime: Runtime, make_client: MakeClient) -> None:
    c = await make_client()
    assert (await c.call("GET", "/api/setup")).json() == {"needed": True}
    token = runtime.setup_token
    assert token and (runtime.core.layout.root / "setup-token").read_text().strip() == token
    body = {"token": "wrong", "username": "mum", "password": PASSWORD}
    r = await c.call("POST", "/api/setup", json=body)
    assert r.status_code == 403 and r.json()["error"]["code"] == "bad_setup_token"
    r = await c.call("POST", "/api/setup", json={**body, "token": token, "locale": "it"})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["recovery_code"] and out["me"]["username"] == "mum" and out["me"]["locale"] == "it"
    # Signed in by the setup itself.
    c.csrf = out["me"]["csrf_token"]
    assert (await c.call("GET", "/api/auth/me")).json()["role"] == "admin"
    # The token dies with its purpose.
    assert not (runtime.core.layout.root / "setup-token").exists()
    assert (await c.call("GET", "/api/setup")).json() == {"needed": False}
    r = await c.call("POST", "/api/setup", json={**body, "token": token, "username": "eve"})
    assert r.status_code == 409


async def test_login_me_logout(household: dict[str, str], make_client: MakeClient) -> None:
    c = await make_client()
    assert (await c.call("GET", "/api/auth/me")).status_code == 401
    r = await c.http.post("/api/auth/login", json={"username": "ada", "password": "nope nope"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "bad_credentials"
    me = await c.login("ada")
    assert me["capabilities"] and "admin.users" not in me["capabilities"]
    assert me["ui_mode"] == "full" and me["encrypted"] is True
    cookie = c.http.cookies.get("skald_session")
    assert cookie and cookie not in str(me)
    r = await c.http.post("/api/auth/login", json={"username": "ada", "password": PASSWORD})
    c.csrf = r.json()["csrf_token"]
    set_cookie = r.headers["set-cookie"]
    assert (
        "HttpOnly" in set_cookie
        and "samesite=strict" in set_cookie.lower()
        and "Secure" not in set_cookie
    )
    assert (await c.call("POST", "/api/auth/logout")).status_code == 204
    assert (await c.call("GET", "/api/auth/me")).status_code == 401


async def test_child_gets_the_simple_interface(
    household: dict[str, str], make_client: MakeClient
) -> None:
    c = await make_client()
    me = await c.login("tim")
    assert me["ui_mode"] == "simple" and me["encrypted"] is False
    assert sorted(me["capabilities"]) == ["chat", "inbox"]


async def test_csrf_token_required_for_cookie_writes(
    household: dict[str, str], make_client: MakeClient
) -> None:
    c = await signed_in(make_client, "ada")
    r = await c.http.patch("/api/auth/me", json={"locale": "fr"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf"
    r = await c.http.patch(
        "/api/auth/me", json={"locale": "fr"}, headers={"X-CSRF-Token": "x" * 40}
    )
    assert r.status_code == 403
    r = await c.call("PATCH", "/api/auth/me", json={"locale": "fr"})
    assert r.status_code == 200 and r.json()["locale"] == "fr"


async def test_throttling_slows_and_then_forgives(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    c = await make_client()
    statuses = []
    for _ in range(20):
        r = await c.http.post(
            "/api/auth/login", json={"username": "ada", "password": "wrong password"}
        )
        statuses.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert "try again" in r.json()["error"]["message"]
    free = runtime.config.auth.login_free_attempts
    assert statuses[:free] == [401] * free
    assert statuses.count(429) >= 10
    # Even the right password is refused while backing off...
    r = await c.http.post("/api/auth/login", json={"username": "ada", "password": PASSWORD})
    assert r.status_code == 429
    # ...and accepted once the delay has passed.
    await asyncio.sleep(runtime.config.auth.login_backoff_max_s + 0.1)
    await c.login("ada")


async def test_parallel_wrong_logins_cannot_pass_the_free_attempts(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    c = await make_client()
    wrong = {"username": "ada", "password": "wrong password"}
    answers = await asyncio.gather(*(c.http.post("/api/auth/login", json=wrong) for _ in range(12)))
    statuses = sorted(r.status_code for r in answers)
    free = runtime.config.auth.login_free_attempts
    assert statuses == [401] * free + [429] * (12 - free)
    assert all(int(r.headers["retry-after"]) >= 1 for r in answers if r.status_code == 429)


@pytest.fixture
async def strict_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime whose back-off lasts a minute (the default one forgives in 0.4 s)."""
    layout = DataLayout(tmp_path / "strict")
    env = {
        **TEST_ENV,
        "SKALD_AUTH_LOGIN_BACKOFF_BASE_S": "600",
        "SKALD_AUTH_LOGIN_BACKOFF_MAX_S": "900",
    }
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    await rt.core.users.create("ada", PASSWORD, "member")
    await rt.core.users.create("tim", PASSWORD, "children")
    yield rt
    await rt.shutdown()


async def test_a_browser_that_signed_in_before_is_not_locked_out_by_a_guesser(
    strict_runtime: Runtime,
) -> None:
    transport = httpx.ASGITransport(app=create_app(strict_runtime), client=("10.0.0.7", 5000))
    # Both behind one address, as a household behind its router.
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as laptop,
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as guesser,
    ):

        async def login(http: httpx.AsyncClient, username: str, password: str) -> int:
            body = {"username": username, "password": password}
            return (await http.post("/api/auth/login", json=body)).status_code

        r = await laptop.post("/api/auth/login", json={"username": "ada", "password": PASSWORD})
        set_device = next(h for h in r.headers.get_list("set-cookie") if "skald_device=" in h)
        assert "HttpOnly" in set_device and "samesite=strict" in set_device.lower()
        device = laptop.cookies.get("skald_device")
        assert device and device.startswith("ada.")
        free = strict_runtime.config.auth.login_free_attempts
        statuses = [await login(guesser, "Ada", "guess!!!") for _ in range(free + 2)]
        assert statuses == [401] * free + [429] * 2
        assert await login(guesser, "ada", PASSWORD) == 429
        # The laptop that signed in before still gets in with the right password...
        assert await login(laptop, "ada", PASSWORD) == 200
        # ...but its cookie lends nothing to another account or another browser's entry.
        assert await login(laptop, "tim", PASSWORD) == 429  # the address is used up
        guesser.cookies.set("skald_device", device.replace("ada.", "tim.", 1))
        assert await login(guesser, "tim", PASSWORD) == 429
        # The laptop's own wrong guesses use up only the laptop's budget.
        laptop_statuses = [await login(laptop, "ada", "typo typo") for _ in range(free + 1)]
        assert laptop_statuses == [401] * free + [429]


async def test_deactivating_an_account_deletes_its_sessions_at_once(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin, tim = await make_client(), await make_client()
    await admin.login("mum")
    # Tim's data is not encrypted: nothing but the session row stands between his old
    # cookie and his data once he is active again.
    await tim.login("tim")
    assert (
        await admin.call("POST", f"/api/users/{household['tim']}/deactivate")
    ).status_code == 200
    assert (await admin.call("POST", f"/api/users/{household['tim']}/activate")).status_code == 200
    assert (await tim.call("GET", "/api/auth/me")).status_code == 401
    # The same through the user manager alone (what `skald user deactivate` calls, from
    # another process, with no request in between to notice).
    await tim.login("tim")
    await runtime.core.users.deactivate("tim")
    assert await runtime.sessions.store.count_for_user(household["tim"]) == 0
    await runtime.core.users.activate("tim")
    assert (await tim.call("GET", "/api/auth/me")).status_code == 401


async def test_a_session_is_not_created_for_an_account_deactivated_meanwhile(
    runtime: Runtime, household: dict[str, str]
) -> None:
    tim = await runtime.core.users.get("tim")
    await runtime.core.users.deactivate("tim")  # after the password check, before the row
    with pytest.raises(AccountInactiveError):
        await runtime.sessions.create(tim)
    assert await runtime.sessions.store.count_for_user(tim.id) == 0


async def test_password_change_logs_out_other_devices(
    household: dict[str, str], make_client: MakeClient
) -> None:
    phone = await signed_in(make_client, "ada")
    laptop = await signed_in(make_client, "ada")
    r = await laptop.call(
        "POST",
        "/api/auth/password",
        json={"current_password": "wrong!!!", "new_password": "x" * 12},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "wrong_password"
    r = await laptop.call(
        "POST",
        "/api/auth/password",
        json={"current_password": PASSWORD, "new_password": "new household pw"},
    )
    assert r.status_code == 204, r.text
    assert (await laptop.call("GET", "/api/auth/me")).status_code == 200
    assert (await phone.call("GET", "/api/auth/me")).status_code == 401
    await phone.login("ada", "new household pw")


async def test_logout_all_locks_the_encrypted_data(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    a = await signed_in(make_client, "ada")
    b = await signed_in(make_client, "ada")
    assert runtime.core.users.is_unlocked(household["ada"])
    assert (await a.call("POST", "/api/auth/logout-all")).status_code == 204
    assert (await b.call("GET", "/api/auth/me")).status_code == 401
    assert not runtime.core.users.is_unlocked(household["ada"])


async def test_admin_manages_users(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin, bob = await make_client(), await make_client()
    await admin.login("mum")
    r = await admin.call(
        "POST",
        "/api/users",
        json={"username": "bob", "password": PASSWORD, "role": "member", "display_name": "Bob"},
    )
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["recovery_code"] and created["user"]["encrypted"] is True
    bob_id = created["user"]["id"]
    r = await admin.call(
        "POST", "/api/users", json={"username": "BOB", "password": PASSWORD, "role": "member"}
    )
    assert r.status_code == 409
    r = await admin.call(
        "POST", "/api/users", json={"username": "kid2", "password": PASSWORD, "role": "children"}
    )
    assert r.status_code == 201 and r.json()["recovery_code"] is None
    assert runtime.core.users.is_unlocked(r.json()["user"]["id"])

    await bob.login("bob")
    r = await admin.call(
        "PATCH", f"/api/users/{bob_id}", json={"display_name": "Robert", "locale": "it"}
    )
    assert r.status_code == 200 and r.json()["display_name"] == "Robert"
    r = await admin.call("PATCH", f"/api/users/{bob_id}", json={"role": "children"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "encryption_mismatch"
    r = await admin.call("PATCH", f"/api/users/{bob_id}", json={"role": "admin"})
    assert r.status_code == 200 and r.json()["role"] == "admin"
    # The role applies on Bob's very next request.
    assert "admin.users" in (await bob.call("GET", "/api/auth/me")).json()["capabilities"]

    # Deactivation: Bob's session is dead before the response arrives.
    r = await admin.call("POST", f"/api/users/{bob_id}/deactivate")
    assert r.status_code == 200 and r.json()["active"] is False
    assert (await bob.call("GET", "/api/auth/me")).status_code == 401
    assert not runtime.core.users.is_unlocked(bob_id)
    r = await bob.http.post("/api/auth/login", json={"username": "bob", "password": PASSWORD})
    assert r.status_code == 403 and r.json()["error"]["code"] == "account_inactive"
    assert (await admin.call("POST", f"/api/users/{bob_id}/activate")).json()["active"] is True
    await bob.login("bob")

    r = await admin.call("DELETE", f"/api/users/{bob_id}")
    assert r.status_code == 204
    assert (await bob.call("GET", "/api/auth/me")).status_code == 401
    assert (await admin.call("GET", f"/api/users/{bob_id}")).status_code == 404
    assert not runtime.core.layout.user_db(bob_id).exists()


async def test_admin_cannot_lock_themself_out(
    household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await make_client()
    me = await admin.login("mum")
    for method, path, body in (
        ("POST", f"/api/users/{me['id']}/deactivate", None),
        ("DELETE", f"/api/users/{me['id']}", None),
        ("PATCH", f"/api/users/{me['id']}", {"role": "member"}),
        ("PATCH", "/api/roles/admin", {"capabilities": ["chat"]}),
    ):
        r = await admin.call(method, path, json=body)
        assert r.status_code == 409, (method, path, r.text)
    assert (await admin.call("GET", "/api/auth/me")).status_code == 200


async def test_roles_crud(household: dict[str, str], make_client: MakeClient) -> None:
    admin = await signed_in(make_client, "mum")
    caps = {c["name"] for c in (await admin.call("GET", "/api/capabilities")).json()}
    assert {"chat", "admin.users"} <= caps
    body = {
        "name": "teen",
        "display_name": "Teenager",
        "capabilities": ["chat", "inbox", "files"],
        "attributes": {
            "ui_mode": "full",
            "encrypted": True,
            "sandbox_network": "none",
            "default_chat_agent": "assistant",
        },
    }
    r = await admin.call("POST", "/api/roles", json=body)
    assert r.status_code == 201, r.text
    assert (await admin.call("POST", "/api/roles", json=body)).status_code == 409
    r = await admin.call("POST", "/api/roles", json={**body, "name": "x2", "capabilities": ["fly"]})
    assert r.status_code == 400 and "fly" in r.json()["error"]["message"]
    r = await admin.call("PATCH", "/api/roles/teen", json={"capabilities": ["chat"]})
    assert r.json()["capabilities"] == ["chat"]
    assert (
        await admin.call(
            "POST", "/api/users", json={"username": "zoe", "password": PASSWORD, "role": "teen"}
        )
    ).status_code == 201
    attrs = {**body["attributes"], "encrypted": False}
    r = await admin.call("PATCH", "/api/roles/teen", json={"attributes": attrs})
    assert r.status_code == 409
    roles = {r["name"]: r for r in (await admin.call("GET", "/api/roles")).json()}
    assert roles["children"]["attributes"]["sandbox_network"] == "none"
    assert roles["teen"]["attributes"]["sandbox_network"] == "none"


async def test_bad_input_is_a_clear_4xx(household: dict[str, str], make_client: MakeClient) -> None:
    admin = await signed_in(make_client, "mum")
    cases = [
        ("POST", "/api/users", {"username": "x"}, 400),
        ("POST", "/api/users", {"username": "ok_name", "password": "short", "role": "member"}, 400),
        (
            "POST",
            "/api/users",
            {"username": "../../etc", "password": PASSWORD, "role": "member"},
            400,
        ),
        ("POST", "/api/users", {"username": "ok", "password": PASSWORD, "role": "Bad Role"}, 400),
        ("PATCH", "/api/auth/me", {"locale": "klingon"}, 400),
        ("PATCH", "/api/auth/me", {"unknown": 1}, 400),
        ("GET", "/api/users/doesnotexist", None, 404),
        ("PATCH", "/api/roles/nope", {"display_name": "x"}, 404),
    ]
    for method, path, body, status in cases:
        r = await admin.call(method, path, json=body)
        assert r.status_code == status, (path, body, r.text)
        err = r.json()["error"]
        assert err["code"] and err["message"], r.text
    r = await admin.call(
        "POST", "/api/users", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
