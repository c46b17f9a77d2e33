"""The household's own feed: connectors an administrator added by hand (an npm or PyPI
package, a command line, or a remote URL), stored in the registry and served to the
installer and the Marketplace exactly like a feed's items (issue 23 item 6).

Rule: an added item becomes a `Manifest` plus files (package.json and its lock,
requirements.txt) and from then on is a feed item like any other: `OwnFeed` answers
`index`/`fetch` with digests of the stored files, `check_manifest` judges it, the
installer installs it, members switch it on. Nothing here starts a process except
`npm install --package-lock-only --ignore-scripts` on the host, which resolves a package
name into a lock (no package code runs); the test run (`trial.py`) starts the server
with the isolation a real instance gets.

Trap: `{SECRET:name}` in a household item has nobody's secrets to fill it (household
connectors take no sign-in), so secrets are refused there; in a personal item each name
becomes a field every member fills with their own value.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import apsw
import msgspec

from skald.errors import InvalidInputError, NotFoundError, SkaldError
from skald.features.connectors.feed import (
    AuthSpec,
    FeedError,
    FeedIndex,
    FeedItem,
    FetchedItem,
    Manifest,
    SecretField,
    check_manifest,
    secret_names,
)
from skald.features.connectors.install import package_tool_env, run_in_group
from skald.features.connectors.shapes import OwnIn
from skald.store.database import Database
from skald.store.registry import now_iso

LABEL = "household"  # where an own item comes from, on its Marketplace card
NPM_TIMEOUT_S = 120.0
# npm: "@scope/name", "name", each optionally "@<version or range>".
_NPM = re.compile(r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$")
_NPM_VERSION = re.compile(r"^[A-Za-z0-9.^~*<>=| -]{1,64}$")
# PyPI: a project name, optionally pinned (`==1.2`, `>=1`).
_PIP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}([=<>!~]=?[A-Za-z0-9.*+!-]{1,40})?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,99}$")


class OwnItem(msgspec.Struct, frozen=True, kw_only=True):
    """A stored item: its manifest and files, ready for the installer."""

    name: str
    version: int
    manifest: Manifest
    files: dict[str, bytes]
    added_by: str | None = None
    added_at: str = ""

    def fetched(self) -> FetchedItem:
        digests = {n: hashlib.sha256(b).hexdigest() for n, b in self.files.items()}
        item = FeedItem(folder=self.name, version=self.version, files=digests)
        return FetchedItem(item=item, manifest=self.manifest, files=self.files)


def _split(line: str, what: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise InvalidInputError(f"the {what} is not a valid command line: {exc}") from exc


def _npm_spec(package: str) -> tuple[str, str]:
    """("@scope/name", "1.2.3" or "latest")."""
    text = package.strip()
    at = text.rfind("@")
    name, version = (text[:at], text[at + 1 :]) if at > 0 else (text, "latest")
    if not _NPM.fullmatch(name) or not _NPM_VERSION.fullmatch(version):
        raise InvalidInputError(f"{package!r} is not an npm package name")
    return name, version


async def npm_lock(name: str, version: str) -> tuple[bytes, bytes, str]:
    """package.json, the lock npm resolves for it, and the package's entry file (its
    first `bin`, else `main`); npm runs with `--ignore-scripts` (no package code)."""
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="skald-npm-"))
    try:
        manifest = {"name": "skald-connector", "private": True, "dependencies": {name: version}}
        package_json = (json.dumps(manifest, indent=2) + "\n").encode()
        await asyncio.to_thread((folder / "package.json").write_bytes, package_json)
        cmd = ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit"]
        out = await _run([*cmd, "--no-fund", "--loglevel=error"], folder)
        if out is not None:
            raise InvalidInputError(f"npm could not resolve {name}@{version}: {out}")
        lock = await asyncio.to_thread((folder / "package-lock.json").read_bytes)
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)
    entry = _npm_entry(json.loads(lock), name)
    return package_json, lock, entry


def _npm_entry(lock: dict[str, Any], name: str) -> str:
    info = lock.get("packages", {}).get(f"node_modules/{name}") or {}
    bins = info.get("bin")
    entry = next(iter(bins.values())) if isinstance(bins, dict) and bins else bins
    if not isinstance(entry, str) or not entry:
        raise InvalidInputError(f"the npm package {name} declares no program to run (bin)")
    if entry.startswith("/") or ".." in entry.split("/"):
        raise InvalidInputError(f"the npm package {name} names an unsafe program path")
    return f"node_modules/{name}/{entry.removeprefix('./')}"


async def _run(cmd: list[str], cwd: Path) -> str | None:
    """None when the command succeeded, else the tail of what it said."""
    if shutil.which(cmd[0]) is None:
        return f"{cmd[0]} is not installed on this server"
    code, out = await run_in_group(cmd, cwd, NPM_TIMEOUT_S, package_tool_env())
    if code == 0:
        return None
    return " | ".join(out.decode(errors="replace").strip().splitlines()[-3:])[:500]


async def build(spec: OwnIn) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest and files of an added item, checked as a feed item is (400 if not)."""
    files: dict[str, bytes] = {}
    fields: dict[str, Any] = {}
    if spec.headers and spec.kind != "url":
        raise InvalidInputError("headers are for a server reached by URL")
    if spec.kind == "npm":
        name, version = _npm_spec(spec.package)
        package_json, lock, entry = await npm_lock(name, version)
        files = {"package.json": package_json, "package-lock.json": lock}
        command = ["node", "{DEPS}/" + entry, *_split(spec.args, "arguments")]
        fields = {"transport": "stdio", "command": command, "dependencies": "npm", "entry": entry}
    elif spec.kind == "pip":
        if not _PIP.fullmatch(spec.package.strip()):
            raise InvalidInputError(f"{spec.package!r} is not a PyPI package name")
        project = re.split(r"[=<>!~]", spec.package.strip())[0]
        module = spec.module.strip() or project.replace("-", "_").replace(".", "_")
        if not _MODULE.fullmatch(module):
            raise InvalidInputError(f"{module!r} is not a Python module name")
        files = {"requirements.txt": (spec.package.strip() + "\n").encode()}
        command = ["python3", "-m", module, *_split(spec.args, "arguments")]
        env = {"PYTHONPATH": "{DEPS}/python", **spec.env}
        fields = {"transport": "stdio", "command": command, "dependencies": "pip", "env": env}
    elif spec.kind == "command":
        command = _split(spec.command, "command")
        if not command:
            raise InvalidInputError("the command is empty")
        fields = {"transport": "stdio", "command": command}
    else:
        if not re.match(r"^https?://[^\s/]+", spec.url.strip()):
            raise InvalidInputError("the URL must start with http:// or https://")
        fields = {"transport": "http", "url": spec.url.strip(), "headers": spec.headers}
    fields.setdefault("env", dict(spec.env))
    raw = {
        "name": spec.name,
        "display_name": spec.display_name.strip() or spec.name,
        "description": spec.description.strip(),
        "icon": spec.icon.strip(),
        "scope": spec.scope,
        **fields,
    }
    manifest = msgspec.convert(raw, Manifest)
    manifest = _with_secrets(manifest)
    item = OwnItem(name=spec.name, version=1, manifest=manifest, files=files).fetched()
    try:
        check_manifest(manifest, item.item)
    except FeedError as exc:
        raise InvalidInputError(str(exc)) from exc
    return manifest, files


