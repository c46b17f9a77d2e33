"""The composition root: config, data layout, registry and user manager, opened together."""

from __future__ import annotations

from dataclasses import dataclass

from skald.config import Config
from skald.core.kdf_pool import KdfPool
from skald.core.keys import PROFILES
from skald.core.users import UserManager
from skald.errors import StorageError
from skald.paths import DataLayout
from skald.permissions import declared
from skald.plugins.manager import Plugins
from skald.store.migrations.owner import OWNER
from skald.store.migrations.registry import REGISTRY
from skald.store.plugins import PluginStore
from skald.store.registry import Registry


@dataclass
class Core:
    config: Config
    layout: DataLayout
    registry: Registry
    users: UserManager
    plugins: Plugins

    @classmethod
    async def open(
        cls,
        layout: DataLayout,
        config: Config,
        *,
        create: bool = False,
        plugins: Plugins | None = None,
    ) -> Core:
        """Open the registry (migrating it, every feature's migrations included). Without
        `create`, a missing one is an error, so a mistyped `--data` never scatters empty
        databases around the disk."""
        plugins = plugins or Plugins.from_config(config, layout.plugins_dir)
        if not create and not layout.system_db.exists():
            raise StorageError(
                f"no Skald data in {layout.root} (run `skald setup` first, or pass --data)"
            )
        layout.ensure()
        registry = await Registry.open(
            layout.system_db,
            config.storage.busy_timeout_ms,
            REGISTRY.with_features(plugins.migrations("registry")),
        )
        users = UserManager(
            registry,
            layout,
            PROFILES[config.security.kdf_profile],
            config.storage.busy_timeout_ms,
            OWNER.with_features(plugins.migrations("owner")),
            kdf_pool=KdfPool(config.security.kdf_workers, config.security.kdf_queue),
            private_places=lambda user_id: plugins.private_places(user_id, layout),
        )
        try:
            # Every capability the code declares (built-ins and plugins'), so roles can
            # hold them; rows are only added or re-described, never deleted.
            plugins.capabilities()
            await registry.sync_capabilities([(c.name, c.description) for c in declared()])
            # A row for every third-party plugin (a new one reaches the auto_grant roles),
            # then the administrator's switches, grants and settings.
            await PluginStore(registry.db).ensure(list(plugins.switches.known))
            await plugins.refresh(registry.db)
        except BaseException:
            await registry.close()
            raise
        return cls(config=config, layout=layout, registry=registry, users=users, plugins=plugins)

    async def close(self) -> None:
        await self.users.lock_all()
        await self.registry.close()
        self.users.kdf_pool.close()
