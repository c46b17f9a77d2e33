"""A local OAuth 2 authorization server (a real HTTP server on 127.0.0.1) for the
connector sign-in tests: authorization code with PKCE S256, refresh tokens. It checks
what a real provider checks (client id, redirect URI, the verifier against the
challenge, one use per code) and records the token requests.

For MCP's own authorization it also serves its metadata (RFC 8414, at
`/.well-known/oauth-authorization-server`), dynamic client registration (RFC 7591,
`/register`) and token introspection (RFC 7662, `/introspect`: how the test MCP server
`tests/mcp_servers/oauth_server.py` checks a bearer token, and the `resource` it was
minted for). `revoke_access()` makes every access token inactive (a server-side expiry
the client cannot see coming).

`OAuthDouble(client_id=..., client_secret=...)` is a confidential client a household
registered itself (a sign-in provider): the token endpoint then demands that secret, by
HTTP Basic or in the form, as a real provider does. `authorize_queries` keeps what each
authorization request carried (a provider's extra parameters)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from http_double import ServedDouble, send_json

CLIENT_ID = "skald-test-client"


class OAuthDouble(ServedDouble):
    def __init__(
        self, expires_in: int = 3600, client_id: str = CLIENT_ID, client_secret: str | None = None
    ) -> None:
        self.expires_in = expires_in
        self.client_id = client_id
        self.client_secret = client_secret
        self.authorize_queries: list[dict[str, str]] = []
        self.codes: dict[str, dict[str, str]] = {}  # code -> challenge, redirect_uri
        self.refresh_tokens: set[str] = set()
        self.token_requests: list[dict[str, str]] = []
        self.issued = 0
        self.registered: dict[str, list[str]] = {}  # client id -> redirect URIs
        # access token -> (expires at, resource it was minted for)
        self.access: dict[str, tuple[float, str]] = {}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, body: dict[str, Any]) -> None:
                send_json(self, status, body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/.well-known/oauth-authorization-server":
                    self._json(200, double.metadata())
                    return
                client = q.get("client_id", "")
                if url.path == "/authorize":
                    double.authorize_queries.append(q)
                known = client == double.client_id or q.get(
                    "redirect_uri"
                ) in double.registered.get(client, [])
                if url.path != "/authorize" or not known:
                    self._json(400, {"error": "invalid_request"})
                    return
                if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
                    self._json(400, {"error": "invalid_request"})
                    return
                code = secrets.token_urlsafe(12)
                double.codes[code] = {
                    "challenge": q["code_challenge"],
                    "redirect_uri": q["redirect_uri"],
                    "resource": q.get("resource", ""),
                }
                target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q["state"]})
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length).decode()
                if self.path == "/register":
                    self._json(201, double.register(json.loads(raw)))
                    return
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                if self.path == "/introspect":
                    self._json(200, double.introspect(form.get("token", "")))
                    return
                double.token_requests.append(form)
                client = form.get("client_id", "")
                secret = form.get("client_secret")
                basic = self.headers.get("Authorization", "")
                if basic.startswith("Basic "):
                    pair = base64.b64decode(basic[6:]).decode()
                    client, _, secret = pair.partition(":")
                if self.path != "/token" or (
                    client != double.client_id and client not in double.registered
                ):
                    self._json(400, {"error": "invalid_client"})
                    return
                if (
                    client == double.client_id
                    and double.client_secret is not None
                    and secret != double.client_secret
                ):
                    self._json(400, {"error": "invalid_client"})
                    return
                if form.get("grant_type") == "authorization_code":
                    issued = double.codes.pop(form.get("code", ""), None)
                    verifier = form.get("code_verifier", "")
                    digest = hashlib.sha256(verifier.encode()).digest()
                    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
                    if (
                        issued is None
                        or issued["challenge"] != challenge
                        or issued["redirect_uri"] != form.get("redirect_uri")
                    ):
                        self._json(400, {"error": "invalid_grant"})
                        return
                elif form.get("grant_type") == "refresh_token":
                    if form.get("refresh_token") not in double.refresh_tokens:
                        self._json(400, {"error": "invalid_grant"})
                        return
                    double.refresh_tokens.discard(form["refresh_token"])
                    issued = None
                else:
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                double.issued += 1
                resource = form.get("resource") or (issued or {}).get("resource", "")
                double.access[f"at-{double.issued}"] = (time.time() + double.expires_in, resource)
                refresh = f"rt-{double.issued}-{secrets.token_hex(4)}"
                double.refresh_tokens.add(refresh)
                self._json(
                    200,
                    {
                        "access_token": f"at-{double.issued}",
                        "token_type": "Bearer",
                        "refresh_token": refresh,
                        "expires_in": double.expires_in,
                    },
                )

        self.serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "introspection_endpoint": f"{self.base}/introspect",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        client_id = f"dyn-{len(self.registered) + 1}"
        self.registered[client_id] = list(body.get("redirect_uris", []))
        return {**body, "client_id": client_id, "token_endpoint_auth_method": "none"}

    def introspect(self, token: str) -> dict[str, Any]:
        expires, resource = self.access.get(token, (0.0, ""))
        if expires < time.time():
            return {"active": False}
        return {"active": True, "client_id": "any", "exp": int(expires), "aud": resource}

    def revoke_access(self) -> None:
        self.access.clear()


async def authorize(url: str) -> str:
    """What the member's browser does at the provider: `url` followed to the redirect
    back to Skald; that redirect as a path with its query (for a test client)."""
    async with httpx.AsyncClient() as http:
        r = await http.get(url, follow_redirects=False)
    assert r.status_code == 302, r.text
    back = urlsplit(r.headers["location"])
    return back.path + "?" + back.query


def code_of(back: str) -> str:
    """The authorization code in a redirect back."""
    return parse_qs(urlsplit(back).query)["code"][0]
