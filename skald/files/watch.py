"""Folder watches for the Files page: a WebSocket asks to watch a few folders and is told
when what their listing shows has changed.

Polling, not inotify: every `poll_s` one worker thread lists each watched folder with
`list_dir` (the same descriptor-based walk as the Files API, so a folder is reopened from
its mount's root without following links, and a link planted later cannot lead a watch
out of the member's places) and compares the result with the previous one. The snapshot
is what the page shows (names, kinds, sizes, mtimes to the second), so a change the page
could not display does not make it reload. A folder that disappears or becomes
unreadable counts as a change once; the page finds out why when it lists it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

from skald.errors import InvalidInputError, SkaldError
from skald.files.router import PathRouter, Resolved, entry_for, list_dir
from skald.log import get_logger

log = get_logger("skald.files")

MAX_WATCHES: Final = 4
POLL_S: Final = 1.0
# Beyond this many entries a change further down the listing goes unnoticed.
SNAPSHOT_LIMIT: Final = 5_000

Snapshot = tuple[tuple[str, str, int, str | None], ...] | None


def snapshot(found: Resolved) -> Snapshot:
    """What the folder's listing shows now; None if it cannot be listed. Blocking."""
    try:
        entries, _ = list_dir(found, limit=SNAPSHOT_LIMIT)
    except SkaldError:
        return None
    return tuple((e.name, e.type, e.size, e.mtime) for e in entries)


@dataclass(eq=False, slots=True)
class _Watch:
    found: Resolved
    last: Snapshot


@dataclass(eq=False)
class DirWatcher:
    """The watches of one connection. `run` polls until cancelled; `notify(path)` is
    called on the loop with the path as the client gave it."""

    router: PathRouter
    notify: Callable[[str], None]
    _: KW_ONLY
    poll_s: float = POLL_S
    max_watches: int = MAX_WATCHES
    _watches: dict[str, _Watch] = field(init=False, default_factory=dict)

    @property
    def paths(self) -> list[str]:
        return list(self._watches)

    async def watch(self, path: str) -> None:
        """Start watching the folder at `path` (an agent path such as `~/x`).

        Raises `PathDeniedError` for paths outside the member's places, `NotFoundError`
        when there is nothing there, `InvalidInputError` for notes, files, or one watch
        too many. Watching a path already watched is a no-op.
        """
        if path in self._watches:
            return
        if len(self._watches) >= self.max_watches:
            raise InvalidInputError(f"at most {self.max_watches} folders can be watched at once")
        found, first = await asyncio.to_thread(self._start, path)
        if path not in self._watches and len(self._watches) < self.max_watches:
            self._watches[path] = _Watch(found, first)

    def _start(self, path: str) -> tuple[Resolved, Snapshot]:
        self.router.ensure_home()
        found = self.router.resolve(path)
        if not isinstance(found, Resolved):
            raise InvalidInputError("notes cannot be watched; only folders")
        if entry_for(found).type != "dir":
            raise InvalidInputError(f"{found.agent_path} is not a folder")
        return found, snapshot(found)

    def unwatch(self, path: str) -> None:
        self._watches.pop(path, None)

    def clear(self) -> None:
        self._watches.clear()

    async def poll_once(self) -> None:
        """Look at every watched folder once; notify those that changed."""
        if not self._watches:
            return
        current = list(self._watches.items())
        fresh = await asyncio.to_thread(lambda: [snapshot(w.found) for _, w in current])
        for (path, watch), now in zip(current, fresh, strict=True):
            # Unwatched (or watched anew) while the thread was listing: not ours to report.
            if self._watches.get(path) is not watch:
                continue
            if now != watch.last:
                watch.last = now
                self.notify(path)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.poll_once()
            except Exception as exc:  # a bug here must not close the member's socket
                log.error("folder watch failed", error=str(exc)[:300], paths=len(self._watches))
