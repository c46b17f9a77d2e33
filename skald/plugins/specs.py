"""The hooks Skald calls, with their arguments (documented in docs/dev/plugins.md).

Every hook returns a list (or mapping) that Skald merges with the other plugins' answers;
returning nothing (None) is the same as an empty answer. An implementation may take any
subset of the arguments, by name. Hooks about the server get the `Server` facade,
hooks about one member the `Member` facade (skald/plugins/facade.py), never the runtimes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

import msgspec

from skald.plugins import hookimpl, hookspec

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.model_select import Outcome
    from skald.core.services import ServiceSpec
    from skald.core.sessions import Principal
    from skald.features.notifications.channels import NotificationChannel
    from skald.files.changes import FileChange
    from skald.files.mounts import MemberMount
    from skald.llm.types import ToolCall
    from skald.paths import DataLayout
    from skald.permissions import Capability
    from skald.plugins.facade import Member, Server
    from skald.store.conversations import Attachment
    from skald.store.migrations import Feature
    from skald.store.rows import Role, User


@dataclass(frozen=True, kw_only=True)
class ChatCommand:
    """A slash command a feature adds to the chat (`/remind ...`): offered by the
    composer to members holding `capability`, run by the conversation service with no
    model: `run(member, conversation_id, argument)` returns the line the chat shows, or
    raises InvalidInputError with a sentence (and an example) for the member."""

    name: str
    usage: str
    description: str
    capability: Capability | None
    run: Callable[[Member, str, str], Awaitable[str]]


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the web UI and its navigation entry: everything the app needs to show
    it (the app has no table of its own; built-in pages are described here too)."""

    path: str  # the hash route, e.g. "/files"
    title: str  # an i18n key of the navigation entry, e.g. "nav.files"
    capability: str | None = None  # needed to see it; None: every signed-in member
    simple_ok: bool = False  # shown in the simple (children's) shell too
    # The page's ES module, a URL relative to the web root ("plugins/files/files.js",
    # served from the feature's `WebFiles`); None: the page cannot be shown.
    module: str | None = None
    # The module's export that is a Preact component (given the sub-path props); None:
    # the module exports `render(root, ctx)` (the plain-DOM contract, docs/dev/plugins.md).
    component: str | None = None
    order: int = 100  # place in the navigation (ascending; ties keep registration order)
    # The entry's icon: a name of the app's icon set ("folder") or an image URL relative
    # to the web root ("plugins/sample/icon.svg"); None: the generic one.
    icon: str | None = None
    testid: str | None = None  # the entry's data-testid; None: "nav-page-<path as words>"
    flush: bool = False  # fills the main area and scrolls inside it (the chat)
    dock: bool = False  # the chat can be docked beside it on a wide screen
    badge: bool = False  # the entry shows the Inbox's unread count
    # A same-origin API path answering {"count": n}: the entry shows n when it is not 0
    # (read at start, on each route change and on a `skald:counts` window event).
    count: str | None = None
    # Typing its address without the right to see it says "not allowed" (a built-in
    # page) rather than "not found"; `full_only`: the simple shell is sent home instead.
    say_not_allowed: bool = False
    full_only: bool = False
    # `#/<path>/<rest>` shows this page with the prop named here set to `rest`
    # (decoded): "roleName" for `#/admin/roles/<name>`; None: no sub-paths.
    sub: str | None = None


@dataclass(frozen=True, kw_only=True)
class BeforeTurn:
    """A plugin's say before a turn runs (`skald_before_turn`): `system` is added to the
    system prompt of this turn, `append` to the member's message (kept in the history),
    and `block` stops the turn with that reason (the member reads it; no model runs)."""

    system: str = ""
    append: str = ""
    block: str | None = None

    def merge(self, other: BeforeTurn) -> BeforeTurn:
        return BeforeTurn(
            system="\n\n".join(t for t in (self.system, other.system) if t),
            append="\n\n".join(t for t in (self.append, other.append) if t),
            block=self.block if self.block is not None else other.block,
        )


@dataclass(frozen=True, kw_only=True)
class AfterTurn:
    """A plugin's say once a turn answered (`skald_after_turn`): `replace` is the reply
    the member reads instead (kept in the history), `suppress` hides the reply, and
    `attach` adds files to the reply (`Attachment`s: name, agent path, type, size)."""

    replace: str | None = None
    suppress: bool = False
    attach: tuple[Attachment, ...] = ()  # files the member may read (agent paths)

    def merge(self, other: AfterTurn) -> AfterTurn:
        return AfterTurn(
            replace=other.replace if other.replace is not None else self.replace,
            suppress=self.suppress or other.suppress,
            attach=(*self.attach, *other.attach),
        )


