"""The one way to run background work: named services under a `ServiceRunner`.

A service is a coroutine function (`ServiceSpec.run`). The runner starts services in
ascending `order` and stops them in descending order; a service with `restart=True` that
crashes (or returns) is logged and started again after a back-off that doubles up to
`max_backoff_s`; one with `restart=False` is a chore: it runs once and is forgotten when
it ends (a crash is logged, never raised). `health()` says, per service, `ok`,
`degraded` (with the reason: it crashed and has not yet run `settle_s` without crashing
again) or `stopped`; `/api/health`, `skald status` and `skald doctor` show it.

Rules: never `asyncio.create_task` background work anywhere else (a task nobody holds
is neither cancelled at shutdown nor reported when it dies); a member's chores go to
their own runner (`UserRuntime.services`), stopped when their data is locked. Tasks
that belong to one object and die with it are not services: the chat hub's consumer
per conversation (`ChatHub.close`) and a WebSocket's pumps.

A service that knows its own failures (a connector instance: issue 21, "one background
mechanism") tells the runner three things: `Restart(reason)` (an expected failure it
already reported: restarted after the back-off, logged without a traceback), `GiveUp(reason)`
(not restarted; health says `stopped` with the reason, not degraded) and `ready(name)`
(it reached its working state: the back-off starts afresh and it is healthy at once).
`remove(name)` stops one service and forgets it (revocation, a retry, an update).

Trap: `stop()` cancels, it does not ask. A service must treat `CancelledError` as "the
server stops now": clean up in `finally` and let the cancellation through. One that
swallows it is abandoned after `stop_timeout_s` (logged) so shutdown still finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal

import msgspec

from skald.log import get_logger

__all__ = ["GiveUp", "Restart", "ServiceHealth", "ServiceRunner", "ServiceSpec", "ServiceState"]

log = get_logger("skald.services")

ServiceState = Literal["ok", "degraded", "stopped"]


class Restart(Exception):
    """An expected failure the service reported itself: restart it after the back-off."""


class GiveUp(Exception):
    """The service must not run again (it failed too often, or was refused)."""


@dataclass(frozen=True)
class ServiceSpec:
    """What to run: `run` is called afresh at every (re)start."""

    name: str
    run: Callable[[], Awaitable[None]]
    order: int = 100
    restart: bool = True


class ServiceHealth(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    state: ServiceState
    reason: str | None = None
    restarts: int = 0


@dataclass(eq=False)
class _Service:
    spec: ServiceSpec
    task: asyncio.Task[None] | None = None
    running: bool = False
    restarts: int = 0
    last_error: str | None = None
    # monotonic time of the last crash; cleared once a run has lasted settle_s.
    crashed_at: float | None = None
    started_at: float = 0.0
    gave_up: str | None = None  # why it ended for good (GiveUp)
    fresh: bool = False  # `ready` since the last crash: the back-off starts afresh


@dataclass(eq=False)
class ServiceRunner:
    name: str = "server"
    _: KW_ONLY
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    settle_s: float = 30.0
    stop_timeout_s: float = 5.0
    # the back-off wait (a test records the delays through it)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _services: dict[str, _Service] = field(init=False, default_factory=dict)
    _started: bool = field(init=False, default=False)
    _stopping: bool = field(init=False, default=False)

    def add(self, spec: ServiceSpec) -> None:
        """Register a service; once the runner has started, it starts at once. While
        `stop()` runs, nothing is added (logged, not raised: a chore asked for by an event
        that races the shutdown must not fail its caller)."""
        if self._stopping:
            # Shutdown or a lock is under way: what is added now would be cancelled anyway.
            log.info("service not started: stopping", runner=self.name, service=spec.name)
            return
        if spec.name in self._services:
            raise ValueError(f"{self.name}: a service named {spec.name!r} already exists")
        service = self._services[spec.name] = _Service(spec)
        if self._started:
            self._launch(service)

    def __contains__(self, name: object) -> bool:
        return name in self._services

    async def start(self) -> None:
        """Start every registered service, in ascending order."""
        self._started = True
        for service in sorted(self._services.values(), key=lambda s: s.spec.order):
            if service.task is None:
                self._launch(service)
                # Let it take its first step before the next one starts (order means order).
                await asyncio.sleep(0)

    def _launch(self, service: _Service) -> None:
        service.task = asyncio.get_running_loop().create_task(
            self._keep(service), name=f"svc-{self.name}-{service.spec.name}"
        )

    async def _keep(self, service: _Service) -> None:
        spec = service.spec
        backoff = self.initial_backoff_s
        try:
            while True:
                service.started_at = time.monotonic()
                service.running = True
                try:
                    await spec.run()
                    if not spec.restart:
                        return
                    log.warning("service returned; restarting", service=spec.name)
                    service.last_error = "it returned"
                except asyncio.CancelledError:
                    raise
                except GiveUp as exc:
                    service.gave_up = str(exc) or "it gave up"
                    service.crashed_at = None
                    log.warning("service gave up", service=spec.name, runner=self.name)
                    return
                except Restart as exc:
                    service.last_error = str(exc) or "it ended"
                except Exception as exc:
                    service.last_error = f"{type(exc).__name__}: {exc}"
                    log.error(
                        "service crashed" + ("; restarting" if spec.restart else ""),
                        service=spec.name,
                        runner=self.name,
                        error=service.last_error,
                        exc_info=True,
                    )
                    if not spec.restart:
                        return
                service.running = False
                service.restarts += 1
                # A service that ran for a while (or said it was ready) before failing
                # starts its back-off afresh.
                if service.fresh or time.monotonic() - service.started_at > self.max_backoff_s:
                    backoff = self.initial_backoff_s
                service.fresh = False
                service.crashed_at = time.monotonic()
                await self.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
        finally:
            service.running = False
            if not spec.restart and self._services.get(spec.name) is service:
                del self._services[spec.name]

    def ready(self, name: str) -> None:
        """The service reached its working state: healthy now, and a later failure's
        back-off starts from the beginning."""
        service = self._services.get(name)
        if service is not None:
            service.crashed_at = None
            service.fresh = True

    async def remove(self, name: str) -> None:
        """Stop one service (cancelled, awaited up to `stop_timeout_s`) and forget it."""
        service = self._services.pop(name, None)
        task = service.task if service is not None else None
        if task is None or task.done():
            return
        task.cancel()
        _, pending = await asyncio.wait([task], timeout=self.stop_timeout_s)
        if pending:
            log.error("service did not stop; abandoned", task=task.get_name())
        elif not task.cancelled():
            with contextlib.suppress(Exception):
                task.result()

    def health(self) -> list[ServiceHealth]:
        now = time.monotonic()
        out = []
        for s in self._services.values():
            if s.crashed_at is not None and s.running and now - s.started_at >= self.settle_s:
                s.crashed_at = None  # ran long enough since the last crash: healthy again
            if s.crashed_at is not None:
                when = "restarting" if not s.running else "restarted"
                reason = f"background service {s.spec.name} is {when} after: {s.last_error}"
                out.append(
                    ServiceHealth(
                        name=s.spec.name, state="degraded", reason=reason, restarts=s.restarts
                    )
                )
            else:
                state: ServiceState = "ok" if s.running else "stopped"
                out.append(
                    ServiceHealth(
                        name=s.spec.name, state=state, reason=s.gave_up, restarts=s.restarts
                    )
                )
        return out

    def degraded_reasons(self) -> list[str]:
        return [h.reason for h in self.health() if h.state == "degraded" and h.reason]

    async def stop(self) -> None:
        """Cancel every service, highest order first, and wait for each to end."""
        self._stopping = True
        names = [s.spec.name for s in self._services.values() if s.task is not None]
        try:
            by_order: dict[int, list[_Service]] = {}
            for service in self._services.values():
                by_order.setdefault(service.spec.order, []).append(service)
            for order in sorted(by_order, reverse=True):
                tasks = [s.task for s in by_order[order] if s.task is not None]
                for task in tasks:
                    task.cancel()
                if not tasks:
                    continue
                _, pending = await asyncio.wait(tasks, timeout=self.stop_timeout_s)
                for task in pending:
                    log.error("service did not stop; abandoned", task=task.get_name())
                for task in tasks:
                    if task.done() and not task.cancelled():
                        with contextlib.suppress(Exception):
                            task.result()
            for service in self._services.values():
                service.task = None
                service.running = False
                service.crashed_at = None  # stopped on purpose: not degraded any more
            if names:
                log.info("services stopped", runner=self.name, services=names)
        finally:
            self._stopping = False
            self._started = False
