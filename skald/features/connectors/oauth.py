"""OAuth 2 sign-in for connectors, on the one OAuth client (`skald.mcp.oauth`).

Rule: the flow's state lives on the server only (`OAuthFlows`, in memory, ten minutes,
bound to the member who started it and used once); the browser carries just the opaque
`state`. The code comes back to the callback route or is pasted back by the member.
Two kinds of connector sign in this way: one whose feed names the endpoints and client
id (`auth.oauth`, the token delivered as the environment variable or header it names)
and a remote MCP server that uses MCP's own authorization (`auth.type = "oauth2"`
without an `oauth` section: discovery, dynamic registration, PKCE and `resource`,
the token sent by the client as `Authorization: Bearer`, refreshed before it expires
and once on a 401: `McpOAuth` with `SecretOAuthStore`).

Tokens are secrets of the member (`oauth_access_token`, `oauth_refresh_token`,
`oauth_expires_at`, and for MCP's own OAuth `oauth_client`, the registration) in their
owner database, encrypted with their key.

A feed's `auth.oauth` names either its endpoints and a public client id, or only a
sign-in provider's slug (`providers.py`): `resolve` turns either into one `OAuthClient`
(endpoints, client id, the administrators' sealed secret opened, extra authorization
parameters), so the start, the code exchange and the refresh are the same code for both.
`credential` is what the connector receives (`format`): the access token, the refresh
token, or a Google "authorized user" JSON carrying the client secret (the connector's own
library refreshes with it; the secret then joins the values scrubbed from its output).

Trap: a restart forgets pending flows (the member starts again); tokens already stored
are kept. The token endpoint's error text is shown without the request's body: it may
echo the code or the verifier.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from skald.errors import InvalidInputError, NotFoundError, SkaldError
from skald.features.connectors.feed import OAuthSpec
from skald.mcp import oauth as client
from skald.mcp.oauth import AuthorizationRequest, ClientInfo, Endpoints, Tokens

if TYPE_CHECKING:
    from skald.features.connectors.providers import Providers
    from skald.features.connectors.store import SecretStore

FLOW_TTL_S = 600.0
REFRESH_MARGIN_S = 60.0
ACCESS, REFRESH, EXPIRES = "oauth_access_token", "oauth_refresh_token", "oauth_expires_at"
CLIENT = "oauth_client"  # MCP's own OAuth: the dynamic registration (JSON)
KEYS = (ACCESS, REFRESH, EXPIRES, CLIENT)


class OAuthError(SkaldError):
    code = "oauth_failed"


@dataclass(frozen=True)
class Pending:
    user_id: str
    connector: str
    request: AuthorizationRequest
    expires: float
    popup: bool = False  # the page opened it in a popup, which closes itself at the end


class OAuthFlows:
    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}

    def keep(
        self, user_id: str, connector: str, request: AuthorizationRequest, popup: bool = False
    ) -> str:
        """Keep a started sign-in until its code comes back; the URL the member opens."""
        now = time.monotonic()
        self._pending = {k: p for k, p in self._pending.items() if p.expires > now}
        pending = Pending(user_id, connector, request, now + FLOW_TTL_S, popup)
        self._pending[request.state] = pending
        return request.url

    def start(
        self,
        user_id: str,
        connector: str,
        oc: OAuthClient,
        redirect_uri: str,
        popup: bool = False,
    ) -> str:
        """The authorization URL the member opens (a feed's `auth.oauth`, resolved)."""
        scope = " ".join(oc.scopes) or None
        request = client.start_authorization(
            oc.endpoints, oc.client, redirect_uri, scope, extra=oc.extra
        )
        return self.keep(user_id, connector, request, popup)

    def take(self, state: str, user_id: str) -> Pending:
        """The pending flow for `state`, once; another member's or an expired one is
        not found."""
        pending = self._pending.get(state)
        if pending is None or pending.user_id != user_id:
            raise NotFoundError("this sign-in is unknown or has expired: start it again")
        del self._pending[state]
        if pending.expires < time.monotonic():
            raise NotFoundError("this sign-in has expired: start it again")
        return pending


@dataclass(frozen=True)
class OAuthClient:
    """Who signs in where: a feed's inline endpoints and public client, or a sign-in
    provider's (the secret opened here, in memory, for the token requests)."""

    endpoints: Endpoints
    client: ClientInfo
    scopes: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)


async def resolve(spec: OAuthSpec, providers: Providers) -> OAuthClient:
    """The feed's section as an `OAuthClient`; a provider without a row is a 400 that
    says an administrator has to set it up."""
    if spec.provider is None:
        return OAuthClient(
            endpoints=_endpoints(spec.authorize_url, spec.token_url),
            client=ClientInfo(client_id=spec.client_id, token_endpoint_auth_method="none"),  # noqa: S106
            scopes=list(spec.scopes),
        )
    p = await providers.resolve(spec.provider)
    return OAuthClient(
        endpoints=_endpoints(p.authorize_url, p.token_url),
        # With a secret: HTTP Basic at the token endpoint (RFC 6749's default).
        client=ClientInfo(client_id=p.client_id, client_secret=p.client_secret),
        scopes=list(spec.scopes),
        extra=dict(p.extra_params),
    )


