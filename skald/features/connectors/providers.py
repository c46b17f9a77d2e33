"""Sign-in providers (issue 29 item 5): the household's own OAuth clients, entered by an
administrator, that a feed's connector names by slug (`auth.oauth.provider`).

Rule: a feed names only the slug, the scopes and how the credential is delivered; the
client id, the client secret, the endpoints and extra authorization parameters (Google's
`access_type=offline`, `prompt=consent`) are rows of `oauth_providers` in the registry.
The secret is sealed with the server key (`PURPOSE`, the way the provider API keys and the
Telegram token are) and opened only where a token request or a delivered credential needs
it: API answers say `has_secret`, never the value, and no log line carries it.

Trap: a connector whose provider has no row cannot sign in ("an administrator has not
set up the sign-in provider ..."): installing it is allowed, so the admin can install
first and fill the row in afterwards.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import apsw
import msgspec

from skald.errors import InvalidInputError, NotFoundError
from skald.features.connectors.feed import PROVIDER
from skald.features.connectors.shapes import ProviderIn, ProviderOut
from skald.store.columns import Col, Columns
from skald.store.database import Database, fetch_one
from skald.store.registry import now_iso

if TYPE_CHECKING:
    from skald.plugins.facade import Server

PURPOSE = "oauth-client-secret"  # the sealing purpose: no other sealed value opens as this

# What the flow itself sets: an extra parameter never overrides it.
_RESERVED = {
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "code_challenge",
    "code_challenge_method",
    "scope",
    "resource",
}


class Provider(msgspec.Struct, frozen=True, kw_only=True):
    """A row with its secret opened: for a token request, never for an answer."""

    slug: str
    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str | None
    extra_params: dict[str, str]


def _check_url(label: str, url: str) -> None:
    parts = urlsplit(url)
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"the {label} must be an https URL")
    if parts.scheme != "https" and not loopback:
        raise InvalidInputError(f"the {label} must use https")


def _slug(slug: str) -> str:
    try:
        return str(msgspec.convert(slug, Annotated[str, msgspec.Meta(pattern=PROVIDER)]))
    except msgspec.ValidationError:
        raise InvalidInputError(
            "a provider's name is lowercase letters, digits and dashes (at most 40)"
        ) from None


_OUT = Columns(
    ProviderOut,
    "slug",
    "display_name",
    "authorize_url",
    "token_url",
    "client_id",
    Col("has_secret", sql="client_secret_sealed IS NOT NULL", read=bool),
    Col("extra_params", read=json.loads),
    "updated_at",
)


class Providers:
    """The `oauth_providers` rows; sealing and opening go through the server key."""

    def __init__(self, server: Server, db: Database) -> None:
        self.server = server
        self.db = db

    async def all(self, used: dict[str, list[str]] | None = None) -> list[ProviderOut]:
        found = await _OUT.many(self.db, "FROM oauth_providers ORDER BY slug")
        return [msgspec.structs.replace(p, used_by=(used or {}).get(p.slug, [])) for p in found]

    async def put(self, slug: str, data: ProviderIn) -> ProviderOut:
        slug = _slug(slug)
        _check_url("authorization URL", data.authorize_url)
        _check_url("token URL", data.token_url)
        reserved = sorted(set(data.extra_params) & _RESERVED)
        if reserved:
            raise InvalidInputError(f"the sign-in sets {reserved[0]!r} itself")
        sealed = (
            self.server.llm.key.seal(data.client_secret, PURPOSE) if data.client_secret else None
        )
        keep = data.client_secret is None
        params = json.dumps(data.extra_params, sort_keys=True)

        def q(c: apsw.Connection) -> ProviderOut:
            c.execute(
                "INSERT INTO oauth_providers(slug, display_name, authorize_url, token_url, "
                "client_id, client_secret_sealed, extra_params, updated_at) "
                "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(slug) DO UPDATE SET "
                "display_name=excluded.display_name, authorize_url=excluded.authorize_url, "
                "token_url=excluded.token_url, client_id=excluded.client_id, "
                "client_secret_sealed=CASE WHEN ? THEN oauth_providers.client_secret_sealed "
                "ELSE excluded.client_secret_sealed END, "
                "extra_params=excluded.extra_params, updated_at=excluded.updated_at",
                (
                    slug,
                    data.display_name or slug,
                    data.authorize_url,
                    data.token_url,
                    data.client_id,
                    sealed,
                    params,
                    now_iso(),
                    int(keep),
                ),
            )
            row = fetch_one(c, f"SELECT {_OUT.names} FROM oauth_providers WHERE slug=?", (slug,))
            assert row is not None
            return _OUT.row(row)

        return await self.db.transaction(q)

    async def remove(self, slug: str) -> None:
        def q(c: apsw.Connection) -> None:
            if fetch_one(c, "SELECT 1 FROM oauth_providers WHERE slug=?", (slug,)) is None:
                raise NotFoundError(f"no sign-in provider named {slug!r}")
            c.execute("DELETE FROM oauth_providers WHERE slug=?", (slug,))

        await self.db.transaction(q)

    async def resolve(self, slug: str) -> Provider:
        """The provider with its secret opened, for a sign-in or a refresh."""
        row = await self.db.fetch_one(
            f"SELECT {_OUT.names}, client_secret_sealed FROM oauth_providers WHERE slug=?", (slug,)
        )
        if row is None:
            raise InvalidInputError(
                f"an administrator has not set up the sign-in provider {slug!r} yet "
                "(Sign-in providers)"
            )
        out, sealed = _OUT.row(row), row[len(_OUT)]
        return Provider(
            slug=out.slug,
            authorize_url=out.authorize_url,
            token_url=out.token_url,
            client_id=out.client_id,
            client_secret=self.server.llm.key.open(sealed, PURPOSE) if sealed else None,
            extra_params=out.extra_params,
        )
