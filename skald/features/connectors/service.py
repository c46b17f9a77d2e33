"""The connectors feature's state in a running server: catalogue, installer, feed and
supervisor, and the access rules every route and tool goes through.

Rule: who may use a connector is decided here, once: the role holds `connectors.use`
and either holds `admin.connectors` (administrators hold every connector implicitly) or
has a grant row. Listing, activating, setting secrets, the tools and the prompt block all
ask `usable()`; revoking a grant stops the member's instance before it returns.

Trap: the state is the feature's server state slot (`server.state(Connectors)`, declared
by `skald_server_state`): tests build one server each, so a module-level singleton would
leak between them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import msgspec

from skald.errors import NotFoundError, SkaldError
from skald.features.connectors.store import Connector, ConnectorStore, SecretStore
from skald.permissions import can, declare
from skald.store.rows import Role, User

if TYPE_CHECKING:
    from skald.features.connectors.feed import Feed, Source
    from skald.features.connectors.install import Installer
    from skald.features.connectors.oauth import OAuthFlows
    from skald.features.connectors.own import OwnStore
    from skald.features.connectors.providers import Providers
    from skald.plugins.facade import Server
    from skald.store.database import Database

# Enforced here (`usable`) and by the routes' guards.
CONNECTORS_USE = declare("connectors.use", "Use connectors (MCP servers)")
ADMIN_CONNECTORS = declare("admin.connectors", "Install connectors and plugins")

T = TypeVar("T")

DEFAULT_FEED = Path(__file__).resolve().parent / "default_feed"


class ConnectorsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[connectors]` of config.toml."""

    # A directory or an https base URL; empty: the feed shipped with Skald.
    feed: str = ""
    # More feeds (directories or https base URLs) listed after it, before the
    # household's own items.
    feeds: list[str] = msgspec.field(default_factory=list)
    # Restarts of a dead connector before it is marked failed.
    max_restarts: Annotated[int, msgspec.Meta(ge=0, le=100)] = 5
    # Above this many usable connectors the model first sees a short catalogue and
    # activates a connector's tools when it needs them.
    catalogue_above: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 3
    # A PEM file of extra certificate authorities trusted when connectors' dependencies
    # install inside sandboxes (a network whose proxy inspects TLS); empty: none.
    extra_ca_file: str = ""
    # Run stdio household connectors on the host as Skald's own account (they can then
    # read every file Skald can) instead of each in a container of its own; for hosts
    # without Docker, by an operator's explicit choice.
    household_on_host: bool = False


class Connectors:
    def __init__(self, server: Server, config: ConnectorsConfig) -> None:
        from skald.features.connectors.supervisor import Supervisor

        self.server = server
        self.config = config
        self.store = ConnectorStore(server.db)
        self.root = server.layout.root / "connectors"
        self.supervisor = Supervisor(self)

    # The parts a household without connectors never uses are built (and their modules
    # imported) at first use: docs/dev/connectors.md, "What loads at first use".

    @cached_property
    def installer(self) -> Installer:
        from skald.features.connectors.install import Installer

        return Installer(self.store, self.root)

    @cached_property
    def oauth(self) -> OAuthFlows:
        from skald.features.connectors.oauth import OAuthFlows

        return OAuthFlows()

    @cached_property
    def own(self) -> OwnStore:
        from skald.features.connectors.own import OwnStore

        return OwnStore(self.server.db)

    @cached_property
    def providers(self) -> Providers:
        from skald.features.connectors.providers import Providers

        return Providers(self.server, self.server.db)

    def feed(self) -> Feed:
        from skald.features.connectors.feed import Feed

        feed = Feed(self.config.feed or str(DEFAULT_FEED))
        if not self.config.feed:
            feed.label = "shipped"
        return feed

    def sources(self) -> list[Source]:
        """Every feed, in order: the main one, the configured extra ones, the household's
        own items. A name offered by two of them is installed from the first."""
        from skald.features.connectors.feed import Feed
        from skald.features.connectors.own import OwnFeed

        return [self.feed(), *(Feed(f) for f in self.config.feeds), OwnFeed(self.own)]

    async def read_sources(
        self, read: Callable[[Source], Awaitable[T]]
    ) -> AsyncIterator[tuple[Source, T]]:
        """Each feed (`sources` order) with what `read` got from it. The main feed's error
        is the caller's; an extra feed that cannot be read is passed over (it hides its
        own items, not everyone's)."""
        for n, source in enumerate(self.sources()):
            try:
                got = await read(source)
            except SkaldError:
                if n == 0:
                    raise
                continue
            yield source, got

    async def source_of(self, folder: str) -> Source:
        """The first feed that lists `folder` (an unreadable extra feed is skipped)."""
        async for source, index in self.read_sources(lambda s: s.index()):
            if any(i.folder == folder for i in index.connectors):
                return source
        raise NotFoundError(f"no feed offers a connector {folder!r}")

    @staticmethod
    def secrets(db: Database) -> SecretStore:
        return SecretStore(db)

    async def usable(self, user: User, role: Role) -> list[Connector]:
        """The installed connectors this member may use now (deny by default)."""
        if not user.active or not can(role, CONNECTORS_USE):
            return []
        everything = [c for c in await self.store.all() if c.status == "installed"]
        if can(role, ADMIN_CONNECTORS):
            return everything
        granted = await self.store.grants(user.id)
        return [c for c in everything if c.name in granted]

    async def require_usable(self, user: User, role: Role, name: str) -> Connector:
        found = next((c for c in await self.usable(user, role) if c.name == name), None)
        if found is None:
            # The same answer whether it does not exist or is not theirs.
            raise NotFoundError(f"no connector named {name!r}")
        return found

    async def active(self, user: User, role: Role) -> list[Connector]:
        """The usable connectors the member has switched on."""
        on = await self.store.activations(user.id)
        return [c for c in await self.usable(user, role) if c.name in on]

    async def revoke(self, name: str, user_id: str) -> None:
        """Remove the grant; the member's instance stops before this returns."""
        await self.store.require(name)
        await self.store.revoke(name, user_id)
        if self.supervisor is not None:
            await self.supervisor.stop_member(user_id, name)

    async def deactivate(self, name: str, user_id: str) -> None:
        await self.store.set_active(name, user_id, False)
        if self.supervisor is not None:
            await self.supervisor.stop_member(user_id, name)


def require(server: Server) -> Connectors:
    found = server.state(Connectors, None)
    if found is None:
        raise NotFoundError("connectors are not available in this process")
    return found
