"""OAuth 2 sign-in for connectors: authorization code with PKCE (S256), refresh tokens.

Rule: the flow's state lives on the server only (`OAuthFlows`, in memory, ten minutes,
bound to the member who started it and used once); the browser carries just the opaque
`state`. The code comes back to the callback route or is pasted back by the member.
Tokens are secrets of the member (`oauth_access_token`, `oauth_refresh_token`,
`oauth_expires_at` in their owner database) and reach the connector as the environment
variable or header the manifest names (`Bearer <token>` for a header), refreshed at
launch when they expire within a minute.

Trap: a restart forgets pending flows (the member starts again); tokens already stored
are kept. The token endpoint's error text is shown without the request's body: it may
echo the code or the verifier.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx

from skald.errors import InvalidInputError, NotFoundError, SkaldError
from skald.features.connectors.feed import OAuthSpec

FLOW_TTL_S = 600.0
REFRESH_MARGIN_S = 60.0
TIMEOUT_S = 20.0
ACCESS, REFRESH, EXPIRES = "oauth_access_token", "oauth_refresh_token", "oauth_expires_at"


class OAuthError(SkaldError):
    code = "oauth_failed"


@dataclass(frozen=True)
class Pending:
    user_id: str
    connector: str
    verifier: str
    redirect_uri: str
    expires: float


def challenge(verifier: str) -> str:
    """S256: base64url(sha256(verifier)) without padding (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OAuthFlows:
    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}

    def start(self, user_id: str, connector: str, spec: OAuthSpec, redirect_uri: str) -> str:
        """The authorization URL the member opens."""
        now = time.monotonic()
        self._pending = {k: p for k, p in self._pending.items() if p.expires > now}
        state = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)  # 64 characters, within RFC 7636's 43..128
        self._pending[state] = Pending(user_id, connector, verifier, redirect_uri, now + FLOW_TTL_S)
        query = {
            "response_type": "code",
            "client_id": spec.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge(verifier),
            "code_challenge_method": "S256",
        }
        if spec.scopes:
            query["scope"] = " ".join(spec.scopes)
        sep = "&" if "?" in spec.authorize_url else "?"
        return spec.authorize_url + sep + urlencode(query)

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


async def _token_request(spec: OAuthSpec, form: dict[str, str]) -> dict[str, str]:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            r = await http.post(spec.token_url, data=form, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise OAuthError(f"the sign-in service could not be reached: {type(exc).__name__}") from exc
    try:
        body = r.json()
    except ValueError:
        body = {}
    if r.status_code != 200 or not isinstance(body, dict) or "access_token" not in body:
        what = body.get("error") if isinstance(body, dict) else None
        raise OAuthError(f"the sign-in service refused: {what or f'HTTP {r.status_code}'}")
    out = {ACCESS: str(body["access_token"])}
    if body.get("refresh_token"):
        out[REFRESH] = str(body["refresh_token"])
    if isinstance(body.get("expires_in"), int | float):
        out[EXPIRES] = str(int(time.time() + float(body["expires_in"])))
    return out


async def exchange(spec: OAuthSpec, code: str, pending: Pending) -> dict[str, str]:
    if not code.strip():
        raise InvalidInputError("the code is empty")
    return await _token_request(
        spec,
        {
            "grant_type": "authorization_code",
            "code": code.strip(),
            "redirect_uri": pending.redirect_uri,
            "client_id": spec.client_id,
            "code_verifier": pending.verifier,
        },
    )


def needs_refresh(stored: dict[str, str]) -> bool:
    expires = stored.get(EXPIRES)
    return bool(expires) and float(expires or 0) - time.time() < REFRESH_MARGIN_S


async def refresh(spec: OAuthSpec, stored: dict[str, str]) -> dict[str, str]:
    token = stored.get(REFRESH)
    if not token:
        raise OAuthError("the sign-in has expired: sign in again")
    fresh = await _token_request(
        spec, {"grant_type": "refresh_token", "refresh_token": token, "client_id": spec.client_id}
    )
    fresh.setdefault(REFRESH, token)  # a server may keep the same refresh token
    return fresh
