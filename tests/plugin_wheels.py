"""Wheels for the plugin tests: the repository's example plugin built by its own backend
(`pip wheel --no-deps --no-build-isolation`, offline: flit_core is a dev dependency),
and small hand-made wheels for the broken and the dependent cases."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "skald-example"


def build_example(out: Path) -> Path:
    """The example plugin's wheel, built now from examples/skald-example."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(EXAMPLE)],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    (wheel,) = out.glob("skald_example-*.whl")
    return wheel


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(
    out: Path,
    dist: str,
    version: str,
    files: dict[str, str],
    *,
    entry: tuple[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A pure-Python wheel holding `files` (name -> text), with a `skald` entry point
    (id, module) when given and `Requires-Dist` lines."""
    out.mkdir(parents=True, exist_ok=True)
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = {name: text.encode() for name, text in files.items()}
    members[f"{info}/METADATA"] = meta.encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if entry is not None:
        members[f"{info}/entry_points.txt"] = f"[skald]\n{entry[0]} = {entry[1]}\n".encode()
    record = [_record_line(n, d) for n, d in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = out / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def plugin_wheel(
    out: Path,
    plugin: str,
    files: dict[str, str],
    version: str = "1.0",
    requires: tuple[str, ...] = (),
) -> Path:
    """The wheel of a Skald plugin as the tests write them: the distribution skald_PLUGIN,
    whose module skald_PLUGIN is the entry point `plugin`."""
    module = f"skald_{plugin}"
    return make_wheel(out, module, version, files, entry=(plugin, module), requires=requires)
