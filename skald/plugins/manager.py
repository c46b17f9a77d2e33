"""Loading plugins and collecting what their hooks answer.

`Plugins.load(modules)` registers the built-in features (`BUILTINS`, in this order),
then every installed package's `skald` entry points, then the modules named in
`[plugins] modules`. The collecting methods call one hook each and merge the answers in
registration order (built-ins first), checking what can be checked up front.

Traps:
- A module listed twice, or both by entry point and by name, is registered once.
- A plugin that fails to import stops the server with a `ConfigError` naming it: a
  half-loaded feature set (tools without their migrations) is worse than not starting.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec
import pluggy

from skald.agent.prompts import PLACEHOLDER_NAME
from skald.config import Config
from skald.errors import ConfigError
from skald.log import get_logger
from skald.plugins import PROJECT, specs
from skald.plugins.facade import as_member
from skald.plugins.specs import ChatCommand, Page, WebFiles

log = get_logger("skald.plugins")

if TYPE_CHECKING:
    from pathlib import Path

    from skald.agent.tools import Tool
    from skald.core.services import ServiceSpec
    from skald.features.notifications.channels import NotificationChannel
    from skald.files.changes import FileChange
    from skald.files.mounts import MemberMount
    from skald.llm.types import ToolCall
    from skald.paths import DataLayout
    from skald.permissions import Capability
    from skald.plugins.facade import Member, Server
    from skald.plugins.specs import SystemAgent
    from skald.store.migrations import Feature
    from skald.store.rows import Role, User

__all__ = ["BUILTINS", "Plugins"]

T = TypeVar("T")

# The built-in features, each a plugin like any other. Order matters where answers are
# concatenated (the model sees tools in this order; the prompt cache keys on it).
BUILTINS: Final = (
    "skald.features.accounts.hooks",
    "skald.features.files.hooks",
    "skald.features.memory.hooks",
    "skald.features.helpers.hooks",
    "skald.features.ask.hooks",
    "skald.features.sandbox.hooks",
    "skald.features.chat.hooks",
    "skald.features.models.hooks",
    "skald.features.approvals.hooks",
    "skald.features.inbox.hooks",
    "skald.features.ops.hooks",
    "skald.features.notifications.hooks",
    "skald.features.schedule.hooks",
    "skald.features.connectors.hooks",
    "skald.features.setup.hooks",
    "skald.features.backups.hooks",
    "skald.features.agents.hooks",
    "skald.features.people.hooks",
    "skald.features.usage.hooks",
    "skald.features.requestlog.hooks",
    "skald.features.privacy.hooks",
    "skald.features.telegram.hooks",
    "skald.features.system_agents.hooks",
    "skald.features.review.hooks",
    "skald.features.shared_folders.hooks",
    "skald.features.projects.hooks",
    "skald.features.skills.hooks",
    "skald.features.signposts.hooks",
)


class Plugins:
    """One loaded set of plugins (built-ins included) and the collected hook answers."""

    def __init__(self, pm: pluggy.PluginManager, config: Config | None = None) -> None:
        self.pm = pm
        # The whole configuration, plugins' sections included (`config.section(...)`).
        self.config = config if config is not None else Config()

    @classmethod
    def from_config(cls, config: Config) -> Plugins:
        """The built-ins, the installed plugins and those `[plugins] modules` names."""
        return cls.load(config.plugins.modules, config=config)

    @classmethod
    def load(
        cls, modules: Sequence[str] = (), *, entry_points: bool = True, config: Config | None = None
    ) -> Plugins:
        pm = pluggy.PluginManager(PROJECT)
        pm.add_hookspecs(specs)
        for name in BUILTINS:
            pm.register(importlib.import_module(name), name)
        if entry_points:
            try:
                pm.load_setuptools_entrypoints(PROJECT)
            except Exception as exc:
                raise ConfigError(f"a plugin installed as a package failed to load: {exc}") from exc
        for name in modules:
            if pm.has_plugin(name):
                continue
            try:
                module = importlib.import_module(name)
            except Exception as exc:
                raise ConfigError(f"plugins.modules: cannot load plugin {name!r}: {exc}") from None
            if pm.is_registered(module):
                continue
            pm.register(module, name)
        pm.check_pending()  # an implementation of a hook that does not exist is a typo
        return cls(pm, config)

    @classmethod
    def builtin(cls) -> Plugins:
        """The built-in features alone (tests, tools that need no plugins)."""
        return cls.load((), entry_points=False)

    def names(self) -> list[str]:
        return [name for name, _ in self.pm.list_name_plugin() if name is not None]

    def plugin_modules(self) -> list[ModuleType]:
        return [p for p in self.pm.get_plugins() if isinstance(p, ModuleType)]

    # -- collecting --------------------------------------------------------------------

    @staticmethod
    def _in_order(answers: list[T | None]) -> list[T]:
        # pluggy answers last-registered first; features expect registration order.
        return [a for a in reversed(answers) if a is not None]

    def _concat(self, answers: list[Iterable[T] | None]) -> list[T]:
        return [item for answer in self._in_order(answers) for item in answer]

    def capabilities(self) -> list[Capability]:
        from skald.permissions import declare

        out = []
        for cap in self._concat(self.pm.hook.skald_capabilities()):
            out.append(declare(cap.name, cap.description, reserved_for=cap.reserved_for))
        return out

    def config_sections(self) -> dict[str, type[msgspec.Struct]]:
        sections: dict[str, type[msgspec.Struct]] = {}
        for answer in self._in_order(self.pm.hook.skald_config_sections()):
            for name, struct in answer.items():
                if name in sections and sections[name] is not struct:
                    raise ConfigError(f"two plugins declare the config section [{name}]")
                sections[name] = struct
        return sections

    def migrations(self, schema: str) -> list[Feature]:
        return self._concat(self.pm.hook.skald_migrations(schema=schema))

    def routes(self) -> list[Any]:
        return self._concat(self.pm.hook.skald_routes())

    def pages(self) -> list[Page]:
        # The navigation's order: by `order`, then registration (sorted() is stable).
        return sorted(self._concat(self.pm.hook.skald_pages()), key=lambda p: p.order)

    def web_files(self) -> list[WebFiles]:
        """Every feature's and plugin's web folder, in registration order (names checked)."""
        from skald.plugins.web import check_names

        return check_names(self._concat(self.pm.hook.skald_web_files()))

    def mounts(
        self, user: User, role: Role, layout: DataLayout, server: Server | None = None
    ) -> list[MemberMount]:
        from skald.files.mounts import check_mounts

        found = self._concat(
            self.pm.hook.skald_mounts(user=user, role=role, layout=layout, server=server)
        )
        try:
            return check_mounts(found)
        except ValueError as exc:
            raise ConfigError(f"the mounts of {user.username} are unusable: {exc}") from None

    def owned_places(self, user_id: str, server: Server) -> list[Path]:
        return self._concat(self.pm.hook.skald_owned_places(user_id=user_id, server=server))

    def tools(self, member: Member | Any) -> list[Tool]:
        return self._concat(self.pm.hook.skald_tools(member=as_member(member)))

    def placeholders(self) -> dict[str, str]:
        """Every placeholder an agent may use, with what fills it (the known set)."""
        known: dict[str, str] = {}
        for answer in self._in_order(self.pm.hook.skald_placeholders()):
            for name, description in answer.items():
                if not PLACEHOLDER_NAME.fullmatch(name):
                    raise ConfigError(f"{name!r} is not a placeholder name (A-Z, 0-9 and _)")
                if name in known:
                    raise ConfigError(f"two plugins declare the placeholder {name}")
                known[name] = description
        return known

    async def prompt_blocks(
        self, member: Member | Any, conversation_id: str | None = None
    ) -> dict[str, str]:
        values: dict[str, str] = {}
        hook = self.pm.hook.skald_prompt_blocks
        for answer in self._in_order(
            hook(member=as_member(member), conversation_id=conversation_id)
        ):
            block: Mapping[str, str] = await answer if inspect.isawaitable(answer) else answer
            values.update(block)
        return values

    def services(self, server: Server) -> list[ServiceSpec]:
        return self._concat(self.pm.hook.skald_services(server=server))

    def server_state(self, server: Server) -> list[object]:
        return self._concat(self.pm.hook.skald_server_state(server=server))

    def member_state(self, member: Member) -> list[object]:
        return self._concat(self.pm.hook.skald_member_state(member=member))

    def event_types(self) -> list[type[msgspec.Struct]]:
        return self._concat(self.pm.hook.skald_event_types())

    def chat_commands(self) -> list[ChatCommand]:
        return self._concat(self.pm.hook.skald_chat_commands())

    def member_services(self, member: Member) -> list[ServiceSpec]:
        return self._concat(self.pm.hook.skald_member_services(member=member))

    def approval_facts(self, call: ToolCall, tool: Tool) -> frozenset[str]:
        return frozenset(self._concat(self.pm.hook.skald_approval_facts(call=call, tool=tool)))

    def notification_channels(self, server: Server) -> list[NotificationChannel]:
        return self._concat(self.pm.hook.skald_notification_channels(server=server))

    async def turn_starting(self, member: Member | Any, conversation_id: str) -> None:
        hook = self.pm.hook.skald_turn_starting
        for answer in self._in_order(
            hook(member=as_member(member), conversation_id=conversation_id)
        ):
            if inspect.isawaitable(answer):
                await answer

    async def request_recorded(self, member: Member | Any, request_id: int, outcome: Any) -> None:
        hook = self.pm.hook.skald_request_recorded
        for answer in self._in_order(
            hook(member=as_member(member), request_id=request_id, outcome=outcome)
        ):
            if inspect.isawaitable(answer):
                await answer

    async def files_changed(self, server: Server, user_id: str, change: FileChange) -> None:
        # The write happened: a listener that fails cannot undo it, nor fail the writer.
        try:
            answers = self._in_order(
                self.pm.hook.skald_files_changed(server=server, user_id=user_id, change=change)
            )
        except Exception:
            log.exception("a files_changed listener failed")
            return
        for answer in answers:
            if inspect.isawaitable(answer):
                try:
                    await answer
                except Exception:
                    log.exception("a files_changed listener failed")

    def health_details(self, server: Server) -> dict[str, Any]:
        details: dict[str, Any] = {}
        for answer in self._in_order(self.pm.hook.skald_health_details(server=server)):
            details.update(answer)
        return details

    def system_agents(self, server: Server) -> list[SystemAgent]:
        return self._concat(self.pm.hook.skald_system_agents(server=server))