class Authenticator(Protocol):
    """A way to sign a request in besides the session cookie: the credentials of an
    `Authorization: <scheme> <credentials>` header become a `Principal`, or the
    authenticator raises the refusal (an `ApiError`: 401, 403, 423, 429). Requests it
    signs in skip the CSRF check (a browser never adds that header on its own)."""

    scheme: str  # lower case, e.g. "bearer"

    async def authenticate(self, credentials: str, method: str, path: str) -> Principal: ...


@dataclass(frozen=True)
class WebFiles:
    """The web files of a feature or plugin: `folder/web/` is served under
    `/plugins/<name>/` (page modules, icons, styles) and `folder/i18n/<locale>.json`
    (flat `"area.key": "text"`, any of en/it/fr) joins the app's translations."""

    name: str  # [a-z0-9_-]+, unique: the URL segment
    folder: Path


def feature_folder(module_file: str, name: str) -> Path:
    """The folder of feature `name` holding `web/` and `i18n/`, from its hooks module's
    `__file__`: the package `features/<name>/` whichever of its modules asks, or, while
    the feature is still a module `features/<name>.py`, the folder of that name beside it."""
    here = Path(module_file).resolve().parent
    return here if here.name == name else here / name


class PageFields(TypedDict, total=False):
    """A built-in page's `Page` fields beyond its path, component and module
    (`FeatureWeb.page`)."""

    title: str
    capability: str | None
    simple_ok: bool
    order: int
    icon: str | None
    testid: str
    flush: bool
    dock: bool
    badge: bool
    count: str | None
    say_not_allowed: bool
    full_only: bool
    sub: str | None


class FeatureWeb:
    """A built-in feature's web part, declared once in its hooks module: the folder beside
    it (`feature_folder`) whose `web/` is served under `/plugins/<name>/` and whose
    `i18n/` joins the catalogue, and its pages, whose modules are in that folder. Every
    built-in answered `skald_web_files` and `skald_pages` alike, so the hooks module binds
    them to this one's (`skald_pages = WEB.skald_pages`); a plugin writes its own."""

    def __init__(self, module_file: str, package: str, name: str | None = None) -> None:
        # `name`: the URL segment, where it is not the package's name (shared-folders).
        self.name = package if name is None else name
        self.folder = feature_folder(module_file, package)
        self.pages: list[Page] = []

    def page(
        self, path: str, component: str, module: str | None = None, **fields: Unpack[PageFields]
    ) -> None:
        """Adds a page. The built-ins' conventions give what is not given: `/admin/users`
        is titled `nav.users`, its module is `admin-users.js` of this folder, its entry's
        test id `nav-admin-users`, and typing its address without the right to see it
        says "not allowed" (docs/dev/plugins.md, "Pages"). `module`: a file of `web/`."""
        slug = path.strip("/").replace("/", "-")
        fields.setdefault("title", "nav." + path.rsplit("/", 1)[-1].replace("-", "_"))
        fields.setdefault("testid", f"nav-{slug}")
        fields.setdefault("say_not_allowed", True)
        file = f"{slug}.js" if module is None else module
        self.pages.append(
            Page(path=path, module=f"plugins/{self.name}/{file}", component=component, **fields)
        )

    @hookimpl
    def skald_pages(self) -> list[Page]:
        return list(self.pages)

    @hookimpl
    def skald_web_files(self) -> list[WebFiles]:
        return [WebFiles(self.name, self.folder)]


@hookspec
def skald_capabilities() -> Iterable[Capability] | None:
    """Capabilities this feature enforces (declared with `permissions.declare`)."""


@hookspec
def skald_config_sections() -> Mapping[str, type[msgspec.Struct]] | None:
    """Config sections this feature owns: `{"name": Struct}` validates `[name]` of
    config.toml (read it back with `Config.section(name, Struct)`)."""


@hookspec
def skald_migrations(schema: str) -> Iterable[Feature] | None:
    """This feature's numbered migrations of `schema` ("registry" or "owner")."""


@hookspec
def skald_routes() -> Iterable[Any] | None:
    """Litestar route handlers (each with its own guards; the API is deny-by-default)."""


