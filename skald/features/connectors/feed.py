"""The marketplace feed: a static directory or https base URL holding `connectors.json`
(an integer `version` and, per connector, its folder, its integer version and the sha256
of every file) and `<folder>/connector.json` plus the files it lists.

Rule: every file of an item is fetched and checked against the digest in
`connectors.json` before anything of it is used; one mismatch refuses the whole item
(`TamperedError`). `connector.json` is validated strictly (unknown keys refused) so a
typo in a feed is an error, not a silently ignored field.

Trap: the index itself carries no signature: its digests only pin the items to the
index. Trust in a feed is trust in whoever serves `connectors.json`; hence https only
(plain http is accepted for loopback addresses, which tests use).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal, Protocol
from urllib.parse import urlsplit

import httpx
import msgspec

from skald.errors import InvalidInputError, SkaldError
from skald.features.connectors.shapes import NAME, Localized
from skald.features.connectors.store import AuthType, Scope, Transport

MAX_FILE_BYTES = 8 * 1024 * 1024
FETCH_TIMEOUT_S = 30.0


class TamperedError(SkaldError):
    """A file of a feed item does not match its digest: the item is refused whole."""

    code = "tampered"


class FeedError(SkaldError):
    """The feed could not be read or is malformed."""

    code = "bad_feed"


class SecretField(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
    label: str = ""


# A sign-in provider's slug: the key into the administrators' Sign-in providers table.
PROVIDER = r"^[a-z0-9][a-z0-9-]{0,39}$"

# What the connector is given (`OAuthSpec.format`): the access token; the refresh token;
# or a Google "authorized user" JSON (type, client_id, client_secret, refresh_token,
# token_uri) that the connector's own client library refreshes with.
CredentialFormat = Literal["access_token", "refresh_token", "google_authorized_user"]


class OAuthSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Either `provider` (a slug: client id, secret, endpoints and extra parameters are
    the administrators', never the feed's) or the endpoints and a public client id."""

    provider: Annotated[str, msgspec.Meta(pattern=PROVIDER)] | None = None
    authorize_url: str = ""
    token_url: str = ""
    client_id: str = ""
    scopes: list[str] = msgspec.field(default_factory=list)
    # How the credential reaches the connector: an environment variable or a header.
    deliver: Literal["env", "header"] = "env"
    target: str = "ACCESS_TOKEN"  # the variable or header name
    format: CredentialFormat = "access_token"


class VerifySpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A command run with the connector's secrets (the ones being saved) before they are
    kept; it prints one JSON object `{"ok": bool, "message": str}` on stdout."""

    command: list[str]
    timeout_secs: Annotated[int, msgspec.Meta(ge=1, le=120)] = 15


class AuthSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    type: AuthType = "none"
    fields: list[SecretField] = msgspec.field(default_factory=list)
    oauth: OAuthSpec | None = None


# A language code as the web UI names its languages ("it", "fr"; "pt-BR").
LOCALE = r"^[a-z]{2}(-[A-Z]{2})?$"


class Manifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`<folder>/connector.json`."""

    name: Annotated[str, msgspec.Meta(pattern=NAME)]
    display_name: str = ""
    description: str = ""
    # Translations of the two fields above, by language: {"it": {"display_name": ...}}.
    i18n: dict[Annotated[str, msgspec.Meta(pattern=LOCALE)], Localized] = msgspec.field(
        default_factory=dict
    )
    # "developers": a tool for trying connectors out (the MCP reference server), listed on
    # the Marketplace only behind its "For developers" switch.
    audience: Literal["everyone", "developers"] = "everyone"
    icon: str = ""  # an emoji or a short text
    transport: Transport
    # stdio: the command and its arguments; `{DIR}` is the connector's folder, `{DEPS}`
    # its dependencies' folder, `{HOME}` the member's home, `{SECRET:name}` a secret.
    command: list[str] = msgspec.field(default_factory=list)
    url: str | None = None  # http: the endpoint (may hold `{SECRET:name}`)
    entry: str | None = None  # the main file (documentation; the command names it)
    dependencies: Literal["npm", "pip"] | None = None
    # Declared environment: the only variables the process gets (values may hold
    # `{SECRET:name}` and the folder placeholders).
    env: dict[str, str] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)  # http only
    auth: AuthSpec = msgspec.field(default_factory=AuthSpec)
    scope: Scope = "personal"
    # A stdio household connector's box: a network of its own (true) or none at all.
    network: bool = True
    # Checks a member's secrets before they are saved (the page's Test button).
    verify: VerifySpec | None = None
    # Granted at install to every member whose role has auto_grant (and to such members
    # created later); false: installed, but each member needs an administrator's grant.
    # The feed's value is the first one; an administrator can change it afterwards.
    grant_by_default: bool = True


