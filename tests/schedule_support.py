"""Shared by the schedule tests: a server with a `[schedule]` section in config.toml
(the scheduler's own loop ticks once at start, then only when a test calls `tick()`),
a fake clock injected into its scheduler, and models on the fake provider."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

from conftest import TEST_ENV
from fake_llm import FakeLLM

from skald.config import load_config
from skald.core.runtime import Runtime
from skald.features.schedule.clock import FakeClock
from skald.features.schedule.scheduler import Scheduler, scheduler_of
from skald.paths import DataLayout
from skald.plugins.manager import Plugins

SCHEDULE_TOML = "[schedule]\ntick_s = 86400\nmin_interval_s = 60\nmax_failures = 2\nmax_tasks = 1\n"


def write_config(root: Path, extra: str = "") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(SCHEDULE_TOML + extra, encoding="utf-8")


def config_for(root: Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return load_config(
        root,
        {**TEST_ENV, "SKALD_ASSISTANT_TIMEZONE": "Europe/Rome", **(env or {})},
        sections=lambda p: Plugins.load(p.modules).config_sections(),
    )


async def boot(tmp_path: Path) -> AsyncIterator[Runtime]:
    layout = DataLayout(tmp_path / "data")
    write_config(layout.root)
    rt = await Runtime.boot(layout, config_for(layout.root), announce=io.StringIO())
    try:
        yield rt
    finally:
        await rt.shutdown()


def with_clock(rt: Runtime, start: datetime) -> tuple[Scheduler, FakeClock]:
    scheduler = scheduler_of(rt.plugins)
    clock = FakeClock(start)
    scheduler.clock = clock
    return scheduler, clock


async def models(runtime: Runtime, fake: FakeLLM, *names: str) -> None:
    provider = await runtime.llm.add_provider(
        "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
    )
    for priority, name in enumerate(names, 1):
        await runtime.llm.add_model(provider.id, name, name, "average", ["tools"], priority, True)
