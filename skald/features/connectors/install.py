"""Installing a connector from a feed: checked files into a content-addressed folder, its
dependencies by the hash of their lock file, then the catalogue row.

Rule: the order makes a kill at any moment harmless. (1) every file is fetched and
checked (`Feed.fetch`), (2) the row is written `installing` (a new connector) or marked
so (an update keeps its old files and version meanwhile), (3) the files are written to a
staging folder and renamed into `data/connectors/<name>/v<version>-<digest>/`, (4) a
household connector's dependencies are installed the same way into
`data/connectors/deps/<hash>/` (`npm ci --omit=dev --ignore-scripts`, `pip install
--target`), (5) one transaction sets the new version, folder and `installed`. A folder
appears only by rename, so an existing one is complete; a leftover staging folder is
deleted at the next install; a row left `installing` is installed again by a retry.

Personal connectors' dependencies are not installed here: they install inside each
member's container at the first start there (supervisor), so no code of a personal
connector ever runs on the host.

Trap: `--ignore-scripts` is deliberate: npm install scripts would run arbitrary feed
code as the service's user at install time. A package that needs its scripts does not
belong in a household feed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import sys
from pathlib import Path

import msgspec

from skald.errors import ConflictError, NotFoundError, SkaldError
from skald.features.connectors.feed import FetchedItem, Source
from skald.features.connectors.store import Connector, ConnectorStore
from skald.log import get_logger
from skald.store.registry import now_iso

log = get_logger("skald.features.connectors.install")

DEPS_TIMEOUT_S = 900.0


class InstallError(SkaldError):
    code = "install_failed"


def deps_hash(kind: str, files: dict[str, bytes]) -> str:
    """The content hash naming a dependencies folder (same lock: same folder, shared)."""
    names = ("package.json", "package-lock.json") if kind == "npm" else ("requirements.txt",)
    h = hashlib.sha256(kind.encode())
    for name in names:
        h.update(b"\0" + name.encode() + b"\0" + files[name])
    return h.hexdigest()[:32]


def deps_command(kind: str, target: str, python: str = sys.executable) -> list[str]:
    """The command installing dependencies into `target` (cwd: the connector's folder)."""
    if kind == "npm":
        # npm ci installs into ./node_modules of the folder holding the lock file.
        # npm's back-off between its two retries (10 s, then up to 60) also follows an
        # error no retry mends, a certificate that does not verify: the card said what
        # to set after 70 s. 2 s then up to 10: a blip still heals, and it says so in 13.
        return [
            "npm",
            "ci",
            "--omit=dev",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--fetch-retry-mintimeout=2000",
            "--fetch-retry-maxtimeout=10000",
        ]
    return [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
        target,
        "-r",
        "requirements.txt",
    ]


def _write_folder(root: Path, files: dict[str, bytes]) -> Path:
    """Write `files` into a fresh staging folder under `root` (0755/0644)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{secrets.token_hex(6)}"
    staging.mkdir(mode=0o755)
    for name, data in files.items():
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o644)
    return staging


def _clean_staging(root: Path) -> None:
    if root.is_dir():
        for leftover in root.glob(".staging-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _publish(staging: Path, final: Path) -> None:
    """Rename into place; when another install won the race, keep theirs."""
    try:
        staging.rename(final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)


class Installer:
    def __init__(self, store: ConnectorStore, root: Path) -> None:
        self.store = store
        self.root = root  # data/connectors
        self._lock = asyncio.Lock()

    def folder_of(self, fetched: FetchedItem) -> Path:
        return self.root / fetched.manifest.name / f"v{fetched.item.version}-{fetched.digest[:12]}"

    def deps_folder(self, kind: str, files: dict[str, bytes]) -> Path:
        return self.root / "deps" / deps_hash(kind, files)

    async def install(self, feed: Source, folder: str, *, update: bool = False) -> Connector:
        """Install (or update) the item in `folder` of the feed. Admin only (caller)."""
        index = await feed.index()
        item = next((i for i in index.connectors if i.folder == folder), None)
        if item is None:
            raise NotFoundError(f"the feed has no connector {folder!r}")
        fetched = await feed.fetch(item)  # refuses the whole item on any mismatch
        async with self._lock:
            existing = await self.store.get(fetched.manifest.name)
            if existing is not None and existing.status == "installed":
                if not update:
                    raise ConflictError(f"{folder} is already installed (update it instead)")
                if existing.feed_version >= item.version:
                    raise ConflictError(
                        f"{folder} is already at version {existing.feed_version}: "
                        "the feed offers no newer one"
                    )
            m = fetched.manifest
            stamp = now_iso()
            row = Connector(
                name=m.name,
                display_name=m.display_name or m.name,
                description=m.description,
                icon=m.icon,
                feed_version=item.version,
                transport=m.transport,
                manifest={
                    **msgspec.to_builtins(m),
                    "_deps_hash": deps_hash(m.dependencies, fetched.files)
                    if m.dependencies
                    else None,
                },
                auth=m.auth.type,
                scope=m.scope,
                status="installing",
                install_dir=None,
                last_error=None,
                last_stderr=None,
                installed_at=stamp,
                updated_at=stamp,
            )
            await self.store.begin_install(row)
            try:
                final = await asyncio.to_thread(self._place_files, fetched)
                if m.scope == "household" and m.dependencies:
                    await self.install_deps_on_host(m.dependencies, fetched.files)
            except SkaldError as exc:
                await self.store.set_status(m.name, "failed", error=str(exc))
                raise
            except OSError as exc:
                await self.store.set_status(m.name, "failed", error=f"files: {exc.strerror}")
                raise InstallError(f"{m.name}: could not write its files: {exc.strerror}") from exc
            done = msgspec.structs.replace(row, install_dir=str(final), status="installed")
            await self.store.finish_install(done)
            log.info("connector installed", connector=m.name, version=item.version)
            return await self.store.require(m.name)

    def _place_files(self, fetched: FetchedItem) -> Path:
        home = self.root / fetched.manifest.name
        _clean_staging(home)
        final = self.folder_of(fetched)
        if not final.is_dir():
            _publish(_write_folder(home, fetched.files), final)
        return final

    async def install_deps_on_host(self, kind: str, files: dict[str, bytes]) -> Path:
        """`npm ci` / `pip install --target` into the content-addressed deps folder."""
        final = self.deps_folder(kind, files)
        if final.is_dir():
            return final
        deps_root = self.root / "deps"
        await asyncio.to_thread(_clean_staging, deps_root)
        wanted = ("package.json", "package-lock.json") if kind == "npm" else ("requirements.txt",)
        staging = await asyncio.to_thread(_write_folder, deps_root, {n: files[n] for n in wanted})
        target = staging / "python" if kind == "pip" else staging
        cmd = deps_command(kind, str(target))
        try:
            code, out = await run_in_group(cmd, staging, DEPS_TIMEOUT_S, package_tool_env())
            if code != 0 and kind == "npm" and b"ETARGET" in out:
                # npm's cached copy of a package's version list can lag the registry the
                # lock was resolved against; once more, asking the registry afresh.
                log.info("npm ci retried online", reason="ETARGET")
                retry = [*cmd, "--prefer-online"]
                code, out = await run_in_group(retry, staging, DEPS_TIMEOUT_S, package_tool_env())
        except (TimeoutError, asyncio.CancelledError):
            # A half-made node_modules can be thousands of files: removed off the loop.
            await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)
            raise
        if code != 0:
            await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)
            tail = out.decode(errors="replace").strip().splitlines()[-5:]
            raise InstallError(f"installing {kind} dependencies failed: " + " | ".join(tail))
        await asyncio.to_thread(_publish, staging, final)
        return final


def host_env() -> dict[str, str]:
    """The little of Skald's environment a host-side package tool needs (no secrets)."""
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}


def package_tool_env() -> dict[str, str]:
    """`host_env` and the operator's `npm_config_*` settings (a registry, a proxy, a CA),
    so that resolving a lock and installing from it ask the same registry."""
    env = host_env()
    env.update({k: v for k, v in os.environ.items() if k.startswith("npm_config_")})
    return env


async def run_in_group(
    cmd: list[str], cwd: Path, seconds: float, env: dict[str, str]
) -> tuple[int, bytes]:
    """A host command in a session of its own: (exit code, what it said). On a timeout or
    a cancellation its whole process group is killed and reaped (npm leaves children)."""
    from skald.sandbox.procgroup import communicate_within

    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    out = await communicate_within(proc, seconds, lambda: os.killpg(proc.pid, 9))
    return proc.returncode or 0, out