class FeedItem(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    folder: Annotated[str, msgspec.Meta(pattern=NAME)]
    version: Annotated[int, msgspec.Meta(ge=1)]
    files: dict[str, Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]]


class FeedIndex(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    version: Annotated[int, msgspec.Meta(ge=1)]
    connectors: list[FeedItem] = msgspec.field(default_factory=list)


class FetchedItem(msgspec.Struct, frozen=True, kw_only=True):
    """An item whose every file matched its digest."""

    item: FeedItem
    manifest: Manifest
    files: dict[str, bytes]

    @property
    def digest(self) -> str:
        """One digest of the whole item (its files' digests, sorted)."""
        joined = "\n".join(f"{k}={v}" for k, v in sorted(self.item.files.items()))
        return hashlib.sha256(joined.encode()).hexdigest()


def _safe_relative(name: str) -> str:
    path = PurePosixPath(name)
    if (
        path.is_absolute()
        or not path.parts
        or any(p in ("..", ".", "") for p in path.parts)
        or "\\" in name
        or len(path.parts) > 8
    ):
        raise FeedError(f"the feed names an unsafe file path: {name!r}")
    return str(path)


def check_manifest(manifest: Manifest, item: FeedItem) -> None:
    """What the struct cannot say: the fields that go together."""
    if manifest.name != item.folder:
        raise FeedError(f"{item.folder}/connector.json names {manifest.name!r}")
    if manifest.transport == "stdio" and not manifest.command:
        raise FeedError(f"{manifest.name}: a stdio connector needs a command")
    if manifest.transport == "http" and not manifest.url:
        raise FeedError(f"{manifest.name}: an http connector needs a url")
    if (
        manifest.auth.type == "oauth2"
        and manifest.auth.oauth is None
        and manifest.transport != "http"
    ):
        # Without the section: MCP's own authorization, which only a remote server has.
        raise FeedError(f"{manifest.name}: oauth2 over stdio needs an `oauth` section")
    spec = manifest.auth.oauth
    if spec is not None:
        inline = (spec.authorize_url, spec.token_url, spec.client_id)
        if spec.provider is not None and any(inline):
            # A feed names the provider only: its client and endpoints are the household's.
            raise FeedError(
                f"{manifest.name}: an `oauth` section with a provider names no endpoints "
                "or client id"
            )
        if spec.provider is None and not all(inline):
            raise FeedError(
                f"{manifest.name}: an `oauth` section needs a provider, or its authorize_url, "
                "token_url and client_id"
            )
        if spec.format != "access_token" and spec.deliver != "env":
            raise FeedError(f"{manifest.name}: a {spec.format} credential is delivered as env")
        if spec.format == "google_authorized_user" and spec.provider is None:
            raise FeedError(f"{manifest.name}: google_authorized_user needs a provider")
    if manifest.verify is not None and not manifest.verify.command:
        raise FeedError(f"{manifest.name}: verify needs a command")
    if manifest.scope == "household" and manifest.auth.type != "none":
        # Household connectors run once for everyone: a member's credential has no place.
        raise FeedError(f"{manifest.name}: a household connector cannot need a sign-in")
    if manifest.dependencies == "npm" and not {"package.json", "package-lock.json"} <= set(
        item.files
    ):
        raise FeedError(f"{manifest.name}: npm dependencies need package.json and its lock")
    if manifest.dependencies == "pip" and "requirements.txt" not in item.files:
        raise FeedError(f"{manifest.name}: pip dependencies need requirements.txt")


class Source(Protocol):
    """What the installer and the Marketplace read: a `Feed`, or the household's own
    items (`own.OwnFeed`, rows of the registry)."""

    label: str  # where its items come from, shown on each item

    async def index(self) -> FeedIndex: ...

    async def fetch(self, item: FeedItem) -> FetchedItem: ...

    async def manifests(self) -> list[tuple[FeedItem, Manifest | None, str | None]]: ...


class Feed:
    """A feed at a directory path or an https base URL."""

    label: str

    def __init__(self, source: str) -> None:
        self.source = source.strip()
        if not self.source:
            raise InvalidInputError("the feed location is empty")
        parts = urlsplit(self.source)
        self.remote = parts.scheme in ("http", "https")
        if self.remote:
            loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
            if parts.scheme != "https" and not loopback:
                raise InvalidInputError("a feed URL must use https")
            self.base = self.source.rstrip("/") + "/"
        elif parts.scheme:
            raise InvalidInputError(f"unsupported feed location {self.source!r}")
        self.label = self.source

    async def _read(self, name: str) -> bytes:
        name = _safe_relative(name)
        if self.remote:
            try:
                async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
                    r = await http.get(self.base + name)
            except httpx.HTTPError as exc:
                raise FeedError(f"could not fetch {name}: {exc}") from exc
            if r.status_code != 200:
                raise FeedError(f"could not fetch {name}: HTTP {r.status_code}")
            if len(r.content) > MAX_FILE_BYTES:
                raise FeedError(f"{name} is too large")
            return r.content
        return await asyncio.to_thread(self._read_local, name)

    def _read_local(self, name: str) -> bytes:
        path = Path(self.source) / name
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise FeedError(f"{name} is too large")
            return path.read_bytes()
        except OSError as exc:
            raise FeedError(f"could not read {name} from the feed: {exc.strerror}") from exc

    async def index(self) -> FeedIndex:
        raw = await self._read("connectors.json")
        try:
            index = msgspec.json.decode(raw, type=FeedIndex)
        except msgspec.ValidationError as exc:
            raise FeedError(f"connectors.json: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise FeedError(f"connectors.json is not JSON: {exc}") from exc
        for item in index.connectors:
            if "connector.json" not in item.files:
                raise FeedError(f"{item.folder}: connectors.json lists no connector.json digest")
            for name in item.files:
                _safe_relative(name)
        return index

    async def fetch(self, item: FeedItem) -> FetchedItem:
        """Every file of the item, each checked; any mismatch refuses the item."""
        files: dict[str, bytes] = {}
        for name, digest in sorted(item.files.items()):
            data = await self._read(f"{item.folder}/{name}")
            if hashlib.sha256(data).hexdigest() != digest:
                raise TamperedError(
                    f"{item.folder}/{name} does not match its digest in connectors.json: "
                    "the connector was refused"
                )
            files[name] = data
        try:
            manifest = msgspec.json.decode(files["connector.json"], type=Manifest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise FeedError(f"{item.folder}/connector.json: {exc}") from exc
        check_manifest(manifest, item)
        return FetchedItem(item=item, manifest=manifest, files=files)

    async def manifests(self) -> list[tuple[FeedItem, Manifest | None, str | None]]:
        """Each item with its manifest (or None and why it was refused), for browsing."""
        out: list[tuple[FeedItem, Manifest | None, str | None]] = []
        for item in (await self.index()).connectors:
            try:
                out.append((item, (await self.fetch(item)).manifest, None))
            except SkaldError as exc:
                out.append((item, None, str(exc)))
        return out


_SECRET = re.compile(r"\{SECRET:([A-Za-z_][A-Za-z0-9_]{0,63})\}")


def expand(text: str, places: dict[str, str], secrets: dict[str, str]) -> str:
    """Fill `{DIR}`, `{DEPS}`, `{HOME}` and `{SECRET:name}` (a missing secret is an error
    that names it, never its neighbours' values)."""

    def secret(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in secrets:
            raise InvalidInputError(f"the secret {name!r} is not set: sign in to the connector")
        return secrets[name]

    for key, value in places.items():
        text = text.replace("{" + key + "}", value)
    return _SECRET.sub(secret, text)


def secret_names(manifest: Manifest) -> set[str]:
    """Every secret the manifest's command, url, env and headers use."""
    texts = [*manifest.command, manifest.url or "", *manifest.env.values()]
    texts += list(manifest.headers.values())
    return {m.group(1) for t in texts for m in _SECRET.finditer(t)}
