"""The hooks Skald calls, with their arguments (documented in docs/dev/plugins.md).

Every hook returns a list (or mapping) that Skald merges with the other plugins' answers;
returning nothing (None) is the same as an empty answer. An implementation may take any
subset of the arguments, by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from skald.plugins import hookspec

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.services import ServiceSpec
    from skald.core.user_runtime import UserRuntime
    from skald.features.notifications.channels import NotificationChannel
    from skald.files.mounts import MemberMount
    from skald.llm.types import ToolCall
    from skald.paths import DataLayout
    from skald.permissions import Capability
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
    run: Callable[[UserRuntime, str, str], Awaitable[str]]


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the web UI and its navigation entry."""

    path: str  # the hash route, e.g. "/files"
    title: str  # an i18n key of the navigation entry, e.g. "nav.files"
    capability: str | None = None  # needed to see it; None: every signed-in member
    simple_ok: bool = False  # shown in the simple (children's) shell too
    module: str | None = None  # a plugin page's ES module, a URL relative to the web root
    order: int = 100  # place in the navigation (ascending; ties keep registration order)


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
def skald_mounts(user: User, role: Role, layout: DataLayout) -> Iterable[MemberMount] | None:
    """Places of this member: agent path prefix, host folder, container path, read-only."""


@hookspec
def skald_tools(member: UserRuntime) -> Iterable[Tool] | None:
    """Tools for this member's assistant (the agent's allow-list filters them after)."""


@hookspec
def skald_prompt_blocks(
    member: UserRuntime,
) -> Mapping[str, str] | Awaitable[Mapping[str, str]] | None:
    """Values of `{{PLACEHOLDER}}`s in agent prompts for this member (may be awaitable)."""


@hookspec
def skald_placeholders() -> Mapping[str, str] | None:
    """`{"NAME": "what fills it"}`: the `<!-- NAME -->` placeholders this feature fills
    (with `skald_prompt_blocks`). Agents may use only declared names."""


@hookspec
def skald_approval_facts(call: ToolCall, tool: Tool) -> Iterable[str] | None:
    """Categories to add to a call beyond what its tool declares (`Tool.touches`), for
    approval rules to match (`@after_hours`, `@mcp:<server>`)."""


@hookspec
def skald_services(runtime: Runtime) -> Iterable[ServiceSpec] | None:
    """Background services of the server (`ServiceSpec`: a name, a coroutine function
    that runs until cancelled, a start order, restart on crash). The service runner
    starts them in order after the built-ins are ready, restarts a crashed one with
    back-off (reported degraded in `/api/health`, `skald status` and `doctor`) and stops
    them in reverse order at shutdown. Called once, at start."""


@hookspec
def skald_notification_channels(runtime: Runtime) -> Iterable[NotificationChannel] | None:
    """Ways a member's notifications can arrive besides the web (`NotificationChannel`:
    a `name` members choose, `available(user_id)`, `deliver(delivery)`). Collected once,
    at the first notification; see docs/dev/notifications.md."""


@hookspec
def skald_chat_commands() -> Iterable[ChatCommand] | None:
    """Slash commands beyond the built-in ones (`ChatCommand`); a name of a built-in
    command or of another plugin's is refused at the first use."""


@hookspec
def skald_member_services(member: UserRuntime) -> Iterable[ServiceSpec] | None:
    """Background work of one member while their data is unlocked: added to the member's
    own runner when it is built (unlock, or boot for unencrypted members) and stopped,
    with it, when their data is locked or the account is deactivated."""


@hookspec
def skald_health_details(runtime: Runtime) -> Mapping[str, Any] | None:
    """Figures for administrators in `GET /api/health?details=true` (`admin`, one key
    per feature, e.g. `{"connectors": {...}}`): counts and sizes, never names of files or
    secret values. Called per request; keep it cheap and synchronous."""
