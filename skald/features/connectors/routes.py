"""Connector routes: members (`connectors.use`) list, activate and sign in to what they
are granted; administrators (`admin.connectors`) browse the feed, install, update,
uninstall and grant.

Rule: every member route resolves the connector through `Connectors.require_usable`
(another member's or an ungranted connector is "not found", the same answer as a name
that does not exist), and no answer ever carries a secret value: secrets are listed by
name only.

The handlers see the facade only: the household through `Server` (the `Connectors` in its
state, accounts through the core's `AccountService`), the caller's `Member` opened with
`server.open_member` where their secrets are read or written (after the connector is
resolved, so an unknown name is 404 before a locked member's 401), and handed to
`Supervisor.verify` for a check in their container. A member route on one connector
starts from `OnConnector` (the group's `on` dependency): the caller, the name and both
steps, in that order.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, urlsplit

import msgspec
from litestar import delete, get, post, put
from litestar.di import NamedDependency, Provide
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Redirect

from skald.api.deps import AnyRequest, AuthRequest, group, requires
from skald.api.openapi import errors
from skald.api.security import principal_of
from skald.core.accounts import AccountService
from skald.core.sessions import Principal
from skald.errors import ConflictError, InvalidInputError, NotFoundError
from skald.features.connectors.service import ADMIN_CONNECTORS, CONNECTORS_USE, Connectors, require

# Litestar reads the handlers' annotations (through this module's globals) when the app is
# built: every type a handler names is imported here, from the small `shapes`; what acts
# on them (the feed, the installer, the trial, OAuth, the MCP client) at first use.
from skald.features.connectors.shapes import Localized, OwnIn, ProviderIn, ProviderOut, TrialOut
from skald.features.connectors.store import Connector
from skald.files.mime import sniff
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.rows import User

if TYPE_CHECKING:
    from skald.features.connectors import oauth
    from skald.features.connectors.feed import FeedItem, Manifest
    from skald.mcp import Prompt, Resource, ResourceTemplate
    from skald.mcp.wire import CallToolResult

USE = [requires(CONNECTORS_USE)]
ADMIN = [requires(ADMIN_CONNECTORS)]


def _action(path: str, *statuses: int) -> HTTPRouteHandler:
    """A member's action on one of their connectors: a POST answered 200 with the
    outcome (Litestar's own default for a POST, 201, is for something made)."""
    return post(path, guards=USE, status_code=200, responses=errors(*statuses))


class ToolOut(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str


class ResourceOut(msgspec.Struct, frozen=True, kw_only=True):
    uri: str  # a URI template for a template
    name: str
    title: str = ""
    description: str = ""
    mime_type: str = ""


class PromptArgOut(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    required: bool = False


class PromptOut(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    title: str = ""
    description: str = ""
    arguments: list[PromptArgOut] = msgspec.field(default_factory=list)


class PromptIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    arguments: dict[
        Annotated[str, msgspec.Meta(min_length=1, max_length=100)],
        Annotated[str, msgspec.Meta(max_length=4000)],
    ] = msgspec.field(default_factory=dict)


class ResourceContentOut(msgspec.Struct, frozen=True, kw_only=True):
    uri: str
    mime_type: str
    text: str | None = None  # text contents (clipped)
    image: str | None = None  # a raster picture, base64 (the page shows a data: URL)
    size: int = 0  # bytes of a blob shown neither way


class PromptTextOut(msgspec.Struct, frozen=True, kw_only=True):
    text: str  # for the chat composer


class EventOut(msgspec.Struct, frozen=True, kw_only=True):
    at: float
    kind: str  # log, state, error
    text: str


class ConnectorOut(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    display_name: str
    description: str
    icon: str
    version: int
    transport: str
    auth: str
    scope: str
    reach: str  # what it can reach (`household_box.reach`)
    active: bool
    state: str  # of the member's (or the household's) instance: stopped, starting, ...
    signed_in: bool  # every secret it needs is set (always true for auth "none")
    secret_fields: list[dict[str, str]]
    secrets_set: list[str]
    tools: list[ToolOut]
    last_error: str | None = None
    last_stderr: str | None = None  # administrators only
    # The instance's recent events (its log notifications, restarts, errors): the
    # member's own instance; a household one's only for administrators.
    events: list[EventOut] = msgspec.field(default_factory=list)
    # What the running instance offers besides tools (issue 23 item 4).
    resources: list[ResourceOut] = msgspec.field(default_factory=list)
    templates: list[ResourceOut] = msgspec.field(default_factory=list)
    prompts: list[PromptOut] = msgspec.field(default_factory=list)
    # Members whose role has auto_grant get it without a grant (issue 29 item 5).
    grant_by_default: bool = True
    # It checks secrets before they are saved (`verify`): the page shows a Test button.
    verifies: bool = False


class SecretsIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    values: dict[
        Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")],
        Annotated[str, msgspec.Meta(min_length=1, max_length=8192)],
    ]


class MarketItem(msgspec.Struct, frozen=True, kw_only=True):
    folder: str
    version: int
    name: str | None
    display_name: str
    description: str
    icon: str
    transport: str | None
    auth: str | None
    scope: str | None
    # What it can reach once installed (`household_box.reach`): personal, remote, host,
    # box_network, box_offline.
    reach: str | None
    installed_version: int | None
    update: bool
    refused: str | None = None  # why the item cannot be installed (digest, format)
    # The page shows the member's language from `i18n`, and hides "developers" items
    # behind a switch (feed.Manifest).
    audience: str = "everyone"
    i18n: dict[str, Localized] = msgspec.field(default_factory=dict)
    # Where it comes from: "shipped", "household" (added by hand) or the feed's location.
    source: str = "shipped"


class TrialIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    item: OwnIn
    # Values for the item's {SECRET:name} for this one run: never stored or answered.
    secrets: dict[str, Annotated[str, msgspec.Meta(max_length=4000)]] = msgspec.field(
        default_factory=dict
    )


class GrantsOut(msgspec.Struct, frozen=True, kw_only=True):
    connector: str
    users: list[str]


def _conn(server: Server) -> Connectors:
    return require(server)


@dataclass(frozen=True)
class OnConnector:
    """A member's call on connector `name` (the path's): the group's `on` dependency, so
    each member route starts from it rather than from the server, the request and the
    name. Trap: it resolves the connector only when the handler asks (`row`), after
    Litestar has read the body and the query: their 400 still comes before an unknown
    name's 404, and the 404 before a locked member's 401 (`member`)."""

    server: Server
    principal: Principal
    name: str

    @property
    def c(self) -> Connectors:
        return _conn(self.server)

    @property
    def user(self) -> User:
        return self.principal.user

    async def row(self) -> Connector:
        """Connector `name` as the caller may use it (else 404)."""
        return await self.c.require_usable(self.principal.user, self.principal.role, self.name)

    async def member(self) -> Member:
        """The caller's own data: DatabaseClosedError (401) while it is locked."""
        return await self.server.open_member(self.user)

    async def describe(self, row: Connector) -> ConnectorOut:
        return await _describe(self.c, self.principal, row)


def _on(name: FromPath[str], request: AuthRequest, server: NamedDependency[Server]) -> OnConnector:
    return OnConnector(server, request.user, name)


async def _describe(c: Connectors, principal: Principal, row: Connector) -> ConnectorOut:
    user = principal.user
    admin = principal.can(ADMIN_CONNECTORS)
    mine = await c.store.activations(user.id)
    try:
        member = await c.server.open_member(user)
        set_names = sorted((await c.secrets(member.db).values(row.name)).keys())
    except Exception:  # locked data: no secret can be read, none is shown
        set_names = []
    fields = [{"name": f.name, "label": f.label or f.name} for f in _auth_fields(row)]
    needed = _needed_secrets(row)
    if row.auth == "oauth2":
        from skald.features.connectors.oauth import ACCESS

        needed |= {ACCESS}
    from skald.features.connectors.household_box import reach

    sup = c.supervisor
    state, tools, events = ("stopped", [], [])
    resources: list[ResourceOut] = []  # a running instance's catalogue, else none
    templates: list[ResourceOut] = []
    prompts: list[PromptOut] = []
    if sup is not None:
        state, listed = sup.state_of(user.id, row)
        tools = [ToolOut(name=t.name, description=t.description) for t in listed]
        inst = sup.instance_for(user.id, row)
        if inst is not None and (inst.owner == user.id or admin):
            events = [EventOut(at=e.at, kind=e.kind, text=e.text) for e in list(inst.events)[-50:]]
        if inst is not None:
            resources = [_resource_out(r.uri, r) for r in inst.catalog.resources]
            templates = [_resource_out(t.uri_template, t) for t in inst.catalog.templates]
            prompts = [_prompt_out(p) for p in inst.catalog.prompts]
    return ConnectorOut(
        name=row.name,
        display_name=row.display_name,
        description=row.description,
        icon=row.icon,
        version=row.feed_version,
        transport=row.transport,
        auth=row.auth,
        scope=row.scope,
        reach=reach(
            row.scope,
            row.transport,
            bool(row.manifest.get("network", True)),
            c.config.household_on_host,
        ),
        active=row.name in mine,
        state=state,
        signed_in=needed <= set(set_names),
        secret_fields=fields,
        secrets_set=set_names,
        tools=tools,
        last_error=row.last_error if admin else None,
        last_stderr=row.last_stderr if admin else None,
        events=events,
        resources=resources,
        templates=templates,
        prompts=prompts,
        grant_by_default=row.name not in await c.store.not_by_default(),
        verifies=bool(row.manifest.get("verify")),
    )


def _text(value: object, limit: int = 500) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _resource_out(uri: str, r: Resource | ResourceTemplate) -> ResourceOut:
    return ResourceOut(
        uri=uri[:2000],
        name=r.name[:200],
        title=_text(r.title, 200),
        description=_text(r.description),
        mime_type=_text(r.mime_type, 100),
    )


def _prompt_out(p: Prompt) -> PromptOut:
    return PromptOut(
        name=p.name[:200],
        title=_text(p.title, 200),
        description=_text(p.description),
        arguments=[
            PromptArgOut(name=a.name[:100], description=_text(a.description), required=a.required)
            for a in p.arguments
        ],
    )


def _auth_fields(row: Connector) -> list[Any]:
    from skald.features.connectors.feed import Manifest

    manifest = msgspec.convert(
        {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
    )
    return list(manifest.auth.fields)


def _needed_secrets(row: Connector) -> set[str]:
    from skald.features.connectors.feed import Manifest, secret_names

    manifest = msgspec.convert(
        {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
    )
    return secret_names(manifest)


# -- members ------------------------------------------------------------------------------


@get("/api/connectors", guards=USE)
async def list_mine(request: AuthRequest, server: NamedDependency[Server]) -> list[ConnectorOut]:
    c = _conn(server)
    p = request.user
    return [await _describe(c, p, row) for row in await c.usable(p.user, p.role)]


@get("/api/connectors/{name:str}", guards=USE, responses=errors(404))
async def get_one(on: NamedDependency[OnConnector]) -> ConnectorOut:
    return await on.describe(await on.row())


@_action("/api/connectors/{name:str}/activate", 404)
async def activate(on: NamedDependency[OnConnector]) -> ConnectorOut:
    c, row = on.c, await on.row()
    await c.store.set_active(on.name, on.user.id, True)
    if c.supervisor is not None:
        await c.supervisor.member_changed(on.user.id)
        # Switching a failed one on again is a retry (a household one outlives a switch-off).
        await c.supervisor.retry(on.user.id, row)
    return await on.describe(row)


@_action("/api/connectors/{name:str}/retry", 404, 409)
async def retry(on: NamedDependency[OnConnector]) -> ConnectorOut:
    """Start a failed connector again now (its restart count starts afresh); 409 when it
    is not failed."""
    c, row = on.c, await on.row()
    if c.supervisor is None or not await c.supervisor.retry(on.user.id, row):
        state = "stopped" if c.supervisor is None else c.supervisor.state_of(on.user.id, row)[0]
        raise ConflictError(f"{on.name} is {state}: there is nothing to retry")
    return await on.describe(row)


@_action("/api/connectors/{name:str}/deactivate", 404)
async def deactivate(on: NamedDependency[OnConnector]) -> ConnectorOut:
    row = await on.row()
    await on.c.deactivate(on.name, on.user.id)
    return await on.describe(row)


@put("/api/connectors/{name:str}/secrets", guards=USE, responses=errors(400, 404))
async def put_secrets(on: NamedDependency[OnConnector], data: JSONBody[SecretsIn]) -> ConnectorOut:
    """Store the member's secrets for this connector (in their own database); the answer
    names which are set, never a value."""
    c, row = on.c, await on.row()
    _check_secret_names(row, data)
    mine = await on.member()
    if row.manifest.get("verify"):
        # A connector that can check its secrets does so first: a refusal keeps nothing.
        ok, message = await _verify(c, mine, row, data)
        if not ok:
            raise VerifyFailed(message)
    store = c.secrets(mine.db)
    for key, value in data.values.items():
        await store.put(on.name, key, value)
    if c.supervisor is not None:
        await c.supervisor.restart_member(on.user.id, on.name)
    return await on.describe(row)


class VerifyFailed(InvalidInputError):
    """The connector's own check refused the secrets (its message is the error's)."""

    code = "verify_failed"


class VerifyOut(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    message: str


def _check_secret_names(row: Connector, data: SecretsIn) -> None:
    allowed = {f.name for f in _auth_fields(row)} | _needed_secrets(row)
    unknown = set(data.values) - allowed
    if unknown:
        raise InvalidInputError(f"{row.name} takes no secret named {sorted(unknown)[0]!r}")


async def _verify(c: Connectors, mine: Member, row: Connector, data: SecretsIn) -> tuple[bool, str]:
    if c.supervisor is None:
        raise ConflictError("connectors are not running on this server")
    return await c.supervisor.verify(mine, row, dict(data.values))


@_action("/api/connectors/{name:str}/verify", 400, 404, 409)
async def verify_secrets(on: NamedDependency[OnConnector], data: JSONBody[SecretsIn]) -> VerifyOut:
    """The Test button: the connector's `verify` command with these values, nothing
    stored; 400 when the connector has no check."""
    row = await on.row()
    _check_secret_names(row, data)
    if not row.manifest.get("verify"):
        raise InvalidInputError(f"{on.name} has no check to run")
    ok, message = await _verify(on.c, await on.member(), row, data)
    return VerifyOut(ok=ok, message=message)


@delete("/api/connectors/{name:str}/secrets", guards=USE, status_code=204, responses=errors(404))
async def sign_out(on: NamedDependency[OnConnector]) -> None:
    c, _ = on.c, await on.row()
    mine = await on.member()
    await c.secrets(mine.db).delete(on.name)
    if c.supervisor is not None:
        await c.supervisor.stop_member(on.user.id, on.name)


# -- QR/device sign-in (`login_status` / `logout` tools) ---------------------------------


class DeviceImage(msgspec.Struct, frozen=True, kw_only=True):
    mime_type: str
    data: str  # base64, shown as a data: URL


class DeviceStatusOut(msgspec.Struct, frozen=True, kw_only=True):
    signed_in: bool
    text: str  # the tool's text (a pairing code, a URL, "signed in as ...")
    images: list[DeviceImage]
    is_error: bool = False


_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_IMAGE_MAX_CHARS = 2 * 1024 * 1024


def _device_status(result: CallToolResult) -> DeviceStatusOut:
    """The tool's answer for the page. Signed in: `structuredContent.signed_in` when the
    server gives it, else text starting with "signed in" (what such servers say)."""
    from skald.mcp.wire import ImageContent, TextContent

    texts = [b.text for b in result.content if isinstance(b, TextContent)]
    # Only raster images of a sane size: the page renders them as a data: URL (never SVG,
    # which could carry script).
    images = [
        DeviceImage(mime_type=b.mime_type, data=b.data)
        for b in result.content
        if isinstance(b, ImageContent)
        and b.mime_type in _IMAGE_TYPES
        and len(b.data) <= _IMAGE_MAX_CHARS
    ]
    text = "\n".join(texts).strip()
    structured = result.structured_content
    if isinstance(structured, dict) and isinstance(structured.get("signed_in"), bool):
        signed_in = bool(structured["signed_in"])
    else:
        signed_in = not result.is_error and text.lower().startswith("signed in")
    return DeviceStatusOut(
        signed_in=signed_in, text=text[:4000], images=images, is_error=result.is_error
    )


async def _device(on: OnConnector, tool: str) -> DeviceStatusOut:
    row = await on.row()
    if row.auth != "qr":
        raise InvalidInputError(f"{on.name} does not sign in with a code")
    if on.c.supervisor is None:
        raise ConflictError("connectors are not running on this server")
    return _device_status(await on.c.supervisor.device_call(on.user.id, row, tool))


@_action("/api/connectors/{name:str}/login-status", 400, 404, 409)
async def login_status(on: NamedDependency[OnConnector]) -> DeviceStatusOut:
    """Ask the member's instance whether it is signed in; if not, what to scan or enter."""
    return await _device(on, "login_status")


@_action("/api/connectors/{name:str}/logout", 400, 404, 409)
async def device_logout(on: NamedDependency[OnConnector]) -> DeviceStatusOut:
    return await _device(on, "logout")


@_action("/api/connectors/{name:str}/prompts/{prompt:str}", 400, 404, 409)
async def get_prompt(
    on: NamedDependency[OnConnector], prompt: FromPath[str], data: JSONBody[PromptIn]
) -> PromptTextOut:
    """One of the connector's prompts, filled in, as text for the member's composer."""
    from skald.features.connectors.resources import prompt_text
    from skald.mcp import McpError

    inst = _running_instance(on.c, on.user.id, await on.row())
    if prompt not in {x.name for x in inst.catalog.prompts}:
        raise NotFoundError(f"{on.name} has no prompt {prompt[:100]!r}")
    try:
        got = await inst.session.get_prompt(prompt, dict(data.arguments))
    except McpError as exc:
        raise InvalidInputError(inst.scrub(str(exc))[:500]) from exc
    return PromptTextOut(text=inst.scrub(prompt_text(got.messages))[:20_000])


def _sniff_base64(data: str) -> str:
    try:
        head = base64.b64decode(data[:88], validate=True)
    except (binascii.Error, ValueError):
        return "application/octet-stream"
    return sniff(head)


def _running_instance(c: Connectors, user_id: str, row: Connector) -> Any:
    inst = None if c.supervisor is None else c.supervisor.instance_for(user_id, row)
    if inst is None or inst.session is None or inst.state != "running":
        raise ConflictError(f"switch {row.name} on first" if inst is None else inst.unavailable())
    return inst


@get("/api/connectors/{name:str}/resource", guards=USE, responses=errors(400, 404, 409))
async def read_resource(
    on: NamedDependency[OnConnector], uri: Annotated[str, QueryParameter(max_length=2000)]
) -> ResourceContentOut:
    """One listed resource of the connector, for the member to look at on the page."""
    from skald.mcp import McpError

    inst = _running_instance(on.c, on.user.id, await on.row())
    if uri not in {r.uri for r in inst.catalog.resources}:
        raise NotFoundError(f"{on.name} lists no resource {uri[:200]!r}")
    try:
        read = await inst.session.read_resource(uri)
    except McpError as exc:
        raise InvalidInputError(inst.scrub(str(exc))[:500]) from exc
    if not read.contents:
        return ResourceContentOut(uri=uri, mime_type="text/plain", text="")
    first = read.contents[0]
    mime = first.mime_type if isinstance(first.mime_type, str) else "text/plain"
    if isinstance(first.text, str):
        return ResourceContentOut(uri=uri, mime_type=mime, text=inst.scrub(first.text)[:100_000])
    blob = first.blob if isinstance(first.blob, str) else ""
    # Only raster pictures (by their bytes, not the server's word) of a sane size: never
    # SVG, which could carry script.
    sniffed = _sniff_base64(blob)
    if sniffed in _IMAGE_TYPES and len(blob) <= _IMAGE_MAX_CHARS:
        return ResourceContentOut(uri=uri, mime_type=sniffed, image=blob)
    return ResourceContentOut(uri=uri, mime_type=mime, size=len(blob) * 3 // 4)


# -- OAuth 2 sign-in (PKCE) -------------------------------------------------------------


class OAuthStartOut(msgspec.Struct, frozen=True, kw_only=True):
    url: str  # open it; the service sends the browser back to the callback route
    state: str


class OAuthCodeIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    state: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    code: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]


def _manifest(row: Connector) -> Manifest:
    from skald.features.connectors.feed import Manifest

    return msgspec.convert(
        {k: v for k, v in row.manifest.items() if not k.startswith("_")}, Manifest
    )


async def _begin(on: OnConnector, row: Connector, callback: str, popup: bool) -> str:
    """Start a sign-in: the URL the member opens (the flow stays on the server)."""
    from skald.features.connectors import oauth
    from skald.features.connectors.feed import expand
    from skald.mcp.oauth import OAuthError as McpOAuthError

    c, user = on.c, on.user
    manifest = _manifest(row)
    if manifest.auth.type != "oauth2":
        raise InvalidInputError(f"{row.name} does not sign in with OAuth")
    if manifest.auth.oauth is not None:
        oc = await oauth.resolve(manifest.auth.oauth, c.providers)
        return c.oauth.start(user.id, row.name, oc, callback, popup)
    # MCP's own authorization: discovery and registration at the server's URL.
    mine = await on.member()
    secrets = c.secrets(mine.db)
    flow = oauth.mcp_flow(secrets, row.name, callback)
    places = {"DIR": "", "DEPS": "", "HOME": ""}
    url = expand(manifest.url or "", places, await secrets.values(row.name))
    try:
        started = await flow.begin(url)
    except McpOAuthError as exc:
        raise oauth.OAuthError(str(exc)) from None
    return c.oauth.keep(user.id, row.name, started, popup)


def _callback_url(request: AnyRequest) -> str:
    return str(request.base_url).rstrip("/") + CALLBACK


async def _finish(
    server: Server, p: Principal, state: str, code: str, name: str | None = None
) -> tuple[Connector, oauth.Pending]:
    from skald.features.connectors import oauth

    c = _conn(server)
    pending = c.oauth.take(state, p.user.id)
    if name is not None and pending.connector != name:
        raise NotFoundError("this sign-in belongs to another connector")
    row = await c.require_usable(p.user, p.role, pending.connector)
    tokens = await oauth.exchange(pending, code)
    mine = await server.open_member(p.user)
    await oauth.SecretOAuthStore(c.secrets(mine.db), row.name).save_tokens(tokens)
    if c.supervisor is not None:
        await c.supervisor.restart_member(p.user.id, row.name)
    return row, pending


CALLBACK = "/api/connector-oauth/callback"


@_action("/api/connectors/{name:str}/oauth/start", 400, 404)
async def oauth_start(
    request: AuthRequest,
    on: NamedDependency[OnConnector],
    popup: Annotated[bool, QueryParameter(name="popup")] = False,
) -> OAuthStartOut:
    """`?popup=true`: the page opened a popup for it; the callback's redirect then asks
    the popup to close itself (its opener lost it: cross-origin-opener-policy)."""
    url = await _begin(on, await on.row(), _callback_url(request), popup)
    state = parse_qs(urlsplit(url).query)["state"][0]
    return OAuthStartOut(url=url, state=state)


@get(CALLBACK, guards=USE, responses=errors(400, 404))
async def oauth_callback(
    request: AuthRequest,
    server: NamedDependency[Server],
    flow: Annotated[str, QueryParameter(name="state", max_length=200)] = "",
    code: Annotated[str, QueryParameter(name="code", max_length=4000)] = "",
) -> Redirect:
    """The service sends the member's browser here with the code; back to the page."""
    if not flow or not code:
        raise InvalidInputError("the sign-in service sent no code")
    row, pending = await _finish(server, request.user, flow, code)
    popup = "&popup=1" if pending.popup else ""
    return Redirect(path=f"/#/connectors?signed_in={row.name}{popup}")


@_action("/api/connectors/{name:str}/oauth/code", 400, 404)
async def oauth_code(on: NamedDependency[OnConnector], data: JSONBody[OAuthCodeIn]) -> ConnectorOut:
    """A code pasted back by the member (when the callback cannot reach this server)."""
    row, _ = await _finish(on.server, on.principal, data.state, data.code, on.name)
    return await on.describe(row)


# -- administrators -----------------------------------------------------------------------


@get("/api/marketplace", guards=ADMIN)
async def marketplace(server: NamedDependency[Server]) -> list[MarketItem]:
    """Every feed's items, in feed order; a name an earlier feed offers is shown refused."""
    c = _conn(server)
    installed = {row.name: row for row in await c.store.all()}
    out: list[MarketItem] = []
    seen: dict[str, str] = {}
    async for source, listed in c.read_sources(lambda s: s.manifests()):
        for item, manifest, refused in listed:
            if item.folder in seen:
                refused = f"{seen[item.folder]} already offers {item.folder}"
            seen.setdefault(item.folder, source.label)
            out.append(_market_item(c, installed.get(item.folder), item, manifest, refused))
            out[-1] = msgspec.structs.replace(out[-1], source=source.label)
    return out


def _market_item(
    c: Connectors,
    have: Connector | None,
    item: FeedItem,
    manifest: Manifest | None,
    refused: str | None,
) -> MarketItem:
    from skald.features.connectors.household_box import reach

    have_version = have.feed_version if have is not None and have.status == "installed" else None
    return MarketItem(
        folder=item.folder,
        version=item.version,
        name=None if manifest is None else manifest.name,
        display_name=item.folder if manifest is None else (manifest.display_name or manifest.name),
        description="" if manifest is None else manifest.description,
        icon="" if manifest is None else manifest.icon,
        transport=None if manifest is None else manifest.transport,
        auth=None if manifest is None else manifest.auth.type,
        scope=None if manifest is None else manifest.scope,
        reach=None
        if manifest is None
        else reach(
            manifest.scope, manifest.transport, manifest.network, c.config.household_on_host
        ),
        installed_version=have_version,
        update=have_version is not None and item.version > have_version and refused is None,
        refused=refused,
        audience="everyone" if manifest is None else manifest.audience,
        i18n={} if manifest is None else manifest.i18n,
    )


@post("/api/marketplace/{folder:str}/install", guards=ADMIN, responses=errors(400, 404, 409))
async def install(
    folder: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> ConnectorOut:
    c = _conn(server)
    row = await c.installer.install(await c.source_of(folder), folder)
    return await _describe(c, request.user, row)


@post("/api/marketplace/{folder:str}/update", guards=ADMIN, responses=errors(400, 404, 409))
async def update(
    folder: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> ConnectorOut:
    c = _conn(server)
    row = await c.installer.install(await c.source_of(folder), folder, update=True)
    if c.supervisor is not None:
        await c.supervisor.restart_all(row.name)
    return await _describe(c, request.user, row)


# -- the household's own items (issue 23 item 6) ------------------------------------------


@post("/api/connector-items/test", guards=ADMIN, status_code=200, responses=errors(400, 409))
async def test_item(
    data: JSONBody[TrialIn], request: AnyRequest, server: NamedDependency[Server]
) -> TrialOut:
    """Start the item unsaved with the isolation a real one gets, list its tools, stop it."""
    from skald.features.connectors.own import build
    from skald.features.connectors.trial import trial

    manifest, files = await build(data.item)
    user = principal_of(request).user
    return await trial(_conn(server), user.id, manifest, files, dict(data.secrets))


@post("/api/connector-items", guards=ADMIN, status_code=201, responses=errors(400, 409))
async def add_item(
    data: JSONBody[OwnIn], request: AnyRequest, server: NamedDependency[Server]
) -> ConnectorOut:
    """Store the item in the household's own feed and install it (a saved item of the same
    name is replaced by its next version, and running instances restart on it)."""
    from skald.features.connectors.own import LABEL, OwnFeed, build

    c = _conn(server)
    manifest, files = await build(data)
    try:
        source = await c.source_of(data.name)
    except NotFoundError:
        source = None
    if source is not None and source.label != LABEL:
        raise ConflictError(f"{source.label} already offers a connector named {data.name!r}")
    existing = await c.store.get(data.name)
    if existing is not None and source is None and existing.status == "installed":
        raise ConflictError(f"a connector named {data.name!r} is installed from another feed")
    saved = await c.own.put(manifest, files, principal_of(request).user.id)
    row = await c.installer.install(OwnFeed(c.own), saved.name, update=existing is not None)
    if existing is not None and c.supervisor is not None:
        await c.supervisor.restart_all(row.name)
    return await _describe(c, principal_of(request), row)


@delete("/api/connector-items/{name:str}", guards=ADMIN, status_code=204, responses=errors(404))
async def remove_item(name: FromPath[str], server: NamedDependency[Server]) -> None:
    """Uninstall the item (its instances stop) and drop it from the household's feed."""
    c = _conn(server)
    if await c.own.get(name) is None:
        raise NotFoundError(f"the household added no connector named {name!r}")
    if await c.store.get(name) is not None:
        if c.supervisor is not None:
            await c.supervisor.stop_all(name)
        await c.store.remove(name)
    await c.own.remove(name)


@delete("/api/connectors/{name:str}", guards=ADMIN, status_code=204, responses=errors(404))
async def uninstall(name: FromPath[str], server: NamedDependency[Server]) -> None:
    c = _conn(server)
    await c.store.require(name)
    if c.supervisor is not None:
        await c.supervisor.stop_all(name)
    await c.store.remove(name)


class GrantByDefaultIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    grant_by_default: bool


@put(
    "/api/connectors/{name:str}/grant-by-default",
    guards=ADMIN,
    status_code=204,
    responses=errors(400, 404),
)
async def set_grant_by_default(
    name: FromPath[str], data: JSONBody[GrantByDefaultIn], server: NamedDependency[Server]
) -> None:
    """Whether members with auto_grant get it without a grant: for installs and members
    to come (grants already given stay; revoke them one by one)."""
    await _conn(server).store.set_grant_by_default(name, data.grant_by_default)


# -- sign-in providers (issue 29 item 5) --------------------------------------------------


async def _used_by(c: Connectors) -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for row in await c.store.all():
        slug = ((row.manifest.get("auth") or {}).get("oauth") or {}).get("provider")
        if isinstance(slug, str):
            used.setdefault(slug, []).append(row.name)
    return used


@get("/api/sign-in-providers", guards=ADMIN)
async def list_providers(server: NamedDependency[Server]) -> list[ProviderOut]:
    """The household's OAuth clients, and which installed connectors name each (the
    slugs they name without a row are listed too, to be filled in)."""
    c = _conn(server)
    used = await _used_by(c)
    out = await c.providers.all(used)
    have = {p.slug for p in out}
    missing = [
        ProviderOut(
            slug=slug,
            display_name="",
            authorize_url="",
            token_url="",
            client_id="",
            has_secret=False,
            extra_params={},
            updated_at="",
            used_by=names,
        )
        for slug, names in sorted(used.items())
        if slug not in have
    ]
    return out + missing


@put("/api/sign-in-providers/{slug:str}", guards=ADMIN, responses=errors(400))
async def put_provider(
    slug: FromPath[str], data: JSONBody[ProviderIn], server: NamedDependency[Server]
) -> ProviderOut:
    """Create or change a provider; the secret is sealed, and an absent `client_secret`
    keeps the stored one ("" removes it). The answer says `has_secret`, never the value."""
    c = _conn(server)
    saved = await c.providers.put(slug, data)
    return msgspec.structs.replace(saved, used_by=(await _used_by(c)).get(saved.slug, []))


@delete("/api/sign-in-providers/{slug:str}", guards=ADMIN, status_code=204, responses=errors(404))
async def remove_provider(slug: FromPath[str], server: NamedDependency[Server]) -> None:
    """Members stay signed in with the tokens they have; a new sign-in or a refresh
    needs the provider again."""
    await _conn(server).providers.remove(slug)


# One member's grant of one connector: given with PUT, taken back with DELETE.
GRANT = "/api/connectors/{name:str}/grants/{user_id:str}"


@get("/api/connectors/{name:str}/grants", guards=ADMIN, responses=errors(404))
async def list_grants(name: FromPath[str], server: NamedDependency[Server]) -> GrantsOut:
    c = _conn(server)
    await c.store.require(name)
    return GrantsOut(connector=name, users=await c.store.grantees(name))


@put(GRANT, guards=ADMIN, status_code=204, responses=errors(404))
async def grant(
    name: FromPath[str], user_id: FromPath[str], server: NamedDependency[Server]
) -> None:
    await _conn(server).store.grant(name, user_id)


@delete(GRANT, guards=ADMIN, status_code=204, responses=errors(404))
async def revoke(
    name: FromPath[str], user_id: FromPath[str], server: NamedDependency[Server]
) -> None:
    c = _conn(server)
    await server.state(AccountService).get(user_id)  # NotFoundError: "no such user"
    await c.revoke(name, user_id)


ROUTES = [
    group(
        list_mine,
        get_one,
        activate,
        retry,
        deactivate,
        put_secrets,
        sign_out,
        marketplace,
        install,
        update,
        uninstall,
        list_grants,
        grant,
        revoke,
        oauth_start,
        oauth_callback,
        oauth_code,
        login_status,
        device_logout,
        get_prompt,
        read_resource,
        test_item,
        add_item,
        remove_item,
        verify_secrets,
        set_grant_by_default,
        list_providers,
        put_provider,
        remove_provider,
        dependencies={"on": Provide(_on, sync_to_thread=False)},
    )
]