@hookspec
def skald_pages() -> Iterable[Page] | None:
    """Web pages and their navigation entries."""


@hookspec
def skald_web_files() -> Iterable[WebFiles] | None:
    """Folders of static web files and translations (`WebFiles`): served under
    `/plugins/<name>/`, their `i18n/<locale>.json` merged into `/i18n/<locale>.json`."""


@hookspec
def skald_mounts(
    user: User, role: Role, layout: DataLayout, server: Server | None
) -> Iterable[MemberMount] | None:
    """Places of this member: agent path prefix, host folder, container path, read-only.

    Synchronous and called at every path a member's router parses: answer from memory
    (`server` is None only where no server runs, e.g. a one-off router in a test)."""


@hookspec
def skald_owned_places(user_id: str, server: Server) -> Iterable[Path] | None:
    """Folders outside the member's home counted against their storage quota (their
    projects, the shared folders they made). Synchronous, called from a thread."""


@hookspec
def skald_private_places(user_id: str, layout: DataLayout) -> Iterable[Path] | None:
    """Folders outside the member's home that are theirs alone (their own skills): removed
    with their account, by descriptor, whether a server runs or not (`skald user delete`).
    Each must lie at least two levels inside the data directory. Synchronous, from a
    thread."""


@hookspec
def skald_tools(member: Member) -> Iterable[Tool] | None:
    """Tools for this member's assistant (the agent's allow-list filters them after)."""


@hookspec
def skald_prompt_blocks(
    member: Member, conversation_id: str | None
) -> Mapping[str, str] | Awaitable[Mapping[str, str]] | None:
    """Values of `{{PLACEHOLDER}}`s in agent prompts for this member (may be awaitable);
    `conversation_id`: the conversation the prompt is for (a project's fills
    PROJECT_CONTEXT), None outside one."""


@hookspec
def skald_placeholders() -> Mapping[str, str] | None:
    """`{"NAME": "what fills it"}`: the `<!-- NAME -->` placeholders this feature fills
    (with `skald_prompt_blocks`). Agents may use only declared names."""


@hookspec
def skald_approval_facts(call: ToolCall, tool: Tool) -> Iterable[str] | None:
    """Categories to add to a call beyond what its tool declares (`Tool.touches`), for
    approval rules to match (`@after_hours`, `@mcp:<server>`)."""


@hookspec
def skald_services(server: Server) -> Iterable[ServiceSpec] | None:
    """Background services of the server (`ServiceSpec`: a name, a coroutine function
    that runs until cancelled, a start order, restart on crash). The service runner
    starts them in order after the built-ins are ready, restarts a crashed one with
    back-off (reported degraded in `/api/health`, `skald status` and `doctor`) and stops
    them in reverse order at shutdown. Called once, at start."""


@hookspec
def skald_notification_channels(server: Server) -> Iterable[NotificationChannel] | None:
    """Ways a member's notifications can arrive besides the web (`NotificationChannel`:
    a `name` members choose, `available(user_id)`, `deliver(delivery)`). Collected once,
    at the first notification; see docs/dev/notifications.md."""


@hookspec
def skald_chat_commands() -> Iterable[ChatCommand] | None:
    """Slash commands beyond the built-in ones (`ChatCommand`); a name of a built-in
    command or of another plugin's is refused at the first use."""


@hookspec
def skald_member_services(member: Member) -> Iterable[ServiceSpec] | None:
    """Background work of one member while their data is unlocked: added to the member's
    own runner when it is built (unlock, or boot for unencrypted members) and stopped,
    with it, when their data is locked or the account is deactivated."""


@hookspec
def skald_turn_starting(member: Member, conversation_id: str) -> Awaitable[None] | None:
    """Called at the start of every turn of the member (any channel: the web, the API,
    a scheduled job, a task), before a model is chosen; may be awaitable. Raise a
    `SkaldError` to refuse the turn: its message is what the member reads (spending
    caps). Keep it cheap: it runs on every turn."""


@hookspec
def skald_request_recorded(
    member: Member, request_id: int, outcome: Outcome
) -> Awaitable[None] | None:
    """After a request of the member's turn to a model is recorded (`llm_requests` row
    `request_id`): `outcome` has what was sent and what came back. May be awaitable; a
    failure is logged, never the turn's. Used by the opt-in request log."""


@hookspec
def skald_files_changed(server: Server, user_id: str, change: FileChange) -> Awaitable[None] | None:
    """After a write of `user_id` through their router (file tools, Files API) changed
    `change.paths` in the place `change.mount`. May be awaitable; a failure is logged,
    never the write's (it has happened). Used by the projects' git history."""


