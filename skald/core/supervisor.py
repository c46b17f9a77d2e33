"""Background services under one supervisor: a crash is logged and the service restarted
with back-off, instead of taking the whole server down with it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import msgspec

from skald.log import get_logger

log = get_logger("skald.supervisor")

ServiceFactory = Callable[[], Awaitable[None]]


class ServiceState(msgspec.Struct, kw_only=True):
    name: str
    running: bool = False
    restarts: int = 0
    last_error: str | None = None
    last_error_at: float | None = None


class Supervisor:
    def __init__(self, initial_backoff_s: float = 1.0, max_backoff_s: float = 60.0) -> None:
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.states: dict[str, ServiceState] = {}

    def start(self, name: str, factory: ServiceFactory) -> None:
        if name in self._tasks:
            raise ValueError(f"service {name} already started")
        self.states[name] = ServiceState(name=name)
        self._tasks[name] = asyncio.create_task(
            self._keep_running(name, factory), name=f"svc-{name}"
        )

    async def _keep_running(self, name: str, factory: ServiceFactory) -> None:
        state = self.states[name]
        backoff = self.initial_backoff_s
        while True:
            started = time.monotonic()
            state.running = True
            try:
                await factory()
                log.warning("service returned; restarting", service=name)
            except asyncio.CancelledError:
                state.running = False
                raise
            except Exception as exc:
                state.last_error = f"{type(exc).__name__}: {exc}"
                state.last_error_at = time.time()
                log.error(
                    "service crashed; restarting",
                    service=name,
                    error=state.last_error,
                    exc_info=True,
                )
            state.running = False
            state.restarts += 1
            # A service that ran for a while before failing starts its back-off afresh.
            if time.monotonic() - started > self.max_backoff_s:
                backoff = self.initial_backoff_s
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    def degraded_reasons(self) -> list[str]:
        return [
            f"background service {s.name} is restarting after: {s.last_error}"
            for s in self.states.values()
            if not s.running and s.last_error
        ]

    async def stop_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
