"""What a feature may use: `Server` (the household) and `Member` (one unlocked member).

Rule: hooks receive these two, never the runtime objects behind them; every public
attribute is documented in docs/dev/plugins.md (tests/test_facade.py fails on one that
is not). A feature's own long-lived object is a *state slot*: declared once through
`skald_server_state(server)` (or `skald_member_state(member)`, per unlocked member) and
found again by its type, `server.state(Scheduler)`; a feature that needs another's
service asks by type the same way. No module-level registry keeps them.

Trap: the live runtimes behind the facades (`_live`) are no part of the contract. No
feature, built-in or plugin, touches them (tests/test_facade.py walks every feature
module); a facade lacking what a feature needs grows a documented, narrow attribute.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import msgspec

from skald.errors import ConfigError
from skald.permissions import Capability, can
from skald.store.plugins import member_settings
from skald.store.rows import effective_locale
from skald.store.snapshot import HeldCopy, KeyChecks

if TYPE_CHECKING:
    import asyncio
    from zoneinfo import ZoneInfo

    from skald.agent import ApprovalGate, ChildAgent, ToolContext
    from skald.agent.prompts import AgentDef
    from skald.agent.tools import Tool
    from skald.config import Config
    from skald.core.conversations import ConversationService
    from skald.core.events import EventHub, RevokeCode
    from skald.core.hub import ChatHub
    from skald.core.instance import Instance
    from skald.core.llm_service import LlmService
    from skald.core.runtime import Runtime
    from skald.core.services import ServiceHealth, ServiceRunner
    from skald.core.unattended import Unattended
    from skald.core.user_runtime import UserRuntime
    from skald.features.notifications.service import NotificationService
    from skald.files.changes import FileChange
    from skald.files.mounts import MemberMount
    from skald.files.router import PathRouter
    from skald.paths import DataLayout
    from skald.plugins.manager import Plugins
    from skald.plugins.specs import SystemAgent
    from skald.quota import Budget, BudgetSource, StorageAccountant
    from skald.sandbox.manager import SandboxManager, SandboxState
    from skald.store.database import Database
    from skald.store.inbox import InboxItem
    from skald.store.rows import Role, User
    from skald.store.shared_memory import SharedMemoryStore

__all__ = ["Member", "Server", "StateSlots"]

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)


class _Required(enum.Enum):
    REQUIRED = enum.auto()


_REQUIRED = _Required.REQUIRED  # `state(T)` without a default: absent is an error


class StateSlots:
    """Objects kept for a lifetime (the server's, or a member's unlock), one per type."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._by_type: dict[type, object] = {}

    def put(self, obj: object) -> None:
        kind = type(obj)
        if kind in self._by_type:
            raise ConfigError(f"two features keep a {kind.__name__} in the {self._owner} state")
        self._by_type[kind] = obj

    def fill(self, objects: Iterable[object]) -> None:
        for obj in objects:
            self.put(obj)

    def get(self, kind: type[T]) -> T:
        found = self._by_type.get(kind)
        if found is None:
            raise LookupError(f"no feature keeps a {kind.__name__} in the {self._owner} state")
        return found  # type: ignore[return-value]  # put() keys each object by its type

    def find(self, kind: type[T]) -> T | None:
        return self._by_type.get(kind)  # type: ignore[return-value]


class _Facade:
    """What both facades share: their state slots (filled by `Runtime`), found by type."""

    def __init__(self, owner: str) -> None:
        self._state = StateSlots(owner)

    @overload
    def state(self, kind: type[T]) -> T: ...
    @overload
    def state(self, kind: type[T], default: None) -> T | None: ...
    def state(self, kind: type[T], default: _Required | None = _REQUIRED) -> T | None:
        return self._state.get(kind) if default is _REQUIRED else self._state.find(kind)