@hookspec
def skald_health_details(server: Server) -> Mapping[str, Any] | None:
    """Figures for administrators in `GET /api/health?details=true` (`admin`, one key
    per feature, e.g. `{"connectors": {...}}`): counts and sizes, never names of files or
    secret values. Called per request; keep it cheap and synchronous."""


@hookspec
def skald_server_state(server: Server) -> Iterable[object] | None:
    """Objects this feature keeps for the server's lifetime (its service, its locks),
    found again by type: `server.state(Scheduler)`. Called once at start, after the
    sandbox manager is built and before the services hook; one object per type."""


@hookspec
def skald_member_state(member: Member) -> Iterable[object] | None:
    """Objects this feature keeps per unlocked member, found again with
    `member.state(Type)`; built when the member's runtime is, dropped when they lock."""


@hookspec
def skald_event_types() -> Iterable[type[msgspec.Struct]] | None:
    """The server events this feature publishes to members' streams (`msgspec.Struct`s
    with a `tag`): the event socket encodes exactly these and the built-in ones."""


# -- system agents (issue 25) ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Suggestion:
    """One change a report proposes to a note (memory upkeep): `note` is the note's path
    as the agent names it (`user-memory/…`, `shared-memory/…`), `text` the suggestion in
    plain words; `old_text` -> `new_text` the edit that applies it (`new_text` "" removes
    the text). Accepting it asks for approval like any write (never written directly)."""

    kind: str  # contradiction | stale | duplicate | broken_link
    note: str
    text: str
    old_text: str
    new_text: str


@dataclass(frozen=True, kw_only=True)
class NewReport:
    """What a system agent hands the reports store (`AgentRun.report`): written once,
    never changed. `audience`: `owner` (the acting member), `admins`, or `supervisors`
    (whoever supervises `subject_id` when the report is read, not when it is written)."""

    title: str
    summary: str
    body: str
    severity: str = "info"  # info | notice | alert
    audience: str = "owner"
    subject_id: str | None = None
    period_start: str | None = None
    period_end: str | None = None
    suggestions: tuple[Suggestion, ...] = ()  # each can be accepted from the Reports page


class AgentRun(Protocol):
    """One run of a system agent for one member, handed to `has_work` and `run`."""

    member: Member  # whose runtime the work runs in (their run log, their gate)
    run_id: str  # "" in `has_work`: no run row exists yet

    async def report(self, report: NewReport) -> str: ...  # the stored report's id


class SystemAgent(Protocol):
    """Work that runs on a member's behalf without being asked (docs/dev/system-agents.md):
    one runner decides who and when; the agent says whether there is work and does it.
    `scope`: `member` (once per unlocked member) or `household` (once, as the first
    active unlocked admin). `interval_s` is the default; admins change it."""

    id: str
    scope: str
    interval_s: int

    async def has_work(self, run: AgentRun) -> bool: ...

    async def run(self, run: AgentRun) -> dict[str, int]: ...  # counters, never content


@hookspec
def skald_system_agents(server: Server) -> Iterable[SystemAgent] | None:
    """The system agents this feature provides; the system-agents feature runs them."""


@hookspec
def skald_before_turn(
    member: Member, conversation_id: str, text: str
) -> BeforeTurn | Awaitable[BeforeTurn] | None:
    """Before a member's turn runs (`text`: their message as typed): add to the system
    prompt, append to the message, or block the turn with a reason (`BeforeTurn`).
    Called for members the plugin reaches; may be `async def`."""


@hookspec
def skald_after_turn(
    member: Member, conversation_id: str, reply: str
) -> AfterTurn | Awaitable[AfterTurn] | None:
    """Once a member's turn answered (`reply`: the final text): replace or suppress the
    reply, or attach files (`AfterTurn`). Not called for failed or stopped turns."""


@hookspec
def skald_member_settings() -> Mapping[str, type[msgspec.Struct]] | None:
    """`{"section": Struct}`: settings each member sets for themselves (an account name,
    a key of their own). Kept in the member's own database, never shown to anyone else;
    read with `await member.settings(section, Struct)`."""


@hookspec
def skald_authenticators(server: Server) -> Iterable[Authenticator] | None:
    """Authenticators for `Authorization` headers (one per scheme), asked by the auth
    middleware at the first request that carries such a header."""
