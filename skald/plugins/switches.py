"""Which third-party plugins are loaded, failed, on, and whom they reach.

Rule: the loader records every plugin that is not built in (`Loaded`: its id, where it
came from, the error when it failed to import); the administrator's switches (on/off,
grants, settings) come from the registry as a `Snapshot` and are applied here, read by
every collecting method of `Plugins` on each call: a plugin switched off, failed, or not
granted to the member gives nothing at the next turn. Built-in features are never here.

Trap: the snapshot is a copy: the routes that change a switch apply it here too, in
the same request, so the very next turn sees it; the per-turn refresh picks up rows
written elsewhere (a member created by the CLI gets their grants by a trigger).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from skald.log import get_logger
from skald.permissions import declare
from skald.store.plugins import Snapshot

log = get_logger("skald.plugins")

Source = Literal["wheel", "package", "config"]
# Install, switch and configure plugins; its holders reach every plugin without a grant.
# Enforced by the Plugins page's routes (skald/features/plugins/routes.py), the
# `/api/plugin/<id>/` gate and the per-member filter of `Plugins`.
PLUGIN_MANAGE = declare("plugin.manage", "Install, switch and configure plugins")


@dataclass(frozen=True)
class Loaded:
    """A third-party plugin as the loader found it."""

    id: str
    source: Source
    module: str
    version: str | None = None
    error: str | None = None  # it failed to load: nothing of it runs


class Switches:
    def __init__(self) -> None:
        self.known: dict[str, Loaded] = {}
        self._snap = Snapshot(off=frozenset(), grants={}, settings={})
        self._runtime_errors: dict[str, str] = {}  # plugin id -> the last hook failure
        self._logged: set[tuple[str, str]] = set()  # (plugin id, failure) already logged
        self._changed: asyncio.Event | None = None

    # -- what the loader found --------------------------------------------------------

    def add(self, loaded: Loaded) -> None:
        self.known[loaded.id] = loaded

    def failed(self, pid: str) -> str | None:
        found = self.known.get(pid)
        return None if found is None else found.error

    # -- the administrator's switches -------------------------------------------------

    def apply(self, snapshot: Snapshot) -> None:
        self._snap = snapshot
        self._wake()

    def set_enabled(self, pid: str, enabled: bool) -> None:
        off = set(self._snap.off)
        (off.discard if enabled else off.add)(pid)
        self._snap = Snapshot(
            off=frozenset(off), grants=self._snap.grants, settings=self._snap.settings
        )
        self._wake()

    def set_grant(self, pid: str, user_id: str, granted: bool) -> None:
        holders = set(self._snap.grants.get(pid, frozenset()))
        (holders.add if granted else holders.discard)(user_id)
        grants = {**self._snap.grants, pid: frozenset(holders)}
        self._snap = Snapshot(off=self._snap.off, grants=grants, settings=self._snap.settings)

    def set_settings(self, pid: str, values: dict[str, Any]) -> None:
        settings = {**self._snap.settings, pid: values}
        self._snap = Snapshot(off=self._snap.off, grants=self._snap.grants, settings=settings)

    def settings(self, pid: str) -> dict[str, Any]:
        return self._snap.settings.get(pid, {})

    def section_values(self, section: str) -> dict[str, Any] | None:
        """The values an administrator saved for config section `section`, if any."""
        for values in self._snap.settings.values():
            found = values.get(section)
            if isinstance(found, dict):
                return found
        return None

    def enabled(self, pid: str) -> bool:
        """Switched on: its registry row exists (written at start for every plugin
        loaded; a purge deletes it) and says so."""
        return pid in self._snap.settings and pid not in self._snap.off

    def on(self, pid: str) -> bool:
        """Loaded, not failed, and switched on: its hooks are called."""
        found = self.known.get(pid)
        return found is not None and found.error is None and self.enabled(pid)

    def reaches(self, pid: str, user_id: str, manager: bool) -> bool:
        """The plugin is on and this member may use it (a grant, or `plugin.manage`)."""
        return self.on(pid) and (manager or user_id in self._snap.grants.get(pid, frozenset()))

    def granted(self, pid: str) -> frozenset[str]:
        return self._snap.grants.get(pid, frozenset())

    # -- failures at run time ---------------------------------------------------------

    def hook_failed(self, pid: str, hook: str, exc: BaseException) -> None:
        """A hook of the plugin raised: its answer is skipped; logged once per plugin
        and hook (a hook called every turn would flood the journal)."""
        why = f"{hook}: {type(exc).__name__}: {exc}"
        if (pid, why) not in self._logged:
            self._logged.add((pid, why))
            log.warning("a plugin's hook failed; it is skipped", plugin=pid, error=why)
        self._runtime_errors[pid] = why

    def runtime_error(self, pid: str) -> str | None:
        return self._runtime_errors.get(pid)

    # -- services wait for their plugin ------------------------------------------------

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_for(self, pid: str, on: bool) -> None:
        """Return once the plugin is switched `on` (or off)."""
        while self.on(pid) != on:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