def _with_secrets(manifest: Manifest) -> Manifest:
    """Every `{SECRET:name}` used becomes a field each member fills (personal only)."""
    names = sorted(secret_names(manifest))
    if not names:
        return manifest
    if manifest.scope == "household":
        raise InvalidInputError(
            "a household connector cannot use {SECRET:...}: it runs once for everyone and "
            "takes no member's secrets (make it personal)"
        )
    auth = AuthSpec(type="api_key", fields=[SecretField(name=n, label=n) for n in names])
    return msgspec.structs.replace(manifest, auth=auth)


class OwnStore:
    """`connector_own_items` of the registry."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def all(self) -> list[OwnItem]:
        rows = await self.db.fetch_all(
            "SELECT name, version, manifest, files, added_by, added_at "
            "FROM connector_own_items ORDER BY name"
        )
        return [_item(r) for r in rows]

    async def get(self, name: str) -> OwnItem | None:
        row = await self.db.fetch_one(
            "SELECT name, version, manifest, files, added_by, added_at "
            "FROM connector_own_items WHERE name=?",
            (name,),
        )
        return None if row is None else _item(row)

    async def put(self, manifest: Manifest, files: dict[str, bytes], added_by: str) -> OwnItem:
        """Add the item, or replace it with the next version (an update to install)."""
        text = msgspec.json.encode(manifest).decode()
        stored = json.dumps({n: b.decode() for n, b in files.items()})

        def q(c: apsw.Connection) -> None:
            with c:
                c.execute(
                    "INSERT INTO connector_own_items(name, version, manifest, files, added_by, "
                    "added_at) VALUES(?, 1, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                    "version=version+1, manifest=excluded.manifest, files=excluded.files, "
                    "added_by=excluded.added_by, added_at=excluded.added_at",
                    (manifest.name, text, stored, added_by, now_iso()),
                )

        await self.db.call(q)
        found = await self.get(manifest.name)
        assert found is not None
        return found

    async def remove(self, name: str) -> None:
        await self.db.call(
            lambda c: c.execute("DELETE FROM connector_own_items WHERE name=?", (name,))
        )


def _item(r: tuple[Any, ...]) -> OwnItem:
    return OwnItem(
        name=r[0],
        version=r[1],
        manifest=msgspec.json.decode(r[2], type=Manifest),
        files={n: t.encode() for n, t in json.loads(r[3]).items()},
        added_by=r[4],
        added_at=r[5],
    )


class OwnFeed:
    """The household's own items as a feed (`feed.Source`)."""

    label = LABEL

    def __init__(self, store: OwnStore) -> None:
        self.store = store

    async def index(self) -> FeedIndex:
        items = [i.fetched().item for i in await self.store.all()]
        return FeedIndex(version=1, connectors=items)

    async def fetch(self, item: FeedItem) -> FetchedItem:
        found = await self.store.get(item.folder)
        if found is None:
            raise NotFoundError(f"the household has no connector {item.folder!r}")
        fetched = found.fetched()
        if fetched.item != item:  # replaced since the index was read
            raise FeedError(f"{item.folder} changed while it was being read: try again")
        return fetched

    async def manifests(self) -> list[tuple[FeedItem, Manifest | None, str | None]]:
        out: list[tuple[FeedItem, Manifest | None, str | None]] = []
        for own in await self.store.all():
            try:
                fetched = own.fetched()
                check_manifest(fetched.manifest, fetched.item)
                out.append((fetched.item, fetched.manifest, None))
            except SkaldError as exc:
                out.append((own.fetched().item, None, str(exc)))
        return out
