"""OAuth 2 sign-in of a connector against a local authorization server (tests/
oauth_double.py): PKCE S256, the code through the callback route or pasted back, state
kept on the server (bound to the member, used once), the access token delivered to the
connector as a header, refreshed when it expires; tokens never in an API answer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
from conftest import MakeClient, signed_in
from connector_support import SERVERS, in_state, launched, oauth_remote, simple_feed
from mcp_support import free_port, serving
from oauth_double import CLIENT_ID, OAuthDouble, authorize, code_of

from skald.agent import CancelScope, ToolContext
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import ConnectorsConfig


def _feed(tmp_path: Path, base: str) -> Path:
    return simple_feed(
        tmp_path / "feed",
        ("cal",),
        cal=oauth_remote(
            authorize_url=f"{base}/authorize",
            token_url=f"{base}/token",
            client_id=CLIENT_ID,
            scopes=["calendar.read"],
            deliver="header",
            target="Authorization",
        ),
    )


async def test_oauth_pkce_code_then_refresh_and_the_token_reaches_the_connector_as_a_header(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble(expires_in=30) as provider:
        c = service.require(runtime.server)
        c.config = ConnectorsConfig(feed=str(_feed(tmp_path, provider.base)))
        await c.installer.install(c.feed(), "cal")
        ada = await signed_in(make_client, "ada")
        before = (await ada.call("GET", "/api/connectors/cal")).json()
        assert before["signed_in"] is False and before["auth"] == "oauth2"

        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        q = {k: v[0] for k, v in parse_qs(urlsplit(start["url"]).query).items()}
        assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
        assert q["scope"] == "calendar.read" and "verifier" not in start["url"]
        back = await authorize(start["url"])
        # Another member cannot finish ada's sign-in with her state.
        mum = await signed_in(make_client, "mum")
        r = await mum.call("GET", back)
        assert r.status_code == 404
        # The browser lands on the callback with ada's session: tokens stored, back to the page.
        r = await ada.call("GET", back)
        assert r.status_code in (301, 302, 303, 307) and "#/connectors" in r.headers["location"]
        assert provider.token_requests[-1]["grant_type"] == "authorization_code"
        # The state was used once.
        r = await ada.call("GET", back)
        assert r.status_code == 404
        after = (await ada.call("GET", "/api/connectors/cal")).json()
        assert after["signed_in"] is True
        for path in ("/api/connectors", "/api/connectors/cal"):
            text = (await ada.call("GET", path)).text
            assert "at-1" not in text and "rt-1" not in text

        # At launch, an access token that expires within a minute is refreshed first and
        # delivered as the header the manifest names.
        _, launch = await launched(runtime, household["ada"], "cal")
        assert launch.headers["Authorization"] == "Bearer at-2"
        assert provider.token_requests[-1]["grant_type"] == "refresh_token"
        mine = runtime.user_runtimes[household["ada"]]
        stored = await c.secrets(mine.handle.db).values("cal")
        assert stored["oauth_access_token"] == "at-2"


async def test_a_pasted_back_code_signs_in_and_a_wrong_one_is_refused(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble() as provider:
        c = service.require(runtime.server)
        c.config = msgspec.structs.replace(c.config, feed=str(_feed(tmp_path, provider.base)))
        await c.installer.install(c.feed(), "cal")
        ada = await signed_in(make_client, "ada")
        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        code = code_of(await authorize(start["url"]))
        r = await ada.call(
            "POST", "/api/connectors/cal/oauth/code", json={"state": start["state"], "code": "x"}
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == "oauth_failed"
        # The failed attempt used the state up: a new sign-in starts over.
        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        code = code_of(await authorize(start["url"]))
        r = await ada.call(
            "POST", "/api/connectors/cal/oauth/code", json={"state": start["state"], "code": code}
        )
        assert r.status_code == 200 and r.json()["signed_in"] is True
        assert code not in r.text


# -- a remote MCP server that uses MCP's own authorization (issue 23 item 5) ----------


@contextmanager
def oauth_mcp_server(issuer: str) -> Iterator[str]:
    """tests/mcp_servers/oauth_server.py: the official SDK, bearer tokens required."""
    port = free_port()
    with serving(port, SERVERS / "oauth_server.py", str(port), issuer) as url:
        yield url


async def _whoami(runtime: Runtime, owner: str) -> str:
    """The model's call: the connector's tool as the member's assistant is offered it."""
    mine = runtime.user_runtimes[owner]
    [tool] = [t for t in mine.all_tools() if t.name == "mcp__remote__whoami"]
    ctx = ToolContext(
        conversation_id="conv", call_id="c", depth=0, cancel=CancelScope(), sink=lambda e: None
    )
    result = await tool.run({}, ctx)
    assert not result.is_error, result.content
    return result.content


