"""Is a newer Skald out? The Overview's "update" line for administrators (issue 30).

Rule: ask the release server the updater itself uses (`SKALD_RELEASES_URL` and
`SKALD_CHANNEL` in the install root's installer.env; `update.sh` reads
`<url>/<releases|nightly>/LATEST`), never another place, and only from an installed
release: a box run from a source checkout, or installed from source (no release
server), is never checked (its line says how it updates instead).

Cached, not per page view: one answer is kept `CHECK_EVERY_S` (six hours), a failure
`RETRY_AFTER_S` (fifteen minutes); views meanwhile share it, and a view while a check
runs waits for that one (a lock), so a busy page makes one request at most per period.
The request has a short timeout and sends nothing about the household (a plain GET).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from skald.log import get_logger
from skald.ops.install_root import InstallRoot, running_from

log = get_logger("skald.usage")

CHECK_EVERY_S: Final = 6 * 3600.0
RETRY_AFTER_S: Final = 15 * 60.0
TIMEOUT_S: Final = 5.0
CHANNEL_DIRS: Final = {"stable": "releases", "nightly": "nightly"}
VERSION: Final = re.compile(r"[A-Za-z0-9.+_-]{1,64}")


@dataclass(frozen=True)
class UpdateStatus:
    status: str  # ok | warn | skip | unknown
    finding: str
    running: str | None = None
    latest: str | None = None


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Compare versions by their numbers in order ("0.10.0" > "0.9.1"); a local or
    build suffix (after "+") does not count."""
    parts = re.split(r"[.\-_]", version.split("+", 1)[0])
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in parts)


class UpdateCheck:
    """Server state: the last answer of the release server, kept for a while."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        running: Callable[[InstallRoot], Path | None] = running_from,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = InstallRoot.from_environ(environ)
        self.running = running
        self.clock = clock
        self._kept: tuple[float, UpdateStatus] | None = None
        self._lock = asyncio.Lock()

    async def status(self) -> UpdateStatus:
        async with self._lock:
            now = self.clock()
            if self._kept is not None:
                at, kept = self._kept
                wait = RETRY_AFTER_S if kept.status == "unknown" else CHECK_EVERY_S
                if now - at < wait:
                    return kept
            found = await self._check()
            self._kept = (self.clock(), found)
            return found

    async def _check(self) -> UpdateStatus:
        release = await asyncio.to_thread(self.running, self.root)
        if release is None:
            return UpdateStatus(
                status="skip",
                finding="Skald runs from a source checkout here, not from an installed "
                "release: it does not look for new releases (update the checkout).",
            )
        env = await asyncio.to_thread(self.root.installer_env)
        base = env.get("SKALD_RELEASES_URL", "").rstrip("/")
        running = release.name
        if not base.startswith(("http://", "https://")):
            return UpdateStatus(
                status="skip",
                finding="This install has no release server (installed from source): "
                "it does not look for new releases.",
                running=running,
            )
        channel = CHANNEL_DIRS.get(env.get("SKALD_CHANNEL") or "stable", "releases")
        url = f"{base}/{channel}/LATEST"
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http:
                r = await http.get(url)
            r.raise_for_status()
            latest = r.text.strip()
            if not VERSION.fullmatch(latest):
                raise ValueError("LATEST is not a version")
        except (httpx.HTTPError, ValueError) as exc:
            log.info("update check failed", error=str(exc))
            return UpdateStatus(
                status="unknown",
                finding=f"The release server could not be asked ({type(exc).__name__}); "
                f"running {running}.",
                running=running,
            )
        if version_key(latest) > version_key(running):
            return UpdateStatus(
                status="warn",
                finding=f"Skald {latest} is available; this box runs {running}.",
                running=running,
                latest=latest,
            )
        return UpdateStatus(
            status="ok",
            finding=f"Up to date: {running} is the newest release.",
            running=running,
            latest=latest,
        )
