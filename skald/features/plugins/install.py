"""Installing a plugin from wheels an administrator uploaded (never fetched at run time).

Rule: the upload is one plugin wheel (the one with a `skald` entry point; its name is
the plugin's id) and, optionally, wheels of its dependencies. Every requirement of the
wheels (markers evaluated for this Python) must be met by a package Skald already has
or by a wheel of the same upload; otherwise nothing is installed and the refusal lists
what is missing. The wheels are unpacked, like `pip install --target`, into a new
folder that then replaces `plugins/<id>/` by rename; no code of the plugin runs here.
It is loaded at the next start.

Traps:
- A wheel is a zip of names chosen by its author: an absolute name, `..`, or a link
  is refused before anything is written (nothing may land outside the folder).
- Only `purelib`/`platlib` of `<name>.data/` are unpacked; scripts and headers are not
  for a plugin. A wheel built for another platform or Python is refused.
- `packaging` is imported by the two functions that read wheels, not at the top: the
  server imports this module to register its routes, and a household that never
  uploads a plugin should not hold it (0.8 MiB; `tests/test_cold_start.py`).
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from skald.errors import InvalidInputError

PLUGIN_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
MAX_UNPACKED = 200 * 1024 * 1024  # a plugin and its dependencies, unpacked


class MissingDependencies(InvalidInputError):
    """The upload lacks what the plugin needs: `missing` lists each requirement."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(
            "the plugin needs packages Skald does not have; upload their wheels with it: "
            + ", ".join(missing)
        )


@dataclass
class Wheel:
    path: Path
    name: str  # canonical distribution name
    version: str
    requires: list[str] = field(default_factory=list)
    entry: tuple[str, str] | None = None  # the `skald` entry point: (id, module)


def _dist_info(names: list[str]) -> str:
    found = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(found) != 1:
        raise InvalidInputError("not a wheel: it needs exactly one .dist-info folder")
    return found.pop()


def read_wheel(path: Path, label: str) -> Wheel:
    from packaging.tags import parse_tag, sys_tags
    from packaging.utils import canonicalize_name

    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            info = _dist_info(names)
            meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode("utf-8"))
            wheel_meta = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode("utf-8"))
            entry_text = (
                z.read(f"{info}/entry_points.txt").decode("utf-8")
                if f"{info}/entry_points.txt" in names
                else ""
            )
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, OSError) as exc:
        raise InvalidInputError(f"{label} is not a readable wheel ({exc})") from None
    if not meta.get("Name") or not meta.get("Version"):
        raise InvalidInputError(f"{label}: the wheel's METADATA has no Name or Version")
    tags = {t for line in wheel_meta.get_all("Tag") or [] for t in parse_tag(line)}
    if not tags & set(sys_tags()):
        raise InvalidInputError(f"{label} is built for another platform or Python")
    wheel = Wheel(
        path=path,
        name=canonicalize_name(meta["Name"]),
        version=meta["Version"],
        requires=list(meta.get_all("Requires-Dist") or []),
    )
    eps = [ep for ep in _entry_points(entry_text) if ep.group == "skald"]
    if len(eps) > 1:
        raise InvalidInputError(f"{label} declares more than one `skald` entry point")
    for ep in eps:
        wheel.entry = (ep.name, ep.value)
    return wheel


def _entry_points(text: str) -> list[importlib.metadata.EntryPoint]:
    out = []
    group = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
            continue
        name, _, value = line.partition("=")
        out.append(importlib.metadata.EntryPoint(name.strip(), value.strip(), group))
    return out


@dataclass
class Plan:
    id: str
    plugin: Wheel
    wheels: list[Wheel]


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def plan(wheels: list[Wheel]) -> Plan:
    """The plugin of the upload and its wheels, once every requirement is met."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    plugins = [w for w in wheels if w.entry is not None]
    if len(plugins) != 1:
        raise InvalidInputError(
            "the upload must hold exactly one plugin wheel (one with a `skald` entry point)"
        )
    plugin = plugins[0]
    assert plugin.entry is not None
    pid = plugin.entry[0]
    if not PLUGIN_ID.fullmatch(pid):
        raise InvalidInputError(f"the plugin's id {pid!r} must be a-z, 0-9, - or _ (40 at most)")
    uploaded = {w.name: w.version for w in wheels}
    missing: list[str] = []
    for wheel in wheels:
        for text in wheel.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                raise InvalidInputError(f"{wheel.name}: unreadable requirement {text!r}") from None
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = canonicalize_name(req.name)
            have = uploaded.get(name) or _installed(name)
            unmet = have is None or not req.specifier.contains(have, prereleases=True)
            if unmet and str(req) not in missing:
                missing.append(str(req))
    if missing:
        raise MissingDependencies(missing)
    return Plan(id=pid, plugin=plugin, wheels=wheels)


def _target_name(name: str, data_dir: str) -> PurePosixPath | None:
    """Where a member of the wheel goes inside the folder (None: not unpacked)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name:
        raise InvalidInputError(f"the wheel holds a file outside its folder: {name!r}")
    if path.parts and path.parts[0] == data_dir:
        if len(path.parts) > 2 and path.parts[1] in ("purelib", "platlib"):
            return PurePosixPath(*path.parts[2:])
        return None
    return path


def _unpack(wheel: Wheel, into: Path, budget: list[int]) -> None:
    with zipfile.ZipFile(wheel.path) as z:
        info = _dist_info(z.namelist())
        data_dir = info[: -len(".dist-info")] + ".data"
        for member in z.infolist():
            if member.is_dir():
                continue
            if stat.S_ISLNK(member.external_attr >> 16):
                raise InvalidInputError(f"the wheel holds a link: {member.filename!r}")
            target = _target_name(member.filename, data_dir)
            if target is None:
                continue
            budget[0] -= member.file_size
            if budget[0] < 0:
                raise InvalidInputError("the plugin is too large unpacked (200 MiB at most)")
            dest = into.joinpath(*target.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(member) as src, dest.open("wb") as out:
                shutil.copyfileobj(src, out)


def install(p: Plan, plugins_dir: Path) -> Path:
    """Unpack the plan's wheels into `plugins_dir/<id>/` (replacing an older release).
    Blocking: run it in a thread."""
    plugins_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    new = plugins_dir / f".new-{p.id}"
    old = plugins_dir / f".old-{p.id}"
    final = plugins_dir / p.id
    for leftover in (new, old):
        shutil.rmtree(leftover, ignore_errors=True)
    new.mkdir(mode=0o700)
    try:
        budget = [MAX_UNPACKED]
        for wheel in p.wheels:
            _unpack(wheel, new, budget)
        if final.exists():
            final.rename(old)
        new.rename(final)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        if old.exists() and not final.exists():
            old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return final


def uninstall(plugins_dir: Path, pid: str) -> bool:
    """Remove the plugin's folder (its data in the databases stays). Blocking."""
    if not PLUGIN_ID.fullmatch(pid):
        return False
    folder = plugins_dir / pid
    if not folder.is_dir():
        return False
    shutil.rmtree(folder)
    return True


def inspect_upload(paths: list[tuple[Path, str]]) -> Plan:
    """Read every uploaded wheel (path, the name it was sent under) and plan the install."""
    wheels = []
    for path, label in paths:
        if not label.endswith(".whl"):
            raise InvalidInputError(f"{label} is not a wheel (.whl)")
        wheels.append(read_wheel(path, label))
    return plan(wheels)
