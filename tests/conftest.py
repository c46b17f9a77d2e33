"""Shared fixtures: a data directory, the registry and a user manager on the light KDF."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skald.core.keys import TEST_KDF
from skald.core.users import UserManager
from skald.paths import DataLayout
from skald.store.registry import Registry

# The memory-hard default KDF would make every test take a second; the CLI and server
# read this variable through the config loader, like any other setting.
os.environ.setdefault("SKALD_SECURITY_KDF_PROFILE", "test")


@pytest.fixture
def layout(tmp_path: Path) -> DataLayout:
    return DataLayout(tmp_path / "data").ensure()


@pytest.fixture
async def registry(layout: DataLayout) -> AsyncIterator[Registry]:
    reg = await Registry.open(layout.system_db)
    yield reg
    await reg.close()


@pytest.fixture
async def users(registry: Registry, layout: DataLayout) -> AsyncIterator[UserManager]:
    manager = UserManager(registry, layout, TEST_KDF)
    yield manager
    await manager.lock_all()