def _endpoints(authorize_url: str, token_url: str) -> Endpoints:
    return Endpoints(
        authorization_endpoint=authorize_url,
        token_endpoint=token_url,
        code_challenge_methods_supported=["S256"],
    )


CREDENTIAL = "oauth_credential"  # the delivered value at launch (never stored)


def credential(spec: OAuthSpec, oc: OAuthClient, stored: dict[str, str]) -> str:
    """What the connector receives, in the feed's `format`."""
    if spec.format == "access_token":
        return stored[ACCESS]
    refresh_token = stored.get(REFRESH)
    if not refresh_token:
        raise OAuthError(
            "the sign-in gave no refresh token, which this connector needs: sign in again "
            "(an administrator may have to add access_type=offline to the provider)"
        )
    if spec.format == "refresh_token":
        return refresh_token
    return json.dumps(
        {
            "type": "authorized_user",
            "client_id": oc.client.client_id,
            "client_secret": oc.client.client_secret or "",
            "refresh_token": refresh_token,
            "token_uri": oc.endpoints.token_endpoint,
        }
    )


def as_secrets(tokens: Tokens) -> dict[str, str]:
    out = {ACCESS: tokens.access_token}
    if tokens.refresh_token:
        out[REFRESH] = tokens.refresh_token
    if tokens.expires_at is not None:
        out[EXPIRES] = str(int(tokens.expires_at))
    return out


def from_secrets(stored: dict[str, str]) -> Tokens | None:
    if not stored.get(ACCESS):
        return None
    expires = stored.get(EXPIRES)
    return Tokens(
        access_token=stored[ACCESS],
        refresh_token=stored.get(REFRESH) or None,
        expires_at=float(expires) if expires else None,
    )


async def exchange(pending: Pending, code: str) -> Tokens:
    """The code traded for tokens (`SecretOAuthStore.save_tokens` keeps them)."""
    if not code.strip():
        raise InvalidInputError("the code is empty")
    try:
        return await client.exchange_code(pending.request, code.strip())
    except client.OAuthError as exc:
        raise OAuthError(str(exc)) from None


def needs_refresh(stored: dict[str, str]) -> bool:
    expires = stored.get(EXPIRES)
    return bool(expires) and float(expires or 0) - time.time() < REFRESH_MARGIN_S


async def refresh(oc: OAuthClient, stored: dict[str, str]) -> dict[str, str]:
    tokens = from_secrets(stored)
    if tokens is None or not tokens.refresh_token:
        raise OAuthError("the sign-in has expired: sign in again")
    try:
        return as_secrets(await client.refresh(oc.endpoints, oc.client, tokens))
    except client.OAuthError as exc:
        raise OAuthError(str(exc)) from None


def mcp_flow(
    secrets: SecretStore, connector: str, redirect_uri: str = "", scrub: list[str] | None = None
) -> client.McpOAuth:
    """MCP's own authorization for one member's connector, tokens in their database.

    At launch (`redirect_uri` empty) it only sends and refreshes what the member's
    sign-in stored: a server that wants a new sign-in fails the call with a text that
    says where to sign in, never a bare `HTTP 401`. `begin`/`finish` run the sign-in
    itself from the routes."""
    return client.McpOAuth(
        redirect_uri=redirect_uri,
        authorize=None,
        store=SecretOAuthStore(secrets, connector, scrub),
        sign_in_needed=f"sign in to {connector} from the Connectors page",
    )


class SecretOAuthStore:
    """`skald.mcp.OAuthStore` on one connector's secrets in the member's own database:
    what `McpOAuth` refreshes or registers is written there, encrypted with their key.
    `scrub`: the instance's list of values redacted from what its server says; a
    refreshed token joins it."""

    def __init__(
        self, secrets: SecretStore, connector: str, scrub: list[str] | None = None
    ) -> None:
        self.secrets = secrets
        self.connector = connector
        self.scrub = scrub if scrub is not None else []

    async def load_tokens(self) -> Tokens | None:
        return from_secrets(await self.secrets.values(self.connector))

    async def save_tokens(self, tokens: Tokens | None) -> None:
        if tokens is None:
            for key in (ACCESS, REFRESH, EXPIRES):
                await self.secrets.delete(self.connector, key)
            return
        stored = as_secrets(tokens)
        self.scrub.extend(v for k, v in stored.items() if k != EXPIRES)
        for key in (REFRESH, EXPIRES):  # none of the old sign-in's is left behind
            if key not in stored:
                await self.secrets.delete(self.connector, key)
        for key, value in stored.items():
            await self.secrets.put(self.connector, key, value)

    async def load_client(self) -> ClientInfo | None:
        raw = (await self.secrets.values(self.connector)).get(CLIENT)
        if not raw:
            return None
        try:
            return msgspec.json.decode(raw, type=ClientInfo)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None  # registered again at the next sign-in

    async def save_client(self, info: ClientInfo) -> None:
        await self.secrets.put(self.connector, CLIENT, msgspec.json.encode(info).decode())
