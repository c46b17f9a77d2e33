"""OAuth 2 sign-in of a connector against a local authorization server (tests/
oauth_double.py): PKCE S256, the code through the callback route or pasted back, state
kept on the server (bound to the member, used once), the access token delivered to the
connector as a header, refreshed when it expires; tokens never in an API answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
from conftest import Client
from connector_support import simple_feed
from oauth_double import CLIENT_ID, OAuthDouble

from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.supervisor import ConnectorInstance

MakeClient = Callable[[], Awaitable[Client]]


def _feed(tmp_path: Path, base: str) -> Path:
    return simple_feed(
        tmp_path / "feed",
        ("cal",),
        cal={
            "scope": "personal",
            "transport": "http",
            "url": "http://127.0.0.1:9/mcp",
            "auth": {
                "type": "oauth2",
                "oauth": {
                    "authorize_url": f"{base}/authorize",
                    "token_url": f"{base}/token",
                    "client_id": CLIENT_ID,
                    "scopes": ["calendar.read"],
                    "deliver": "header",
                    "target": "Authorization",
                },
            },
        },
    )


async def _authorize(url: str) -> tuple[str, str]:
    """What the member's browser does at the provider: follow to the redirect."""
    async with httpx.AsyncClient() as http:
        r = await http.get(url, follow_redirects=False)
    assert r.status_code == 302, r.text
    location = r.headers["location"]
    q = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    return location, q["code"]


async def test_oauth_pkce_code_then_refresh_and_the_token_reaches_the_connector_as_a_header(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble(expires_in=30) as provider:
        c = service.require(runtime.plugins)
        c.config = ConnectorsConfig(feed=str(_feed(tmp_path, provider.base)))
        await c.installer.install(c.feed(), "cal")
        ada = await make_client()
        await ada.login("ada")
        before = (await ada.call("GET", "/api/connectors/cal")).json()
        assert before["signed_in"] is False and before["auth"] == "oauth2"

        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        q = {k: v[0] for k, v in parse_qs(urlsplit(start["url"]).query).items()}
        assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
        assert q["scope"] == "calendar.read" and "verifier" not in start["url"]
        location, _ = await _authorize(start["url"])
        # Another member cannot finish ada's sign-in with her state.
        mum = await make_client()
        await mum.login("mum")
        r = await mum.call("GET", urlsplit(location).path + "?" + urlsplit(location).query)
        assert r.status_code == 404
        # The browser lands on the callback with ada's session: tokens stored, back to the page.
        r = await ada.call("GET", urlsplit(location).path + "?" + urlsplit(location).query)
        assert r.status_code in (301, 302, 303, 307) and "#/connectors" in r.headers["location"]
        assert provider.token_requests[-1]["grant_type"] == "authorization_code"
        # The state was used once.
        r = await ada.call("GET", urlsplit(location).path + "?" + urlsplit(location).query)
        assert r.status_code == 404
        after = (await ada.call("GET", "/api/connectors/cal")).json()
        assert after["signed_in"] is True
        for path in ("/api/connectors", "/api/connectors/cal"):
            text = (await ada.call("GET", path)).text
            assert "at-1" not in text and "rt-1" not in text

        # At launch, an access token that expires within a minute is refreshed first and
        # delivered as the header the manifest names.
        sup = c.supervisor
        assert sup is not None
        row = await c.store.require("cal")
        inst = ConnectorInstance(sup, household["ada"], row)
        sup.members.setdefault(household["ada"], runtime.user_runtimes[household["ada"]])
        launch = await sup.launch_for(inst)
        assert launch.headers["Authorization"] == "Bearer at-2"
        assert provider.token_requests[-1]["grant_type"] == "refresh_token"
        mine = runtime.user_runtimes[household["ada"]]
        stored = await c.secrets(mine.handle.db).values("cal")
        assert stored["oauth_access_token"] == "at-2"


async def test_a_pasted_back_code_signs_in_and_a_wrong_one_is_refused(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with OAuthDouble() as provider:
        c = service.require(runtime.plugins)
        c.config = msgspec.structs.replace(c.config, feed=str(_feed(tmp_path, provider.base)))
        await c.installer.install(c.feed(), "cal")
        ada = await make_client()
        await ada.login("ada")
        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        _, code = await _authorize(start["url"])
        r = await ada.call(
            "POST", "/api/connectors/cal/oauth/code", json={"state": start["state"], "code": "x"}
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == "oauth_failed"
        # The failed attempt used the state up: a new sign-in starts over.
        start = (await ada.call("POST", "/api/connectors/cal/oauth/start")).json()
        _, code = await _authorize(start["url"])
        r = await ada.call(
            "POST", "/api/connectors/cal/oauth/code", json={"state": start["state"], "code": code}
        )
        assert r.status_code == 200 and r.json()["signed_in"] is True
        assert code not in r.text
