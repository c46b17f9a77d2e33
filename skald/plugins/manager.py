"""Loading plugins and collecting what their hooks answer.

`Plugins.load(modules)` registers the built-in features (`BUILTINS`, in this order),
then every installed package's `skald` entry points, then the modules named in
`[plugins] modules`. The collecting methods call one hook each and merge the answers in
registration order (built-ins first), checking what can be checked up front.

Rule: a plugin that is not built in (installed from a wheel into the data folder's
`plugins/<id>/`, an installed package's entry point, or a `[plugins] modules` name) is
recorded in `switches` (skald/plugins/switches.py). One that fails to import is marked
failed there, with its error, and nothing of it is registered (no migrations, no
tools): the server starts without it. At run time each hook implementation of such a
plugin is called on its own: one that raises is skipped and logged once, and a plugin
switched off, or not granted to the member, is not called at all.

Traps:
- A module listed twice, or both by entry point and by name, is registered once.
- Built-in features are not isolated: their failure is Skald's bug and surfaces.
- A wheel's folder goes at the END of `sys.path`: a plugin never shadows Skald's own
  modules or the installed packages (a bundled dependency only fills a gap).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, TypeVar

import msgspec
import pluggy

from skald.agent.prompts import PLACEHOLDER_NAME
from skald.config import Config
from skald.errors import ConfigError
from skald.log import get_logger
from skald.permissions import can
from skald.plugins import PROJECT, specs
from skald.plugins.facade import as_member
from skald.plugins.specs import (
    AfterTurn,
    Authenticator,
    BeforeTurn,
    ChatCommand,
    Page,
    WebFiles,
)
from skald.plugins.switches import PLUGIN_MANAGE, Loaded, Source, Switches

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
    from skald.store.database import Database
    from skald.store.migrations import Feature
    from skald.store.rows import Role, User

__all__ = ["BUILTINS", "Plugins"]


class _Mergeable(Protocol):
    def merge(self, other: Self) -> Self: ...


_M = TypeVar("_M", bound=_Mergeable)  # BeforeTurn, AfterTurn

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
    "skald.features.plugins.hooks",
    "skald.features.tokens.hooks",
)


class Plugins:
    """One loaded set of plugins (built-ins included) and the collected hook answers."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        config: Config | None = None,
        switches: Switches | None = None,
    ) -> None:
        self.pm = pm
        # The whole configuration, plugins' sections included (`config.section(...)`).
        self.config = config if config is not None else Config()
        # The third-party plugins: loaded or failed, switched on or off, granted to whom.
        self.switches = switches if switches is not None else Switches()
        # Each member's last mount answers and their checked list (see `mounts`).
        self._checked: dict[str, tuple[list[MemberMount], list[MemberMount]]] = {}

    @classmethod
    def from_config(cls, config: Config, plugins_dir: Path | None = None) -> Plugins:
        """The built-ins, the installed plugins (packages, and wheels unpacked in
        `plugins_dir`) and those `[plugins] modules` names."""
        return cls.load(config.plugins.modules, config=config, plugins_dir=plugins_dir)

    @classmethod
    def load(
        cls,
        modules: Sequence[str] = (),
        *,
        entry_points: bool = True,
        config: Config | None = None,
        plugins_dir: Path | None = None,
    ) -> Plugins:
        pm = pluggy.PluginManager(PROJECT)
        pm.add_hookspecs(specs)
        for name in BUILTINS:
            pm.register(importlib.import_module(name), name)
        switches = Switches()
        found: list[tuple[str, str, Source, str | None]] = []  # id, module, source, version
        if plugins_dir is not None:
            found += _wheels(plugins_dir)
        if entry_points:
            for ep in importlib.metadata.entry_points(group=PROJECT):
                version = ep.dist.version if ep.dist is not None else None
                found.append((ep.name, ep.value, "package", version))
        found += [(name, name, "config", None) for name in modules]
        for pid, module_name, source, version in found:
            if pid in switches.known or pm.has_plugin(pid):
                continue
            loaded = Loaded(id=pid, source=source, module=module_name, version=version)
            try:
                if not module_name:
                    raise ImportError(f"the wheel has no `skald` entry point named {pid!r}")
                module = importlib.import_module(module_name)
                if pm.is_registered(module):
                    continue
                pm.register(module, pid)
            except Exception as exc:
                # A broken plugin is shown to administrators as failed; the rest serves.
                error = f"{type(exc).__name__}: {exc}"
                loaded = Loaded(
                    id=pid, source=source, module=module_name, version=version, error=error
                )
                _log_failed(pid, error)
            switches.add(loaded)
        try:
            pm.check_pending()  # an implementation of a hook that does not exist is a typo
        except pluggy.PluginValidationError as exc:
            raise ConfigError(f"a plugin implements a hook that does not exist: {exc}") from None
        return cls(pm, config, switches)

    @classmethod
    def builtin(cls) -> Plugins:
        """The built-in features alone (tests, tools that need no plugins)."""
        return cls.load((), entry_points=False)

    def names(self) -> list[str]:
        return [name for name, _ in self.pm.list_name_plugin() if name is not None]

    def plugin_modules(self) -> list[ModuleType]:
        return [p for p in self.pm.get_plugins() if isinstance(p, ModuleType)]

    # -- collecting --------------------------------------------------------------------

    def _call(
        self, hook: str, *, gated: bool = False, member: Member | None = None, **kwargs: Any
    ) -> list[tuple[str, Any]]:
        """Every implementation's answer, as (plugin name, answer), in registration
        order. A third-party plugin's implementation runs on its own: one that raises
        is skipped (`switches.hook_failed`); `gated`: one switched off is not called,
        and with a `member`, one not granted to them neither."""
        args = dict(kwargs)
        manager = False
        if member is not None:
            args["member"] = member
            manager = can(member.role, PLUGIN_MANAGE)
        out: list[tuple[str, Any]] = []
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            pid = impl.plugin_name
            third = pid in self.switches.known
            if third and gated:
                ok = (
                    self.switches.reaches(pid, member.id, manager)
                    if member is not None
                    else self.switches.on(pid)
                )
                if not ok:
                    continue
            if not third:
                answer = impl.function(*[args[a] for a in impl.argnames])
            else:
                try:
                    answer = impl.function(*[args[a] for a in impl.argnames])
                except Exception as exc:
                    self.switches.hook_failed(pid, hook, exc)
                    continue
            if answer is not None:
                out.append((pid, answer))
        return out

    def _answers(self, hook: str, **kwargs: Any) -> list[Any]:
        return [answer for _, answer in self._call(hook, **kwargs)]

    def _concat(self, hook: str, **kwargs: Any) -> list[Any]:
        return [item for answer in self._answers(hook, **kwargs) for item in answer]

    async def refresh(self, db: Database) -> None:
        """Read the administrator's switches again (each turn, and at start)."""
        from skald.store.plugins import PluginStore

        self.switches.apply(await PluginStore(db).snapshot())

    def third_party(self, pid: str) -> bool:
        return pid in self.switches.known

    def capabilities(self) -> list[Capability]:
        from skald.permissions import declare

        out = []
        for cap in self._concat("skald_capabilities"):
            out.append(declare(cap.name, cap.description, reserved_for=cap.reserved_for))
        return out

    def config_sections(self) -> dict[str, type[msgspec.Struct]]:
        sections: dict[str, type[msgspec.Struct]] = {}
        for answer in self._answers("skald_config_sections"):
            for name, struct in answer.items():
                if name in sections and sections[name] is not struct:
                    raise ConfigError(f"two plugins declare the config section [{name}]")
                sections[name] = struct
        return sections

    def sections_of(self, pid: str) -> dict[str, type[msgspec.Struct]]:
        """The config sections one plugin declares: its instance settings."""
        return self._merged_of(pid, "skald_config_sections")

    def member_sections_of(self, pid: str) -> dict[str, type[msgspec.Struct]]:
        """The member settings sections one plugin declares (`skald_member_settings`)."""
        return self._merged_of(pid, "skald_member_settings")

    def _merged_of(self, pid: str, hook: str) -> dict[str, type[msgspec.Struct]]:
        """The sections plugin `pid` answers `hook` with (its implementations' merged)."""
        out: dict[str, type[msgspec.Struct]] = {}
        for name, answer in self._call(hook):
            if name == pid:
                out.update(answer)
        return out

    def section_owner(self, section: str) -> str | None:
        """The third-party plugin that declares config section `section`, if any."""
        for name, answer in self._call("skald_config_sections"):
            if section in answer and self.third_party(name):
                return name
        return None

    def migrations(self, schema: str) -> list[Feature]:
        return self._concat("skald_migrations", schema=schema)

    def routes(self) -> list[Any]:
        """The built-in features' routes (a plugin's are `plugin_routes`)."""
        return [
            item
            for pid, answer in self._call("skald_routes")
            if not self.third_party(pid)
            for item in answer
        ]

    def plugin_routes(self) -> dict[str, tuple[str, list[Any]]]:
        """Each third-party plugin: (path prefix, its routes), mounted by the app behind
        the plugin's gate. A wheel's routes live under `/api/plugin/<id>`; a plugin
        named in config.toml or by an installed package keeps the paths it declares."""
        out: dict[str, tuple[str, list[Any]]] = {}
        for pid, answer in self._call("skald_routes"):
            if self.third_party(pid):
                prefix = f"/api/plugin/{pid}" if self._wheel(pid) else "/"
                out.setdefault(pid, (prefix, []))[1].extend(answer)
        return out

    def _wheel(self, pid: str) -> bool:
        found = self.switches.known.get(pid)
        return found is not None and found.source == "wheel"

    def pages(self, user_id: str | None = None, role: Role | None = None) -> list[Page]:
        """Every page; with `user_id` and `role`: without the pages of plugins switched
        off or not granted to that member (read per request by `GET /api/pages`)."""
        found = []
        manager = role is not None and can(role, PLUGIN_MANAGE)
        for pid, answer in self._call("skald_pages"):
            hidden = user_id is not None and not self.switches.reaches(pid, user_id, manager)
            if not (hidden and self.third_party(pid)):
                found.extend(answer)
        # The navigation's order: by `order`, then registration (sorted() is stable).
        return sorted(found, key=lambda p: p.order)

    def web_files(self) -> list[WebFiles]:
        """Every feature's and plugin's web folder, in registration order (names checked)."""
        from skald.plugins.web import check_names

        return check_names(self._concat("skald_web_files"))

    def mounts(
        self, user: User, role: Role, layout: DataLayout, server: Server | None = None
    ) -> list[MemberMount]:
        from skald.files.mounts import check_mounts

        found = self._concat("skald_mounts", user=user, role=role, layout=layout, server=server)
        # The check is pure: the same answers get the same verdict (a turn's tools and
        # every path a tool resolves ask, and the answers rarely change).
        kept = self._checked.get(user.id)
        if kept is not None and kept[0] == found:
            return list(kept[1])
        try:
            checked = check_mounts(found)
        except ValueError as exc:
            raise ConfigError(f"the mounts of {user.username} are unusable: {exc}") from None
        self._checked[user.id] = (found, checked)
        return list(checked)

    def owned_places(self, user_id: str, server: Server) -> list[Path]:
        return self._concat("skald_owned_places", user_id=user_id, server=server)

    def private_places(self, user_id: str, layout: DataLayout) -> list[Path]:
        """What `skald_private_places` names, each checked to lie two levels or more
        inside the data directory (a plugin's slip must not remove the household's)."""
        root = layout.root.resolve()
        out = []
        for place in self._concat("skald_private_places", user_id=user_id, layout=layout):
            resolved = Path(place).resolve()
            if not resolved.is_relative_to(root) or len(resolved.relative_to(root).parts) < 2:
                raise ConfigError(f"{place} is not a member's own place inside {root}")
            out.append(resolved)
        return out

    def tools(self, member: Member | Any) -> list[Tool]:
        return self._concat("skald_tools", gated=True, member=as_member(member))

    def placeholders(self) -> dict[str, str]:
        """Every placeholder an agent may use, with what fills it (the known set)."""
        known: dict[str, str] = {}
        for answer in self._answers("skald_placeholders"):
            for name, description in answer.items():
                if not PLACEHOLDER_NAME.fullmatch(name):
                    raise ConfigError(f"{name!r} is not a placeholder name (A-Z, 0-9 and _)")
                if name in known:
                    raise ConfigError(f"two plugins declare the placeholder {name}")
                known[name] = description
        return known

    async def _awaited(self, hook: str, **kwargs: Any) -> list[Any]:
        """`_call`'s answers, each awaited when it is awaitable; one a third-party plugin's
        coroutine raises is skipped (`switches.hook_failed`), a built-in's error raises."""
        calls = self._call(hook, **kwargs)
        out: list[Any] = []
        started = 0
        try:
            for pid, answer in calls:
                started += 1
                try:
                    out.append(await answer if inspect.isawaitable(answer) else answer)
                except Exception as exc:
                    if not self.third_party(pid):
                        raise
                    self.switches.hook_failed(pid, hook, exc)
        finally:
            # Trap: every implementation was called (its coroutine made) before the first
            # is awaited; when one raises (or the turn is cancelled), close the rest.
            for _, left in calls[started:]:
                if inspect.iscoroutine(left):
                    left.close()
        return out

    async def prompt_blocks(
        self, member: Member | Any, conversation_id: str | None = None
    ) -> dict[str, str]:
        values: dict[str, str] = {}
        blocks: list[Mapping[str, str]] = await self._awaited(
            "skald_prompt_blocks",
            gated=True,
            member=as_member(member),
            conversation_id=conversation_id,
        )
        for block in blocks:
            values.update(block)
        return values

    async def before_turn(self, member: Member, conversation_id: str, text: str) -> BeforeTurn:
        """What the plugins do before a turn runs, merged: system prompt additions and
        message additions in registration order, the first block wins."""
        return await self._merged(
            BeforeTurn(), "skald_before_turn", member, conversation_id=conversation_id, text=text
        )

    async def after_turn(self, member: Member, conversation_id: str, reply: str) -> AfterTurn:
        """What the plugins do with a finished turn's reply: the last replacement (or
        suppression) wins, attachments add up."""
        return await self._merged(
            AfterTurn(), "skald_after_turn", member, conversation_id=conversation_id, reply=reply
        )

    async def _merged(self, merged: _M, hook: str, member: Member, **kwargs: Any) -> _M:
        """A member hook's answers folded into `merged` in registration order (each
        answer type's `merge` says who wins)."""
        for got in await self._awaited(hook, gated=True, member=member, **kwargs):
            merged = merged.merge(got)
        return merged

    def services(self, server: Server) -> list[ServiceSpec]:
        """The services: a third-party plugin's runs only while it is switched on."""
        from skald.plugins.gating import gated_service

        out = []
        for pid, answer in self._call("skald_services", server=server):
            for spec in answer:
                out.append(
                    gated_service(spec, pid, self.switches) if self.third_party(pid) else spec
                )
        return out

    def server_state(self, server: Server) -> list[object]:
        return self._concat("skald_server_state", server=server)

    def member_state(self, member: Member) -> list[object]:
        return self._concat("skald_member_state", member=member)

    def event_types(self) -> list[type[msgspec.Struct]]:
        return self._concat("skald_event_types")

    def chat_commands(self) -> list[ChatCommand]:
        return self._concat("skald_chat_commands", gated=True)

    def member_services(self, member: Member) -> list[ServiceSpec]:
        return self._concat("skald_member_services", gated=True, member=member)

    def approval_facts(self, call: ToolCall, tool: Tool) -> frozenset[str]:
        return frozenset(self._concat("skald_approval_facts", gated=True, call=call, tool=tool))

    def notification_channels(self, server: Server) -> list[NotificationChannel]:
        """The channels: a third-party plugin's is unavailable while it is switched off."""
        from skald.plugins.gating import GatedChannel

        out: list[NotificationChannel] = []
        for pid, answer in self._call("skald_notification_channels", server=server):
            for channel in answer:
                out.append(
                    GatedChannel(channel, pid, self.switches) if self.third_party(pid) else channel
                )
        return out

    async def turn_starting(self, member: Member | Any, conversation_id: str) -> None:
        for answer in self._answers(
            "skald_turn_starting", member=as_member(member), conversation_id=conversation_id
        ):
            if inspect.isawaitable(answer):
                await answer

    async def request_recorded(self, member: Member | Any, request_id: int, outcome: Any) -> None:
        for answer in self._answers(
            "skald_request_recorded",
            member=as_member(member),
            request_id=request_id,
            outcome=outcome,
        ):
            if inspect.isawaitable(answer):
                await answer

    def authenticators(self, server: Server) -> dict[str, Authenticator]:
        """Every authenticator by its scheme; a scheme claimed twice stops the start."""
        out: dict[str, Authenticator] = {}
        for auth in self._concat("skald_authenticators", server=server):
            if auth.scheme in out:
                raise ConfigError(f"two plugins authenticate {auth.scheme!r} requests")
            out[auth.scheme] = auth
        return out

    async def files_changed(self, server: Server, user_id: str, change: FileChange) -> None:
        # The write happened: a listener that fails cannot undo it, nor fail the writer.
        try:
            answers = self._answers(
                "skald_files_changed", server=server, user_id=user_id, change=change
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
        for answer in self._answers("skald_health_details", gated=True, server=server):
            details.update(answer)
        return details

    def system_agents(self, server: Server) -> list[SystemAgent]:
        return self._concat("skald_system_agents", server=server)


def _log_failed(pid: str, error: str) -> None:
    from skald.log import get_logger

    get_logger("skald.plugins").error(
        "a plugin failed to load; the server goes on without it", plugin=pid, error=error
    )


def _wheels(plugins_dir: Path) -> list[tuple[str, str, Source, str | None]]:
    """The plugins unpacked in `plugins_dir/<id>/`: each folder joins the END of
    `sys.path` and its `skald` entry point (named `<id>`) is the module to load."""
    found: list[tuple[str, str, Source, str | None]] = []
    if not plugins_dir.is_dir():
        return found
    for folder in sorted(plugins_dir.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        entry = None
        version = None
        for dist in importlib.metadata.distributions(path=[str(folder)]):
            for ep in dist.entry_points.select(group=PROJECT):
                if ep.name == folder.name:
                    entry, version = ep.value, dist.version
        if entry is None:
            found.append((folder.name, "", "wheel", None))  # fails to load, said so
            continue
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
        found.append((folder.name, entry, "wheel", version))
    return found
