"""The composition root: config, data layout, registry and user manager, opened together."""

from __future__ import annotations

from dataclasses import dataclass

from skald.config import Config
from skald.core.kdf_pool import KdfPool
from skald.core.keys import PROFILES
from skald.core.users import UserManager
from skald.errors import StorageError
from skald.paths import DataLayout
from skald.store.registry import Registry


@dataclass
class Core:
    config: Config
    layout: DataLayout
    registry: Registry
    users: UserManager

    @classmethod
    async def open(cls, layout: DataLayout, config: Config, *, create: bool = False) -> Core:
        """Open the registry (migrating it). Without `create`, a missing one is an error,
        so a mistyped `--data` never scatters empty databases around the disk."""
        if not create and not layout.system_db.exists():
            raise StorageError(
                f"no Skald data in {layout.root} (run `skald setup` first, or pass --data)"
            )
        layout.ensure()
        registry = await Registry.open(layout.system_db, config.storage.busy_timeout_ms)
        users = UserManager(
            registry,
            layout,
            PROFILES[config.security.kdf_profile],
            config.storage.busy_timeout_ms,
            KdfPool(config.security.kdf_workers, config.security.kdf_queue),
        )
        return cls(config=config, layout=layout, registry=registry, users=users)

    async def close(self) -> None:
        await self.users.lock_all()
        await self.registry.close()
        self.users.kdf_pool.close()
