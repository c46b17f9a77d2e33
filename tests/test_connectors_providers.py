"""Sign-in providers (issue 29 item 5): a feed names only a provider's slug, its scopes
and how the credential is delivered; the household's administrator enters the client id,
the client secret, the endpoints and extra parameters. The member signs in against a
real authorization server on 127.0.0.1 (tests/oauth_double.py) that demands that secret;
the secret never comes back from the API and never reaches a log line. Also
`grant_by_default` (installed, but not for everyone)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import apsw
import msgspec
import pytest
from conftest import PASSWORD, MakeClient, signed_in
from connector_support import launched, oauth_remote, simple_feed
from oauth_double import OAuthDouble, authorize

from skald.core.runtime import Runtime
from skald.features.connectors import oauth, service
from skald.features.connectors.feed import Manifest, expand
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.store import REGISTRY_FEATURE
from skald.features.connectors.supervisor import _with_oauth
from skald.store.migrations import ledger, migrate_features
from skald.store.migrations.registry import REGISTRY

CLIENT = "household-own-client.apps.example"
SECRET = "hh-client-secret-7f3a9c2e51d04b8e"


def _feed(tmp_path: Path) -> Path:
    """`mail` (remote, the access token as a header) and `gmail` (a stdio server given a
    Google authorized-user JSON in an environment variable): a slug, scopes, delivery."""
    return simple_feed(
        tmp_path / "feed",
        ("mail", "gmail"),
        mail=oauth_remote(
            provider="google", scopes=["mail.read"], deliver="header", target="Authorization"
        ),
        gmail={
            "scope": "personal",
            "auth": {
                "type": "oauth2",
                "oauth": {
                    "provider": "google",
                    "scopes": ["mail.modify"],
                    "format": "google_authorized_user",
                    "target": "GMAIL_CREDS_JSON",
                },
            },
        },
    )


def _provider(base: str, **more: Any) -> dict[str, Any]:
    return {
        "display_name": "Google (ours)",
        "authorize_url": f"{base}/authorize",
        "token_url": f"{base}/token",
        "client_id": CLIENT,
        "extra_params": {"access_type": "offline", "prompt": "consent"},
        **more,
    }


async def test_a_feed_naming_only_a_provider_signs_in_with_the_admins_client_and_secret(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    tmp_path: Path,
    logged: io.StringIO,
) -> None:
    with OAuthDouble(expires_in=30, client_id=CLIENT, client_secret=SECRET) as provider:
        c = service.require(runtime.server)
        c.config = ConnectorsConfig(feed=str(_feed(tmp_path)))
        feed_text = "".join(p.read_text() for p in (tmp_path / "feed").rglob("*.json"))
        assert CLIENT not in feed_text and "token_url" not in feed_text
        for name in ("mail", "gmail"):
            await c.installer.install(c.feed(), name)
        mum = await signed_in(make_client, "mum")
        ada = await signed_in(make_client, "ada")

        # No provider yet: the sign-in says an administrator has to set it up.
        r = await ada.call("POST", "/api/connectors/mail/oauth/start")
        assert r.status_code == 400 and "Sign-in providers" in r.json()["error"]["message"]
        listed = (await mum.call("GET", "/api/sign-in-providers")).json()
        assert [(p["slug"], p["used_by"], p["client_id"]) for p in listed] == [
            ("google", ["gmail", "mail"], "")
        ]

        r = await mum.call(
            "PUT",
            "/api/sign-in-providers/google",
            json=_provider(provider.base, client_secret=SECRET),
        )
        assert r.status_code == 200, r.text
        assert r.json()["has_secret"] is True and SECRET not in r.text
        # Saving the form again without a secret keeps the one stored.
        r = await mum.call("PUT", "/api/sign-in-providers/google", json=_provider(provider.base))
        assert r.status_code == 200 and r.json()["has_secret"] is True

        start = (await ada.call("POST", "/api/connectors/mail/oauth/start")).json()
        q = {k: v[0] for k, v in parse_qs(urlsplit(start["url"]).query).items()}
        assert q["client_id"] == CLIENT and q["scope"] == "mail.read"
        assert q["access_type"] == "offline" and q["prompt"] == "consent"
        assert SECRET not in start["url"]
        r = await ada.call("GET", await authorize(start["url"]))
        assert r.status_code in (302, 303, 307), r.text
        # The code was traded with the household's secret (the double refuses without it).
        assert provider.token_requests[-1]["grant_type"] == "authorization_code"
        assert (await ada.call("GET", "/api/connectors/mail")).json()["signed_in"] is True

        # At launch the access token expires within a minute: refreshed with the secret.
        inst, launch = await launched(runtime, household["ada"], "mail")
        assert launch.headers["Authorization"] == "Bearer at-2"
        assert provider.token_requests[-1]["grant_type"] == "refresh_token"
        assert SECRET in inst.secrets  # scrubbed from whatever the connector says

        # Without the right secret the provider refuses, and the error does not echo it.
        r = await mum.call(
            "PUT",
            "/api/sign-in-providers/google",
            json=_provider(provider.base, client_secret="wrong-secret-0123456789"),
        )
        start = (await ada.call("POST", "/api/connectors/mail/oauth/start")).json()
        r = await ada.call("GET", await authorize(start["url"]))
        assert r.status_code == 400 and r.json()["error"]["code"] == "oauth_failed"
        assert "wrong-secret" not in r.text
        await mum.call(
            "PUT",
            "/api/sign-in-providers/google",
            json=_provider(provider.base, client_secret=SECRET),
        )

        # The secret is in no answer an administrator or a member can get.
        for who, paths in (
            (mum, ["/api/sign-in-providers", "/api/connectors", "/api/marketplace"]),
            (ada, ["/api/connectors", "/api/connectors/mail", "/api/connectors/gmail"]),
        ):
            for path in paths:
                text = (await who.call("GET", path)).text
                assert SECRET not in text, path
        # Sealed in the registry, never stored as itself.
        sealed = await runtime.server.db.call(
            lambda conn: conn.execute(
                "SELECT client_secret_sealed FROM oauth_providers WHERE slug='google'"
            ).fetchone()[0]
        )
        assert SECRET not in sealed
        assert SECRET not in logged.getvalue() and logged.getvalue()


async def test_a_google_authorized_user_credential_carries_the_providers_client_and_refresh(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble(client_id=CLIENT, client_secret=SECRET) as provider:
        c = service.require(runtime.server)
        c.config = ConnectorsConfig(feed=str(_feed(tmp_path)))
        await c.installer.install(c.feed(), "gmail")
        mum = await signed_in(make_client, "mum")
        r = await mum.call(
            "PUT",
            "/api/sign-in-providers/google",
            json=_provider(provider.base, client_secret=SECRET),
        )
        assert r.status_code == 200
        ada = await signed_in(make_client, "ada")
        start = (await ada.call("POST", "/api/connectors/gmail/oauth/start")).json()
        await ada.call("GET", await authorize(start["url"]))
        mine = runtime.user_runtimes[household["ada"]]
        stored = await c.secrets(mine.handle.db).values("gmail")
        row = await c.store.require("gmail")
        manifest = msgspec.convert(
            {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
        )
        assert manifest.auth.oauth is not None
        oc = await oauth.resolve(manifest.auth.oauth, c.providers)
        delivered, secrets = await _with_oauth(manifest, manifest.auth.oauth, oc, stored)
        creds = json.loads(expand(delivered.env["GMAIL_CREDS_JSON"], {}, secrets))
        assert creds == {
            "type": "authorized_user",
            "client_id": CLIENT,
            "client_secret": SECRET,
            "refresh_token": stored["oauth_refresh_token"],
            "token_uri": f"{provider.base}/token",
        }
        # Stored for the member: the tokens only; the JSON is made at each launch.
        assert set(stored) == {"oauth_access_token", "oauth_refresh_token", "oauth_expires_at"}


async def test_only_administrators_see_or_change_sign_in_providers(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str]
) -> None:
    mum = await signed_in(make_client, "mum")
    body = _provider("https://accounts.example", client_secret=SECRET)
    assert (await mum.call("PUT", "/api/sign-in-providers/ms", json=body)).status_code == 200
    for name in ("ada", "tim"):
        who = await signed_in(make_client, name)
        for method, kw in (("GET", {}), ("PUT", {"json": body}), ("DELETE", {})):
            path = "/api/sign-in-providers" + ("" if method == "GET" else "/ms")
            r = await who.call(method, path, **kw)
            assert r.status_code == 403, (name, method, r.text)
            assert SECRET not in r.text and "accounts.example" not in r.text
    listed = (await mum.call("GET", "/api/sign-in-providers")).json()
    assert [p["client_id"] for p in listed] == [CLIENT]
    assert (await mum.call("DELETE", "/api/sign-in-providers/ms")).status_code == 204
    assert (await mum.call("DELETE", "/api/sign-in-providers/ms")).status_code == 404


@pytest.mark.parametrize(
    ("slug", "change", "says"),
    [
        ("Bad Slug", {}, "lowercase"),
        ("ms", {"token_url": "http://accounts.example/token"}, "https"),
        ("ms", {"authorize_url": "file:///etc/passwd"}, "https"),
        ("ms", {"extra_params": {"redirect_uri": "https://evil.example"}}, "redirect_uri"),
        ("ms", {"client_id": ""}, "Client id"),
    ],
)
async def test_a_bad_provider_is_a_400_that_says_why_and_nothing_is_stored(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    slug: str,
    change: dict[str, Any],
    says: str,
) -> None:
    mum = await signed_in(make_client, "mum")
    body = {**_provider("https://accounts.example"), **change}
    r = await mum.call("PUT", f"/api/sign-in-providers/{slug}", json=body)
    assert r.status_code == 400, r.text
    assert says in r.text
    assert (await mum.call("GET", "/api/sign-in-providers")).json() == []


def _grant_feed(tmp_path: Path) -> Path:
    return simple_feed(
        tmp_path / "feed",
        ("clock", "bank"),
        clock={"scope": "personal"},
        bank={"scope": "personal", "grant_by_default": False},
    )


async def test_grant_by_default_false_installs_it_hidden_from_members_until_granted(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(_grant_feed(tmp_path)))
    for name in ("clock", "bank"):
        await c.installer.install(c.feed(), name)
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    names = [x["name"] for x in (await ada.call("GET", "/api/connectors")).json()]
    assert names == ["clock"]
    assert (await ada.call("GET", "/api/connectors/bank")).status_code == 404
    assert (await ada.call("POST", "/api/connectors/bank/activate")).status_code == 404
    # Administrators hold it (and see that it is not given by default).
    bank = (await mum.call("GET", "/api/connectors/bank")).json()
    assert bank["grant_by_default"] is False
    # A member created later does not get it either; the other connector she does.
    zoe = await runtime.core.users.create("zoe", PASSWORD, "member")
    assert await c.store.grants(zoe.user.id) == {"clock"}
    # An update keeps it so.
    write_index(tmp_path / "feed", bump=("bank",))
    await c.installer.install(c.feed(), "bank", update=True)
    assert household["ada"] not in await c.store.grantees("bank")
    # An explicit grant, and she has it.
    r = await mum.call("PUT", f"/api/connectors/bank/grants/{household['ada']}")
    assert r.status_code == 204
    assert (await ada.call("GET", "/api/connectors/bank")).status_code == 200


async def test_an_admin_turns_grant_by_default_off_for_members_to_come_and_a_member_cannot(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(_grant_feed(tmp_path)))
    await c.installer.install(c.feed(), "clock")
    ada = await signed_in(make_client, "ada")
    mum = await signed_in(make_client, "mum")
    off = {"grant_by_default": False}
    r = await ada.call("PUT", "/api/connectors/clock/grant-by-default", json=off)
    assert r.status_code == 403
    r = await mum.call("PUT", "/api/connectors/clock/grant-by-default", json=off)
    assert r.status_code == 204
    r = await mum.call("PUT", "/api/connectors/nope/grant-by-default", json=off)
    assert r.status_code == 404
    # Grants already given stay; a new member's trigger skips it.
    assert household["ada"] in await c.store.grantees("clock")
    created = await runtime.core.users.create("zoe", PASSWORD, "member")
    assert await c.store.grants(created.user.id) == set()
    r = await mum.call("PUT", "/api/connectors/clock/grant-by-default", json={"on": True})
    assert r.status_code == 400


@pytest.mark.parametrize("old", [1, 2])
def test_the_connectors_migration_3_keeps_rows_and_grants_and_new_members_skip_opted_out(
    tmp_path: Path, old: int
) -> None:
    """From each older connectors version: installed rows and grants survive with
    `grant_by_default = 1`; afterwards the new-member trigger skips a connector set to 0."""
    conn = apsw.Connection(str(tmp_path / "r.db"))
    before = dataclasses.replace(REGISTRY_FEATURE, migrations=REGISTRY_FEATURE.migrations[:old])
    migrate_features(conn, REGISTRY.with_features([before]))
    assert ledger(conn)["connectors"] == old
    conn.execute(
        "INSERT INTO role_attributes(role, key, value) VALUES ('member', 'auto_grant', 'true') "
        "ON CONFLICT DO UPDATE SET value='true'"
    )
    for name in ("clock", "bank"):
        conn.execute(
            "INSERT INTO connectors(name, display_name, feed_version, transport, manifest, "
            "auth, scope, status, installed_at, updated_at) "
            "VALUES (?, ?, 1, 'stdio', '{}', 'none', 'personal', 'installed', 't', 't')",
            (name, name),
        )
    _user(conn, "u1")
    granted = "SELECT connector, user_id FROM connector_grants ORDER BY 1, 2"
    assert conn.execute(granted).fetchall() == [("bank", "u1"), ("clock", "u1")]

    applied = migrate_features(conn, REGISTRY.with_features([REGISTRY_FEATURE]))
    assert [a for a in applied if a[0] == "connectors"] == [
        ("connectors", v) for v in range(old + 1, 4)
    ]
    assert conn.execute(granted).fetchall() == [("bank", "u1"), ("clock", "u1")]
    assert conn.execute("SELECT name, grant_by_default FROM connectors ORDER BY 1").fetchall() == [
        ("bank", 1),
        ("clock", 1),
    ]
    conn.execute("UPDATE connectors SET grant_by_default=0 WHERE name='bank'")
    _user(conn, "u2")
    assert ("bank", "u2") not in conn.execute(granted).fetchall()
    assert ("clock", "u2") in conn.execute(granted).fetchall()
    assert conn.execute("SELECT count(*) FROM oauth_providers").fetchone() == (0,)
    assert migrate_features(conn, REGISTRY.with_features([REGISTRY_FEATURE])) == []


def _user(conn: apsw.Connection, user_id: str) -> None:
    conn.execute(
        "INSERT INTO users(id, username, display_name, role, encrypted, password_hash, "
        "created_at, updated_at) VALUES (?, ?, ?, 'member', 1, NULL, 't', 't')",
        (user_id, user_id, user_id),
    )
