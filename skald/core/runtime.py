"""The running server's state: the core plus sessions, throttling, event streams and
background services. Built once at boot; the HTTP layer only calls into it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import time
from typing import TextIO

import msgspec

from skald import __version__
from skald.agent.prompts import load_agents, load_operator_agents, unknown_placeholders
from skald.assets import asset_dir
from skald.config import Config
from skald.core.accounts import AccountService
from skald.core.context import Core
from skald.core.conversations import ConversationService
from skald.core.devices import DeviceCookies
from skald.core.events import EventHub, RevokeCode, UserUpdated
from skald.core.instance import Instance
from skald.core.kept_keys import KeptKeys
from skald.core.llm_service import LlmService
from skald.core.sealing import InstanceKey
from skald.core.services import ServiceHealth, ServiceRunner, ServiceSpec
from skald.core.sessions import SessionManager
from skald.core.storage_guard import StorageGuard
from skald.core.throttle import LoginThrottle
from skald.core.user_runtime import UserRuntime
from skald.core.users import UnlockedUser
from skald.errors import DatabaseClosedError, InvalidInputError, NotFoundError
from skald.features.notifications.service import NotificationService
from skald.files.mounts import MemberMount
from skald.files.router import PathRouter
from skald.log import get_logger
from skald.paths import DataLayout
from skald.permissions import can
from skald.plugins.facade import Server
from skald.quota import Budget, StorageAccountant, quota_bytes
from skald.sandbox.execute import probe
from skald.sandbox.manager import SandboxManager, SandboxState, SandboxUnavailable
from skald.sandbox.tool import SANDBOX_EXEC
from skald.store.llm import LlmStore
from skald.store.member_now import MemberNow
from skald.store.rows import Role, User
from skald.store.sessions import SessionStore
from skald.store.shared_memory import SharedMemoryStore

log = get_logger("skald.runtime")


class Runtime:
    def __init__(self, core: Core, listen: tuple[str, int] | None = None) -> None:
        self.core = core
        self.config = core.config
        self.sessions = SessionManager(SessionStore(core.registry.db), core.users, core.config.auth)
        self.accounts = AccountService(core.users, core.registry, self.sessions.store, live=self)
        self.throttle = LoginThrottle(core.config.auth)
        self.devices: DeviceCookies  # its key is in the registry: set by _start
        # Members' event streams: the built-in events and those the features register.
        self.events = EventHub(core.plugins.event_types())
        instance_key = InstanceKey.load_or_create(core.layout.instance_key)
        self.llm = LlmService(LlmStore(core.registry.db), instance_key, core.layout.root)
        # Members who let their assistant work while they are signed out (sealed keys).
        self.kept_keys = KeptKeys(core.layout.root / "kept-keys", instance_key)
        # Every background service of the server; a member's chores run in their own.
        self.services = ServiceRunner("server")
        self.plugins = core.plugins
        self.agents_root = asset_dir("agents")
        self.agents = load_agents(self.agents_root)
        # The operator's own agents (data/agents/), checked the same way; a broken one is
        # left out and logged at start (`_start`), never stopping it.
        added, self.broken_agents = load_operator_agents(
            self.agents_root, core.layout.agents_dir, self.agents
        )
        self.agents = {**self.agents, **added}
        self.shared_memory = SharedMemoryStore(core.registry.db)
        self.storage = StorageAccountant(
            core.layout,
            core.config,
            owned=lambda user_id: self.plugins.owned_places(user_id, self.server),
        )
        self.storage_guard = StorageGuard(self.storage, lambda: self.sandbox)
        self.user_runtimes: dict[str, UserRuntime] = {}
        # What the features see of the server (hooks get it, never this object); the
        # services features run for the server, found by type (`server.state(T)`).
        self.server = Server(
            self,
            self.sessions,
            self.storage_guard,
            self.accounts,
            self.throttle,
            MemberNow(core.registry.db),  # what each turn reads first, kept between turns
        )
        # What every channel (web, /api/chat, later bots and schedules) does with chats.
        self.conversations = ConversationService(
            layout=core.layout,
            registry=core.registry,
            llm=self.llm,
            events=self.events,
            plugins=self.plugins,
            members=self,
        )
        # Tell a member something, from any feature (skald/features/notifications/service.py).
        self.notifications = NotificationService(self.server, self.plugins)
        # The household's name, time zone and language, and the setup wizard's progress.
        self.instance = Instance(core.registry, core.config.assistant.timezone)
        # Built at start (it needs the instance id); None when [sandbox] is disabled.
        self.sandbox: SandboxManager | None = None
        # Set once the web app is built (`skald serve`), or at boot when there is no web
        # server: start-up work that can wait (the first look at Docker) waits for it,
        # so it does not take the one core Python gets from building the app.
        self.app_built = asyncio.Event()
        # Set to stop the web server from inside (a restore asked for on the Backups page).
        self.stop_requested = asyncio.Event()
        self.started_at = time.time()
        self.version = __version__
        self.setup_token: str | None = None
        self.listen = listen or (core.config.server.host, core.config.server.port)

    @classmethod
    async def boot(
        cls,
        layout: DataLayout,
        config: Config,
        announce: TextIO | None = None,
        listen: tuple[str, int] | None = None,
    ) -> Runtime:
        core = await Core.open(layout, config, create=True)
        runtime = cls(core, listen)
        if listen is None:
            runtime.app_built.set()
        try:
            await runtime._start(announce or sys.stderr)
        except BaseException:
            await core.close()
            raise
        return runtime

    async def _start(self, announce: TextIO) -> None:
        # The placeholders the features declare (two declaring one name stops the start);
        # one an agent uses that nobody declares renders empty, so say so once.
        known = self.plugins.placeholders()
        for broken in self.broken_agents:
            log.error("operator agent left out", reason=str(broken))
        for agent in self.agents.values():
            if unknown := unknown_placeholders(agent, self.agents_root, known):
                log.warning("agent uses unknown placeholders", agent=agent.id, names=unknown)
        self.devices = DeviceCookies(await self.sessions.store.device_key())
        self.server._state.put(self.devices)  # the sign-in route's, like the throttle
        await self.instance.load()
        purged = await self.sessions.store.delete_for_encrypted_users()
        unlocked = await self._unlock_unencrypted()
        unlocked += await self._unlock_kept()
        log.info("boot", version=self.version, unlocked_users=unlocked, stale_logins=purged)
        if not await self.core.users.admin_exists():
            self._announce_setup(announce)
        if self.config.sandbox.enabled:
            self.sandbox = SandboxManager(
                self.config.sandbox,
                instance_id=await self.core.registry.instance_id(),
                homes_dir=self.core.layout.homes_dir,
                docs_dir=asset_dir("docs"),
                members=self._sandbox_members,
                mounts=self.mounts_for,
            )
        # Each feature's own objects (`server.state(T)`), then its background work.
        self.server._state.fill(self.plugins.server_state(self.server))
        for spec in self.plugins.services(self.server):
            self.services.add(spec)
        await self.services.start()

    async def _sandbox_members(self) -> list[tuple[User, Role]]:
        out = []
        for user in await self.core.registry.list_users():
            role = await self.core.registry.get_role(user.role)
            if role is not None:
                # Without `sandbox.exec` nothing runs there: reconciliation keeps the
                # container stopped, as for a deactivated member (files stay in the home).
                if not can(role, SANDBOX_EXEC):
                    user = msgspec.structs.replace(user, active=False)
                out.append((user, role))
        return out

    def mounts_for(self, user: User, role: Role) -> list[MemberMount]:
        """The member's mounts, from every feature (the one list router and sandbox use)."""
        return self.plugins.mounts(user, role, self.core.layout, self.server)

    def router_for(self, user: User, role: Role, *, live: bool = False) -> PathRouter:
        """The member's router; `live`: its mounts asked again at every path (a member's
        runtime keeps it for their whole session, so an access change must reach it)."""
        if live:
            return PathRouter(live=lambda: self.mounts_for(user, role))
        return PathRouter(mounts=self.mounts_for(user, role))

    async def member(self, user_id: str) -> tuple[User, Role]:
        """The member's current row and role (read fresh: both may have changed)."""
        user, role = await self.core.registry.user_with_role(user_id)
        if user is None:
            raise NotFoundError("no such user")
        if role is None:
            raise NotFoundError(f"the role {user.role!r} no longer exists")
        return user, role

    async def budget(self, user_id: str, role: Role | None = None) -> Budget:
        """The member's storage budget: their quota from their role as it is now, and a
        usage figure (walked once in a thread if not known yet). `role`: the member's
        role just read by the caller (a turn's setup), so it is not read twice."""
        if role is None:
            _, role = await self.member(user_id)
        await self.storage.usage(user_id)
        return Budget(self.storage, user_id, quota_bytes(role, self.config))

    async def _probe_sandbox(self, user_id: str) -> None:
        """At login: start the member's container and note which commands it has."""
        sandbox = self.sandbox
        if sandbox is None:
            return
        await sandbox.first_look()  # a sign-in right after a start
        if sandbox.state != "ok":
            return
        try:
            user, role = await self.member(user_id)
            if not can(role, SANDBOX_EXEC):
                return
            container_id = await sandbox.ensure(user, role)
            sandbox.commands[user_id] = await probe(sandbox, container_id)
        except Exception as exc:
            log.warning("sandbox probe skipped", user_id=user_id, error=str(exc)[:300])

    async def _unlock_unencrypted(self) -> int:
        # Their data needs no password, and their background work must run after a reboot.
        count = 0
        for user in await self.core.registry.list_users():
            if user.active and not user.encrypted:
                await self.attach(await self.core.users.unlock_unencrypted(user))
                count += 1
        return count

    async def _unlock_kept(self) -> int:
        # Encrypted members who opted in: their sealed key opens their data at boot.
        count = 0
        for user_id in await asyncio.to_thread(self.kept_keys.kept_ids):
            user = await self.core.registry.get_user(user_id)
            if user is None or not user.active or not user.encrypted:
                await asyncio.to_thread(self.kept_keys.forget, user_id)
                continue
            try:
                dek = await asyncio.to_thread(self.kept_keys.open, user_id)
                if dek is not None:
                    await self.attach(await self.core.users.unlock_kept(user, dek))
                    count += 1
            except Exception as exc:
                log.error("a kept key did not open", user_id=user_id, error=str(exc)[:300])
        return count

    async def keep_key(self, user: User) -> None:
        """The member's opt-in: seal their key so their assistant works signed out."""
        if not user.encrypted:
            raise InvalidInputError(
                "your data is not encrypted: your assistant already works while you are signed out"
            )
        async with self.core.users.held(user.id) as held:
            if held is None or held[1] is None:
                raise DatabaseClosedError("your data is locked; sign in again")
            await asyncio.to_thread(self.kept_keys.keep, user.id, held[1])

    async def forget_key(self, user: User) -> None:
        """Revoke the opt-in: the sealed key leaves the disk before this returns."""
        await asyncio.to_thread(self.kept_keys.forget, user.id)
        await self._lock_if_no_sessions(user)

    # -- per-member runtimes ---------------------------------------------------------

    async def attach(self, handle: UnlockedUser) -> UserRuntime:
        """Give an unlocked member their live runtime, and resume what a crash cut short."""
        existing = self.user_runtimes.get(handle.user.id)
        if existing is not None:
            return existing
        role = await self.core.registry.get_role(handle.user.role)
        if role is None:
            raise NotFoundError(f"the role {handle.user.role!r} no longer exists")
        user_id = handle.user.id
        runtime = UserRuntime(
            handle,
            role,
            server=self.server,
            plugins=self.plugins,
            agents_root=self.agents_root,
            rules=self.core.registry.approval_rules,
            router=self.router_for(handle.user, role, live=True),
            budget=lambda role=None, owner=None: (
                self.budget(user_id, role) if owner is None else self.budget(owner)
            ),
        )
        await asyncio.to_thread(runtime.router.ensure_home)
        # The plugins' switches and grants as they are now (a member created since the
        # last read got their grants from the registry's trigger).
        await self.plugins.refresh(self.core.registry.db)
        # Each feature's object for this member (`member.state(T)`), before its services.
        runtime.facade._state.fill(self.plugins.member_state(runtime.facade))
        self.user_runtimes[handle.user.id] = runtime
        runtime.services.add(
            ServiceSpec("sandbox-probe", lambda: self._probe_sandbox(user_id), restart=False)
        )
        # Each feature's work for this member (connectors...), stopped when they lock.
        for spec in self.plugins.member_services(runtime.facade):
            runtime.services.add(spec)
        await runtime.services.start()
        return runtime

    async def user_runtime(self, user: User) -> UserRuntime:
        runtime = self.user_runtimes.get(user.id)
        if runtime is not None:
            return runtime
        handle = self.core.users.handle(user)
        if handle is None:
            raise DatabaseClosedError(f"{user.username}'s data is locked; sign in again")
        return await self.attach(handle)

    async def detach(self, user_id: str) -> None:
        runtime = self.user_runtimes.pop(user_id, None)
        if runtime is not None:
            await runtime.close()

    async def lock(self, user_id: str) -> None:
        await self.detach(user_id)
        await self.core.users.lock(user_id)

    def _announce_setup(self, out: TextIO) -> None:
        self.setup_token = secrets.token_urlsafe(24)
        path = self.core.layout.root / "setup-token"
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out_file:
            out_file.write(self.setup_token + "\n")
        bound, port = self.listen
        host = "localhost" if bound in ("0.0.0.0", "::") else bound  # noqa: S104
        # Deliberately printed outside the redacting logger: showing it is its purpose.
        out.write(
            "skald: no administrator yet. Finish setup in a browser at "
            f"http://{host}:{port}/#/setup?token={self.setup_token} "
            f"(the token is also in {path}), or run `skald setup`.\n"
        )
        out.flush()

    def setup_token_valid(self, token: str) -> bool:
        # Bytes: compare_digest refuses non-ASCII text with an exception, not a False.
        return self.setup_token is not None and secrets.compare_digest(
            token.encode(), self.setup_token.encode()
        )

    def setup_finished(self) -> None:
        self.setup_token = None
        with contextlib.suppress(FileNotFoundError):
            (self.core.layout.root / "setup-token").unlink()

    # -- revocation: synchronous, complete before the caller answers -----------------

    async def log_out(self, user: User, token_hash: str) -> None:
        await self.sessions.revoke(token_hash)
        self.events.revoke_sessions({token_hash}, "signed_out")
        await self._lock_if_no_sessions(user)

    async def log_out_everywhere(
        self, user: User, keep: str | None = None, reason: RevokeCode = "signed_out_everywhere"
    ) -> None:
        removed = await self.sessions.revoke_user(user.id, keep)
        self.events.revoke_sessions(set(removed), reason)
        await self._lock_if_no_sessions(user)

    async def _lock_if_no_sessions(self, user: User) -> None:
        # An encrypted member's key stays in memory only while one of their sessions lives
        # (or while they let their assistant work signed out: a kept key).
        if (
            user.encrypted
            and not self.kept_keys.is_kept(user.id)
            and await self.sessions.store.count_for_user(user.id) == 0
        ):
            await self.lock(user.id)

    async def deactivate(self, user: User) -> User:
        """Sessions, then open streams, then the data key: nothing of theirs outlives this."""
        return await self.accounts.deactivate(user.id)

    async def delete(self, user: User) -> list[str]:
        """Returns what of their home could not be removed (see `UserManager.delete`)."""
        return await self.accounts.delete(user.id)

    # `LiveAccounts` for the account service: what only the running server holds.

    async def account_revoked(self, user: User, code: RevokeCode) -> None:
        await asyncio.to_thread(self.kept_keys.forget, user.id)
        self.events.revoke_user(user.id, code)
        await self.lock(user.id)
        # Their commands stop now; if Docker is down, the next reconciliation does it.
        await self._sandbox_do(user.id, "remove" if code == "deleted" else "stop")
        if code == "deleted":
            self.storage.forget(user.id)

    async def account_activated(self, user: User) -> None:
        # As at boot: an unencrypted member's data and background work need no password.
        if user.active and not user.encrypted:
            await self.attach(await self.core.users.unlock_unencrypted(user))

    async def account_changed(self, user: User, *, role_changed: bool) -> None:
        if role_changed:
            await self.revalidate_groups(user_id=user.id)
        self.user_changed(user.id)

    async def role_changed(self, role: str) -> None:
        await self.revalidate_groups(role=role)

    async def _sandbox_do(self, user_id: str, action: str) -> None:
        if self.sandbox is None:
            return
        try:
            if action == "stop":
                await self.sandbox.stop(user_id)
            else:
                await self.sandbox.remove(user_id)
        except SandboxUnavailable as exc:
            log.warning("sandbox left for the next reconciliation", user_id=user_id, error=str(exc))

    def user_changed(self, user_id: str) -> None:
        self.events.publish(user_id, UserUpdated(user_id=user_id))

    async def revalidate_groups(
        self, *, role: str | None = None, user_id: str | None = None
    ) -> int:
        """A role changed (its groups, or a member's role): conversations whose chosen
        security group is no longer allowed go back to the role's default now, and every
        open tab hears of it. Synchronous on purpose: it narrows what the assistant may
        do. Returns how many conversations changed."""
        changed = 0
        for runtime in list(self.user_runtimes.values()):
            user = await self.core.registry.get_user(runtime.user.id)
            if (
                user is None
                or (role is not None and user.role != role)
                or (user_id is not None and user.id != user_id)
            ):
                continue
            current = await self.core.registry.get_role(user.role)
            if current is None:
                continue
            allowed = {
                *current.attributes.allowed_security_groups,
                current.attributes.default_security_group,
            }
            for conversation in await runtime.hub.store.all():
                if (
                    conversation.security_group is not None
                    and conversation.security_group not in allowed
                ):
                    await runtime.hub.update(conversation.id, security_group=None)
                    changed += 1
        return changed

    # -- health and shutdown ---------------------------------------------------------

    def service_health(self) -> list[ServiceHealth]:
        """The server's services, then each unlocked member's (named `<username>/<name>`)."""
        out = self.services.health()
        for runtime in list(self.user_runtimes.values()):
            out += [
                msgspec.structs.replace(h, name=f"{runtime.user.username}/{h.name}")
                for h in runtime.services.health()
            ]
        return out

    def health(self) -> tuple[str, list[str]]:
        reasons = [h.reason for h in self.service_health() if h.state == "degraded" and h.reason]
        if self.storage.disk_low:
            reasons.append("the disk is nearly full: writes are refused, sandboxes paused")
        if self.sandbox is not None:
            reasons += self.sandbox.health_reasons()
        return ("degraded" if reasons else "ok"), reasons

    @property
    def docker_state(self) -> SandboxState:
        return "disabled" if self.sandbox is None else self.sandbox.state

    async def shutdown(self) -> None:
        self.events.close_all()
        await self.services.stop()
        if self.sandbox is not None:
            await self.sandbox.close()
        for user_id in list(self.user_runtimes):
            await self.detach(user_id)
        await self.llm.close()
        await self.core.close()
        log.info("stopped")
