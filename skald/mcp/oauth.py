"""MCP authorization (OAuth 2.1 as the MCP spec profiles it), as an `httpx.Auth` flow for
`HttpTransport(url, headers, auth=McpOAuth(...))`.

Rule: on a 401 (or a 403 `insufficient_scope`) from the MCP server the flow discovers
who can authorise (protected-resource metadata, RFC 9728: the `resource_metadata` of
`WWW-Authenticate`, else the well-known path-based then root location; no metadata at
all = a 2025-03-26 server, whose own origin is the authorization server), reads the
authorization server's metadata (RFC 8414 / OpenID discovery, path-aware, with the
2025-03-26 fallback to `/authorize`, `/token`, `/register` at the root), gets a
client id (pre-registered, a client ID metadata document URL when the server supports
it, else dynamic registration, RFC 7591), runs an authorization-code flow with PKCE
S256 and the `resource` parameter (RFC 8707), and retries the request with the token.
An expired token is refreshed first when there is a refresh token.

What it does not do is the person's part: `authorize(url)` is the caller's coroutine
that sends the member to `url` and returns the redirect URL the browser came back to
(the product routes it through its callback route or a pasted URL). Tokens and the
client registration live in an `OAuthStore` the caller provides (the member's
encrypted database in the product; memory by default).

Traps:
- Scopes: the challenge's `scope` first, else the resource's `scopes_supported`, else
  none at all (never an invented one). A 403 `insufficient_scope` re-authorises with
  the scope it names, at most `MAX_AUTHORIZATIONS` times for one request, so a server
  that never accepts cannot loop us.
- The metadata's `resource` must be the server we talk to (a prefix of its URL); else
  the token would be minted for someone else: refused.
- An authorization server that does not list S256 in its metadata is refused (PKCE is
  mandatory); without any metadata (2025-03-26 fallback) S256 is used regardless.
- The `state` coming back must be ours; tokens and secrets never go into error texts.

The same module is the one OAuth 2 client of the product (issue 21): the pieces the
flow is made of are public, so a caller that cannot wait inside `authorize` (a web
route: the member signs in in a popup, the code comes back to another request) runs
them in two steps: `McpOAuth.begin(url)` (discovery, registration, the PKCE pair and the
URL, an `AuthorizationRequest` to keep on the server) and `exchange_code(request, code)`.
A connector whose feed names the endpoints and client id skips discovery
(`start_authorization(Endpoints(...), ClientInfo(...), ...)`); `refresh` is shared too.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import msgspec

MAX_AUTHORIZATIONS = 3
# Refresh a little before the expiry the server announced (clocks, latency).
EXPIRY_MARGIN_SECONDS = 30
_TIMEOUT = httpx.Timeout(20.0)


class OAuthError(Exception):
    """The authorization could not be completed; the text is safe to show."""


class ClientInfo(msgspec.Struct, kw_only=True):
    client_id: str
    client_secret: str | None = None
    # client_secret_basic, client_secret_post, private_key_jwt or none
    token_endpoint_auth_method: str | None = None
    # private_key_jwt (RFC 7523): a PEM private key and ES256 or RS256.
    private_key_pem: str | None = None
    signing_algorithm: str | None = None


class Tokens(msgspec.Struct, kw_only=True):
    access_token: str
    token_type: str = "Bearer"  # noqa: S105 - a token kind, not a secret
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None


class OAuthStore(Protocol):
    async def load_tokens(self) -> Tokens | None: ...
    async def save_tokens(self, tokens: Tokens | None) -> None: ...
    async def load_client(self) -> ClientInfo | None: ...
    async def save_client(self, client: ClientInfo) -> None: ...


class MemoryStore:
    """Tokens and registration for the life of the process (tests, one-off sessions)."""

    def __init__(self) -> None:
        self.tokens: Tokens | None = None
        self.client: ClientInfo | None = None

    async def load_tokens(self) -> Tokens | None:
        return self.tokens

    async def save_tokens(self, tokens: Tokens | None) -> None:
        self.tokens = tokens

    async def load_client(self) -> ClientInfo | None:
        return self.client

    async def save_client(self, client: ClientInfo) -> None:
        self.client = client


class Endpoints(msgspec.Struct, kw_only=True):
    issuer: str | None = None
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    client_id_metadata_document_supported: bool = False
    scopes_supported: list[str] | None = None


class AuthorizationRequest(msgspec.Struct, kw_only=True):
    """One sign-in in progress: what the person opens (`url`) and what the code's
    exchange needs later (kept by the caller on its side, never sent to the browser
    except `url`, whose `state` names it)."""

    url: str
    state: str
    verifier: str
    redirect_uri: str
    endpoints: Endpoints
    client: ClientInfo
    resource: str | None = None
    scope: str | None = None


def challenge_of(verifier: str) -> str:
    """S256: base64url(sha256(verifier)) without padding (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def start_authorization(
    endpoints: Endpoints,
    client: ClientInfo,
    redirect_uri: str,
    scope: str | None = None,
    resource: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> AuthorizationRequest:
    """A fresh `state` and PKCE pair and the authorization URL that carries them.
    `extra`: more query parameters (a provider's `access_type`, `prompt`); the flow's
    own parameters win over them."""
    verifier = secrets.token_urlsafe(48)  # 64 characters, within RFC 7636's 43..128
    state = secrets.token_urlsafe(24)
    query = {
        **(extra or {}),
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge_of(verifier),
        "code_challenge_method": "S256",
    }
    if scope:
        query["scope"] = scope
    if resource:
        query["resource"] = resource
    separator = "&" if "?" in endpoints.authorization_endpoint else "?"
    url = f"{endpoints.authorization_endpoint}{separator}{urlencode(query)}"
    return AuthorizationRequest(
        url=url,
        state=state,
        verifier=verifier,
        redirect_uri=redirect_uri,
        endpoints=endpoints,
        client=client,
        resource=resource,
        scope=scope,
    )


async def exchange_code(
    request: AuthorizationRequest, code: str, http: httpx.AsyncClient | None = None
) -> Tokens:
    """The code the browser came back with, traded for tokens (with the verifier)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": request.redirect_uri,
        "code_verifier": request.verifier,
    }
    if request.resource:
        form["resource"] = request.resource
    async with _session(http) as client:
        return await token_request(client, request.endpoints, request.client, form, request.scope)


async def refresh(
    endpoints: Endpoints,
    client: ClientInfo,
    tokens: Tokens,
    resource: str | None = None,
    http: httpx.AsyncClient | None = None,
) -> Tokens:
    """New tokens for `tokens.refresh_token`; the old refresh token is kept when the
    server does not send a new one (it stays valid then)."""
    if not tokens.refresh_token:
        raise OAuthError("the sign-in has expired: sign in again")
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    if resource:
        form["resource"] = resource
    async with _session(http) as session:
        fresh = await token_request(session, endpoints, client, form, tokens.scope)
    if fresh.refresh_token is None:
        fresh.refresh_token = tokens.refresh_token
    return fresh


class McpOAuth(httpx.Auth):
    def __init__(
        self,
        *,
        redirect_uri: str,
        authorize: Callable[[str], Awaitable[str]] | None,
        store: OAuthStore | None = None,
        client: ClientInfo | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "Skald",
        http: httpx.AsyncClient | None = None,
        grant: Literal["authorization_code", "client_credentials", "jwt_bearer"] = (
            "authorization_code"
        ),
        assertion: Callable[[str, str], Awaitable[str]] | None = None,
        sign_in_needed: str = "a sign-in is needed",
    ) -> None:
        """`client`: pre-registered credentials; `client_metadata_url`: the URL of this
        client's metadata document (used as the client id where the server supports
        it); otherwise the flow registers dynamically. `grant="client_credentials"`:
        no person signs in, the pre-registered client's own credentials (a secret or a
        private key) get the token (the ext-auth extension, SEP-1046).
        `grant="jwt_bearer"`: `assertion(audience, resource)` returns a JWT the
        authorization server accepts as a grant (RFC 7523; SEP-990 obtains it by token
        exchange at an identity provider), presented with the client's credentials.
        `authorize=None`: nobody can sign in now (a background session): the stored
        tokens are used and refreshed, and a request that needs a new sign-in fails
        with `OAuthError(sign_in_needed)` before any discovery or registration."""
        self.redirect_uri = redirect_uri
        self.authorize = authorize
        self.store: OAuthStore = store or MemoryStore()
        self.preregistered = client
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self._http = http
        self.grant = grant
        self.assertion = assertion
        self.sign_in_needed = sign_in_needed
        if grant != "authorization_code" and client is None:
            raise ValueError(f"the {grant} grant needs a pre-registered client")
        if grant == "jwt_bearer" and assertion is None:
            raise ValueError("the jwt_bearer grant needs an assertion provider")
        self._endpoints: Endpoints | None = None
        self._resource: str | None = None
        self._scope: str | None = None

    # -- the httpx flow -----------------------------------------------------------------

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        tokens = await self.store.load_tokens()
        if tokens is not None and _expired(tokens) and tokens.refresh_token:
            tokens = await self._refresh(tokens, str(request.url))
        if tokens is not None:
            request.headers["authorization"] = f"Bearer {tokens.access_token}"
        response = yield request
        authorizations = 0
        refreshed = False
        while response.status_code in (401, 403):
            challenge = parse_challenge(response.headers.get("www-authenticate", ""))
            if response.status_code == 403 and challenge.get("error") != "insufficient_scope":
                return
            if authorizations >= MAX_AUTHORIZATIONS:
                return
            if (
                response.status_code == 401
                and not refreshed
                and tokens is not None
                and tokens.refresh_token
            ):
                refreshed = True
                try:
                    tokens = await self._refresh(tokens, str(request.url))
                except OAuthError:
                    tokens = None
            else:
                authorizations += 1
                tokens = await self._authorize(str(request.url), challenge, tokens)
            if tokens is None:
                continue
            request.headers["authorization"] = f"Bearer {tokens.access_token}"
            response = yield request

    # -- discovery ------------------------------------------------------------------------

    async def _get_json(self, http: httpx.AsyncClient, url: str) -> dict[str, Any] | None:
        try:
            response = await http.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            data = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            return None
        return data if isinstance(data, dict) else None

    async def _discover(
        self, http: httpx.AsyncClient, server_url: str, challenge: dict[str, str]
    ) -> tuple[Endpoints, str | None, list[str] | None]:
        """The authorization server's endpoints, the resource to ask for, its scopes."""
        parts = urlsplit(server_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        candidates = [challenge["resource_metadata"]] if challenge.get("resource_metadata") else []
        if path:
            candidates.append(f"{origin}/.well-known/oauth-protected-resource{path}")
        candidates.append(f"{origin}/.well-known/oauth-protected-resource")
        prm: dict[str, Any] | None = None
        for url in candidates:
            prm = await self._get_json(http, url)
            if prm is not None and isinstance(prm.get("authorization_servers"), list):
                break
            prm = None
        resource: str | None = None
        scopes: list[str] | None = None
        if prm is not None:
            resource = str(prm.get("resource") or "") or None
            if resource is not None and not _covers(resource, server_url):
                raise OAuthError(
                    f"the server's metadata names another resource ({resource[:100]}); "
                    "refusing to request a token for it"
                )
            servers = [s for s in prm["authorization_servers"] if isinstance(s, str)]
            if not servers:
                raise OAuthError("the server's metadata names no authorization server")
            issuer = servers[0]
            raw_scopes = prm.get("scopes_supported")
            scopes = (
                [s for s in raw_scopes if isinstance(s, str)]
                if isinstance(raw_scopes, list)
                else None
            )
        else:
            issuer = origin  # 2025-03-26: the MCP server's origin is the authorization server
        endpoints = await self._authorization_server(http, issuer)
        if resource is None and prm is not None:
            resource = server_url
        return endpoints, resource, scopes

    async def _authorization_server(self, http: httpx.AsyncClient, issuer: str) -> Endpoints:
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        if path:
            urls = [
                f"{origin}/.well-known/oauth-authorization-server{path}",
                f"{origin}/.well-known/openid-configuration{path}",
                f"{origin}{path}/.well-known/openid-configuration",
            ]
        else:
            urls = [
                f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration",
            ]
        for url in urls:
            data = await self._get_json(http, url)
            if data is None:
                continue
            try:
                endpoints = msgspec.convert(data, Endpoints)
            except msgspec.ValidationError as exc:
                raise OAuthError(f"malformed authorization server metadata ({exc})") from None
            methods = endpoints.code_challenge_methods_supported
            if methods is None or "S256" not in methods:
                raise OAuthError("the authorization server does not support PKCE with S256")
            return endpoints
        # 2025-03-26 fallback: the default endpoints at the issuer's root.
        return Endpoints(
            authorization_endpoint=f"{origin}/authorize",
            token_endpoint=f"{origin}/token",
            registration_endpoint=f"{origin}/register",
        )

    async def _prepare(
        self, http: httpx.AsyncClient, server_url: str, challenge: dict[str, str]
    ) -> tuple[Endpoints, str | None, ClientInfo, str | None]:
        """What a sign-in of either kind starts from: the endpoints and the resource
        (kept for refreshes), a client id, and the scope to ask for (the challenge's,
        else the scopes the server lists)."""
        endpoints, resource, scopes = await self._discover(http, server_url, challenge)
        self._endpoints, self._resource = endpoints, resource
        client = await self._client(http, endpoints)
        scope = challenge.get("scope") or (" ".join(scopes) if scopes else None)
        return endpoints, resource, client, scope

    async def _client(self, http: httpx.AsyncClient, endpoints: Endpoints) -> ClientInfo:
        if self.preregistered is not None:
            return self.preregistered
        stored = await self.store.load_client()
        if stored is not None:
            return stored
        if endpoints.client_id_metadata_document_supported and self.client_metadata_url:
            return ClientInfo(client_id=self.client_metadata_url, token_endpoint_auth_method="none")  # noqa: S106
        if endpoints.registration_endpoint is None:
            raise OAuthError(
                "no client id: the server offers no registration and none is configured"
            )
        body = {
            "client_name": self.client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": _preferred_method(endpoints),
        }
        try:
            response = await http.post(endpoints.registration_endpoint, json=body)
        except httpx.HTTPError as exc:
            raise OAuthError(f"registration failed: {type(exc).__name__}") from None
        if response.status_code not in (200, 201):
            raise OAuthError(f"registration refused (HTTP {response.status_code})")
        try:
            client = msgspec.json.decode(response.content, type=ClientInfo)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise OAuthError("malformed registration answer") from None
        await self.store.save_client(client)
        return client

    # -- the authorization code flow ------------------------------------------------------

    async def begin(
        self,
        server_url: str,
        challenge: dict[str, str] | None = None,
        previous: Tokens | None = None,
    ) -> AuthorizationRequest:
        """Discovery, a client id and the authorization URL for `server_url`: the first
        half of a sign-in, for a caller whose person answers in another request."""
        challenge = challenge or {}
        async with self._session() as http:
            endpoints, resource, client, scope = await self._prepare(http, server_url, challenge)
        if previous is not None and previous.scope and scope and challenge.get("error"):
            # Step-up: keep what we had, add what is asked for.
            scope = " ".join(dict.fromkeys([*previous.scope.split(), *scope.split()]))
        self._scope = scope
        return start_authorization(endpoints, client, self.redirect_uri, scope, resource)

    async def finish(self, request: AuthorizationRequest, code: str) -> Tokens:
        """The second half: the code traded for tokens, which the store keeps."""
        async with self._session() as http:
            tokens = await exchange_code(request, code, http)
        await self.store.save_tokens(tokens)
        return tokens

    async def _authorize(
        self, server_url: str, challenge: dict[str, str], previous: Tokens | None
    ) -> Tokens:
        if self.grant != "authorization_code":
            return await self._without_person(server_url, challenge)
        if self.authorize is None:
            raise OAuthError(self.sign_in_needed)
        request = await self.begin(server_url, challenge, previous)
        back = parse_qs(urlsplit(await self.authorize(request.url)).query)
        if back.get("state", [""])[0] != request.state:
            raise OAuthError("the sign-in answer does not match the request (state)")
        if "error" in back:
            raise OAuthError(f"sign-in refused: {back['error'][0][:100]}")
        code = back.get("code", [""])[0]
        if not code:
            raise OAuthError("the sign-in answer has no code")
        return await self.finish(request, code)

    async def _without_person(self, server_url: str, challenge: dict[str, str]) -> Tokens:
        """client_credentials / jwt_bearer: the client's own credentials get the token."""
        async with self._session() as http:
            endpoints, resource, client, scope = await self._prepare(http, server_url, challenge)
            form = {"grant_type": "client_credentials"}
            if self.grant == "jwt_bearer":
                assert self.assertion is not None
                audience = endpoints.issuer or endpoints.token_endpoint
                form = {
                    "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    "assertion": await self.assertion(audience, resource or server_url),
                }
            if scope:
                form["scope"] = scope
            if resource:
                form["resource"] = resource
            tokens = await token_request(http, endpoints, client, form, scope)
        await self.store.save_tokens(tokens)
        return tokens

    async def _refresh(self, tokens: Tokens, server_url: str) -> Tokens:
        assert tokens.refresh_token
        async with self._session() as http:
            endpoints = self._endpoints
            if endpoints is None:
                endpoints, self._resource, _ = await self._discover(http, server_url, {})
                self._endpoints = endpoints
            client = await self._client(http, endpoints)
            fresh = await refresh(endpoints, client, tokens, self._resource, http)
        await self.store.save_tokens(fresh)
        return fresh

    def _session(self) -> httpx.AsyncClient:
        return _session(self._http)


async def token_request(
    http: httpx.AsyncClient,
    endpoints: Endpoints,
    client: ClientInfo,
    form: dict[str, str],
    scope: str | None,
) -> Tokens:
    """POST `form` to the token endpoint with the client's authentication."""
    method = client.token_endpoint_auth_method or (
        _preferred_method(endpoints) if client.client_secret else "none"
    )
    headers = {"accept": "application/json"}
    if client.private_key_pem:
        audience = endpoints.issuer or endpoints.token_endpoint
        form["client_id"] = client.client_id
        form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        form["client_assertion"] = _client_assertion(client, audience)
    elif method == "client_secret_basic" and client.client_secret:
        pair = f"{client.client_id}:{client.client_secret}".encode()
        headers["authorization"] = "Basic " + base64.b64encode(pair).decode()
    else:
        form["client_id"] = client.client_id
        if method == "client_secret_post" and client.client_secret:
            form["client_secret"] = client.client_secret
    try:
        response = await http.post(endpoints.token_endpoint, data=form, headers=headers)
    except httpx.HTTPError as exc:
        raise OAuthError(
            f"the sign-in service could not be reached: {type(exc).__name__}"
        ) from None
    if response.status_code != 200:
        # The body's `error` only (never the rest: it may echo the code or the verifier).
        raise OAuthError(f"the sign-in service refused: {_error_of(response)}")
    try:
        data = msgspec.json.decode(response.content)
        token = str(data["access_token"])
    except (msgspec.DecodeError, KeyError, TypeError):
        raise OAuthError("malformed token answer") from None
    expires = data.get("expires_in")
    return Tokens(
        access_token=token,
        token_type=str(data.get("token_type", "Bearer")),
        refresh_token=data.get("refresh_token")
        if isinstance(data.get("refresh_token"), str)
        else None,
        expires_at=time.time() + float(expires) if isinstance(expires, int | float) else None,
        scope=data.get("scope") if isinstance(data.get("scope"), str) else scope,
    )


def _error_of(response: httpx.Response) -> str:
    try:
        error = msgspec.json.decode(response.content).get("error")
    except (msgspec.DecodeError, AttributeError):
        error = None
    if isinstance(error, str) and error.replace("_", "").isalnum():
        return error[:60]
    return f"HTTP {response.status_code}"


def _session(http: httpx.AsyncClient | None) -> httpx.AsyncClient:
    if http is not None:
        return _Borrowed(http)  # type: ignore[return-value]
    return httpx.AsyncClient(timeout=_TIMEOUT)


class _Borrowed:
    """A caller's client used as `async with` without closing it."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def __aenter__(self) -> httpx.AsyncClient:
        return self.http

    async def __aexit__(self, *exc: object) -> None:
        return None


def parse_challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer` WWW-Authenticate challenge (lower-cased names)."""
    _, _, rest = header.partition(" ")
    out: dict[str, str] = {}
    i = 0
    while i < len(rest):
        while i < len(rest) and rest[i] in " ,":
            i += 1
        eq = rest.find("=", i)
        if eq < 0:
            break
        name = rest[i:eq].strip().lower()
        i = eq + 1
        if i < len(rest) and rest[i] == '"':
            end = i + 1
            value = []
            while end < len(rest) and rest[end] != '"':
                if rest[end] == "\\" and end + 1 < len(rest):
                    end += 1
                value.append(rest[end])
                end += 1
            out[name] = "".join(value)
            i = end + 1
        else:
            end = rest.find(",", i)
            end = len(rest) if end < 0 else end
            out[name] = rest[i:end].strip()
            i = end
    return out


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _client_assertion(client: ClientInfo, audience: str) -> str:
    """A signed JWT naming the client (RFC 7523 `private_key_jwt`), valid five minutes."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    assert client.private_key_pem
    alg = client.signing_algorithm or "ES256"
    key = serialization.load_pem_private_key(client.private_key_pem.encode(), password=None)
    now = int(time.time())
    claims = {
        "iss": client.client_id,
        "sub": client.client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": secrets.token_urlsafe(16),
    }
    header = {"alg": alg, "typ": "JWT"}
    signing_input = f"{_b64(msgspec.json.encode(header))}.{_b64(msgspec.json.encode(claims))}"
    if alg == "ES256" and isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    elif alg == "RS256" and isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        raise OAuthError(f"cannot sign a client assertion with {alg} and this key")
    return f"{signing_input}.{_b64(signature)}"


def _preferred_method(endpoints: Endpoints) -> str:
    supported = endpoints.token_endpoint_auth_methods_supported or ["client_secret_basic"]
    for method in ("client_secret_basic", "client_secret_post", "none"):
        if method in supported:
            return method
    return supported[0]


def _covers(resource: str, server_url: str) -> bool:
    resource = resource.rstrip("/")
    return server_url.rstrip("/") == resource or server_url.startswith(resource + "/")


def _expired(tokens: Tokens) -> bool:
    return tokens.expires_at is not None and tokens.expires_at - EXPIRY_MARGIN_SECONDS < time.time()