class Server(_Facade):
    """The household as a feature sees it: built once by `Runtime`, handed to hooks."""

    def __init__(self, live: Runtime, *kept: object) -> None:
        super().__init__("server")
        self._live = live
        self._state.fill(kept)  # the core's own services a feature runs (sessions...)

    # -- configuration and storage ------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._live.config

    def section(self, name: str, struct: type[S]) -> S:
        # A plugin's settings saved on the Plugins page win over config.toml's table.
        saved = self._live.plugins.switches.section_values(name)
        if saved is not None:
            try:
                return msgspec.convert(saved, type=struct)
            except msgspec.ValidationError:
                pass  # saved for an older release of the plugin: config.toml's then
        return self._live.config.section(name, struct)

    @property
    def plugins(self) -> Plugins:
        return self._live.plugins

    @property
    def layout(self) -> DataLayout:
        return self._live.core.layout

    @property
    def db(self) -> Database:
        return self._live.core.registry.db

    @property
    def shared_memory(self) -> SharedMemoryStore:
        return self._live.shared_memory

    @property
    def instance(self) -> Instance:
        return self._live.instance

    @property
    def storage(self) -> StorageAccountant:
        return self._live.storage

    async def budget(self, user_id: str) -> Budget:
        """A member's storage budget (their role's quota now, their usage), signed in
        or not."""
        return await self._live.budget(user_id)

    def router(self, user: User, role: Role) -> PathRouter:
        """A path router over the member's mounts as they are now (no unlock needed)."""
        return self._live.router_for(user, role)

    # -- members and permissions --------------------------------------------------------

    def member(self, user_id: str) -> Member | None:
        live = self._live.user_runtimes.get(user_id)
        return None if live is None else live.facade

    def unlocked(self) -> list[Member]:
        return [live.facade for live in list(self._live.user_runtimes.values())]

    async def fetch(self, user_id: str) -> tuple[User, Role]:
        return await self._live.member(user_id)

    async def open_member(self, user: User) -> Member:
        return (await self._live.user_runtime(user)).facade

    def is_unlocked(self, user_id: str) -> bool:
        """Whether the member's data is unlocked now (their key in memory), whether or
        not their runtime is built yet (`member(user_id)` answers only once it is).

        Trap: true now, maybe not after the next await (a lock, a sign-out); to read
        their database, hold it with `held_database`."""
        return self._live.core.users.is_unlocked(user_id)

    async def unlock(self, username: str, password: str) -> User:
        """Check a member's password and unlock their data: their `Member` is attached
        (`member(user_id)` answers) when this returns. Returns their row as the check
        read it; `AuthenticationError` for a wrong name or password.

        Trap: the costly half of a sign-in (a key derivation on the shared pool) with
        neither throttle nor session: the caller runs it inside the `LoginThrottle`'s
        attempt and then creates the session (`SessionManager`). Their data key stays in
        the core."""
        handle = await self._live.core.users.unlock(username, password)
        await self._live.attach(handle)
        return handle.user

    async def sign_out(self, user: User, token_hash: str) -> None:
        """End one session (`token_hash`): its row is deleted and its open tabs told;
        an encrypted member's data locks once no session of theirs is left (unless
        they keep their key for their assistant).

        Trap: their `Member` may be gone when this returns: read nothing of theirs
        after it."""
        await self._live.log_out(user, token_hash)

    async def sign_out_everywhere(
        self, user: User, *, keep: str | None = None, reason: RevokeCode = "signed_out_everywhere"
    ) -> None:
        """End every session of the member but `keep` (a token hash), telling their tabs
        `reason`; their data locks as with `sign_out`.

        Trap: as `sign_out`; and without `keep` the caller's own session ends too."""
        await self._live.log_out_everywhere(user, keep, reason)

    def setup_token_valid(self, token: str) -> bool:
        """Whether `token` is the first-run setup token this server printed at start
        (compared in constant time); False once setup is finished.

        Trap: the token itself is never readable here (only the operator sees it); a
        wrong one is a guess: the caller counts it against the sign-in throttle."""
        return self._live.setup_token_valid(token)

    def setup_finished(self) -> None:
        """Close the browser's setup door for this server's life: the token is
        forgotten and its file removed (nothing when there is none).

        Trap: only once an administrator exists; nothing opens the door again but a
        restart with no administrator."""
        if self._live.setup_token is not None:
            self._live.setup_finished()

    @contextlib.asynccontextmanager
    async def held_database(self, user_id: str) -> AsyncIterator[Database | None]:
        """The member's open database, held still for the block: nobody unlocks or
        locks them until it ends. None when they are locked (their file is then
        quiescent: a copy of its bytes is a consistent one).

        Trap: their sign-in, lock and sign-out wait for the block: keep it to one short
        job (a check, a copy), and never keep the database past it."""
        async with self._live.core.users.held(user_id) as held:
            yield None if held is None else held[0]

    @contextlib.asynccontextmanager
    async def held_for_backup(self, user_id: str) -> AsyncIterator[HeldCopy | None]:
        """As `held_database`, for a backup: its `snapshot(dest)` writes a consistent copy
        keyed with the member's own key (an encrypted member's stays encrypted). None
        when they are locked: copy the quiescent file's bytes inside the block.

        Trap: their key never leaves the core; a copy of an encrypted member's open
        database made any other way comes out in clear text."""
        async with self._live.core.users.held(user_id) as held:
            yield None if held is None else HeldCopy(*held)

    async def key_checks(self, user_ids: list[str]) -> KeyChecks:
        """For the restore drill: integrity checks of copies, opened with the keys of
        those of `user_ids` unlocked now (`check` answers None for the others).

        Trap: the keys stay inside; a check tells whether a copy opens and is whole,
        never what it holds."""
        keys: dict[str, bytes | None] = {}
        for user_id in user_ids:
            async with self._live.core.users.held(user_id) as held:
                keys[user_id] = None if held is None else held[1]
        return KeyChecks(keys)

    @staticmethod
    def can(role: Role, capability: Capability) -> bool:
        return can(role, capability)

    # -- services -----------------------------------------------------------------------

    @property
    def conversations(self) -> ConversationService:
        return self._live.conversations

    @property
    def notifications(self) -> NotificationService:
        return self._live.notifications

    @property
    def services(self) -> ServiceRunner:
        return self._live.services

    @property
    def events(self) -> EventHub:
        return self._live.events

    @property
    def sandbox(self) -> SandboxManager | None:
        return self._live.sandbox

    def remount(self, user_ids: Iterable[str]) -> None:
        """These members' places changed (a shared folder, a project): each one's sandbox
        is made again with the new mounts, in the background (`SandboxManager.refresh`:
        the change answers at once; the remake waits for a command running there)."""
        sandbox = self._live.sandbox
        if sandbox is not None:
            for user_id in user_ids:
                sandbox.refresh(user_id, self.fetch)

    @property
    def llm(self) -> LlmService:
        return self._live.llm

    @property
    def agents(self) -> dict[str, AgentDef]:
        return self._live.agents

    @property
    def app_built(self) -> asyncio.Event:
        return self._live.app_built

    def request_stop(self) -> None:
        """Stop the server as SIGTERM would (the service manager starts it again): a
        restore waiting for the next start uses it."""
        self._live.stop_requested.set()

    # -- health -------------------------------------------------------------------------

    @property
    def started_at(self) -> float:
        return self._live.started_at

    def service_health(self) -> list[ServiceHealth]:
        """The server's background services, then each unlocked member's (named
        `<username>/<name>`), as `skald status` lists them."""
        return self._live.service_health()

    def health(self) -> tuple[str, list[str]]:
        """ "ok" or "degraded", with the reasons (services, disk, sandbox)."""
        return self._live.health()

    @property
    def docker_state(self) -> SandboxState:
        return self._live.docker_state

    def system_agents(self) -> list[SystemAgent]:
        return self._live.plugins.system_agents(self)

    async def files_changed(self, user_id: str, change: FileChange) -> None:
        """Tell every feature that `user_id`'s write changed files (`skald_files_changed`);
        the file tools and the Files API call it after each write."""
        await self._live.plugins.files_changed(self, user_id, change)

    def works_signed_out(self, user_id: str) -> bool:
        return self._live.kept_keys.is_kept(user_id)

    async def set_works_signed_out(self, user: User, enabled: bool) -> None:
        """The member's choice "let my assistant work while I'm signed out": on, their
        data key is sealed on disk under the instance key (their assistant and jobs go
        on signed out, and after a restart); off, the sealed key leaves the disk before
        this returns, and their data locks if no session of theirs is left.

        Trap: on refuses an unencrypted member (`InvalidInputError`: theirs already
        works) and a locked one (`DatabaseClosedError`); the key itself never leaves
        the core. `works_signed_out` reads a file: call it in a thread."""
        if enabled:
            await self._live.keep_key(user)
        else:
            await self._live.forget_key(user)