async def _install_remote(
    runtime: Runtime, tmp_path: Path, url: str, **fields: Any
) -> service.Connectors:
    """The personal connector `remote`, the MCP server at `url` that asks for MCP's own
    authorization, installed from a feed (with these `[connectors]` `fields`)."""
    feed = simple_feed(tmp_path / "feed", ("remote",), remote=oauth_remote(url))
    c = service.require(runtime.server)
    c.config = msgspec.structs.replace(c.config, feed=str(feed), **fields)
    await c.installer.install(c.feed(), "remote")
    return c


async def test_a_remote_server_with_mcp_oauth_is_signed_in_from_the_page_and_called(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble() as provider, oauth_mcp_server(provider.base) as url:
        c = await _install_remote(runtime, tmp_path, url, max_restarts=0)
        ada = await signed_in(make_client, "ada")
        assert (await ada.call("POST", "/api/connectors/remote/activate")).status_code == 200
        # Not signed in yet: the card says where to sign in, not "HTTP 401".
        inst = await in_state(runtime, household["ada"], "remote", "failed")
        assert inst.last_error == "sign in to remote from the Connectors page"
        card = (await ada.call("GET", "/api/connectors/remote")).json()
        assert card["auth"] == "oauth2" and card["signed_in"] is False

        # The page's sign-in: discovery from the server's 401 metadata, a dynamic
        # registration with our callback, PKCE S256 and the server as `resource`.
        start = (await ada.call("POST", "/api/connectors/remote/oauth/start")).json()
        q = {k: v[0] for k, v in parse_qs(urlsplit(start["url"]).query).items()}
        assert start["url"].startswith(f"{provider.base}/authorize?")
        assert q["client_id"] in provider.registered and q["resource"] == url
        assert q["redirect_uri"].endswith("/api/connector-oauth/callback")
        assert q["code_challenge_method"] == "S256"
        back = await authorize(start["url"])
        r = await ada.call("GET", back)
        assert r.status_code in (301, 302, 303, 307), r.text
        card = (await ada.call("GET", "/api/connectors/remote")).json()
        assert card["signed_in"] is True and "at-1" not in str(card)

        # Running with the token, and called the way the model calls it.
        await in_state(runtime, household["ada"], "remote", "running")
        assert await _whoami(runtime, household["ada"]) == "called with token 1"

        # The server stops accepting the token before it expires: one refresh on the
        # 401, the call goes through, the new tokens are in ada's own database.
        provider.revoke_access()
        assert await _whoami(runtime, household["ada"]) == "called with token 2"
        assert provider.token_requests[-1]["grant_type"] == "refresh_token"
        assert provider.token_requests[-1]["resource"] == url
        mine = runtime.user_runtimes[household["ada"]]
        stored = await c.secrets(mine.handle.db).values("remote")
        assert stored["oauth_access_token"] == "at-2"
        assert provider.registered.keys() == {q["client_id"]}  # registered once


async def test_an_access_token_about_to_expire_is_refreshed_before_the_request(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    # 20 s of life is inside the client's 30 s margin: every request refreshes first.
    with OAuthDouble(expires_in=20) as provider, oauth_mcp_server(provider.base) as url:
        await _install_remote(runtime, tmp_path, url)
        ada = await signed_in(make_client, "ada")
        start = (await ada.call("POST", "/api/connectors/remote/oauth/start")).json()
        back = await authorize(start["url"])
        await ada.call("GET", back)
        assert (await ada.call("POST", "/api/connectors/remote/activate")).status_code == 200
        await in_state(runtime, household["ada"], "remote", "running")
        before = len(provider.token_requests)
        text = await _whoami(runtime, household["ada"])
        assert provider.token_requests[before]["grant_type"] == "refresh_token"
        assert text == f"called with token {provider.issued}"