class Member(_Facade):
    """One unlocked member as a feature sees it: built with their live runtime, lives
    until their data is locked."""

    def __init__(self, live: UserRuntime, server: Server) -> None:
        super().__init__(f"member {live.user.username}")
        self._live = live
        self.server = server

    # -- who ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._live.user.id

    @property
    def user(self) -> User:
        return self._live.user

    @property
    def role(self) -> Role:
        return self._live.role

    def can(self, capability: Capability) -> bool:
        return can(self._live.role, capability)

    async def fetch(self) -> tuple[User, Role]:
        return await self._live.fetch_member()

    @property
    def locale(self) -> str:
        """The member's language: their own, else the household's now."""
        instance = self._live.instance
        return effective_locale(
            self._live.user.locale, instance.current.language if instance else None
        )

    def timezone(self) -> ZoneInfo:
        return self._live.timezone()

    # -- their data ---------------------------------------------------------------------

    @property
    def db(self) -> Database:
        return self._live.handle.db

    @property
    def router(self) -> PathRouter:
        return self._live.router

    @property
    def mounts(self) -> list[MemberMount]:
        return list(self._live.router.member_mounts)

    @property
    def budget(self) -> BudgetSource | None:
        return self._live.budget

    @property
    def conversations(self) -> ChatHub:
        return self._live.hub

    @property
    def services(self) -> ServiceRunner:
        return self._live.services

    @property
    def unattended_gate(self) -> ApprovalGate:
        """The member's gate for work nobody watches: the member's rules decide, and a
        call that would ask a person is refused at once (`core/unattended.py`)."""
        return self._live.unattended_gate

    @property
    def unattended(self) -> Unattended:
        """The member's conversations nobody watches now (a job's run, a background
        task): work that runs there adds its conversation with a pacer (and an `Asking`
        to wait in the Inbox), and discards it when it ends (`core/unattended.py`)."""
        return self._live.unattended

    async def inbox_item(self, call_id: str) -> InboxItem | None:
        """The Inbox item of `call_id` while it is open, else None: background work
        taking back a wait after a restart reads its tool there."""
        return await self._live.inbox.get(call_id)

    async def inbox_status(self, call_id: str) -> str | None:
        """How `call_id`'s Inbox item stands (pending, approved, rejected, settled...),
        None when there is none: a decision given while nobody waited is applied."""
        return await self._live.inbox.status(call_id)

    async def expire(self, call_id: str, reason: str) -> None:
        """Reject the pending call `call_id` because nobody answered in time, with
        `reason`: the one decision path (gate, Inbox row, the waiting work's `Asking`).

        Trap: no person decided: only background work's deadline calls it; a person's
        answer goes through `server.conversations.decide`. NotFoundError when nothing
        waits under that id."""
        await self._live.decide(call_id, False, reason=reason)

    @property
    def agents(self) -> dict[str, AgentDef]:
        return self._live.agents

    @property
    def sandbox(self) -> SandboxManager | None:
        return self._live.sandbox

    async def inbox(self) -> list[InboxItem]:
        """What waits for this member in their Inbox, oldest first: approval requests and
        questions whose call is still open (a settled call's item is never listed).

        Trap: read-only on purpose. A decision goes through
        `server.conversations.decide(...)` and an answer through the ask tool
        (`member.state(AskUserTool).answer`): they resume the waiting turn and tell the
        member's tabs; closing the row alone would leave the turn waiting forever."""
        return await self._live.inbox.pending()

    async def settings(self, section: str, struct: type[S]) -> S:
        """The member's own values of a plugin's member settings section (its struct's
        defaults when they saved none, or saved values it no longer accepts)."""
        saved = await member_settings(self.db, section)
        try:
            return msgspec.convert(saved or {}, type=struct)
        except msgspec.ValidationError:
            return msgspec.convert({}, type=struct)

    def tool_named(self, name: str) -> Tool | None:
        """One of the member's tools by name, as their default chat agent is offered it
        (the agent's allow-list applied), or None: what a dry run of the approval rules
        reads the call's facts from.

        Trap: the tool itself, not a call through the gate: running it here would skip
        the member's approval rules; read its spec, kind and facts only."""
        return self._live.tool_named(name)

    async def helper(self, agent_id: str | None, ctx: ToolContext) -> ChildAgent | None:
        return await self._live.child(agent_id, ctx)


# What `Plugins` hands to the member hooks: the facade, also when a caller below the
# facade passes the live runtime (`member.plugins.prompt_blocks(member)` in tests).
def as_member(member: Member | Any) -> Member:
    return member if isinstance(member, Member) else member.facade
