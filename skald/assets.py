"""Where the shipped assets (web UI, agents, docs, installer files) live.

In the zipapp they are package data under `skald/assets/<name>/` (real files once shiv
has extracted the archive); in a source checkout they are the top-level directories.
"""

from __future__ import annotations

import functools
from pathlib import Path

import skald

ASSET_NAMES = ("web", "agents", "docs", "installer")


@functools.cache
def asset_dir(name: str) -> Path:
    # Cached: the assets do not move while the process runs, and every turn asks for
    # the manual's folder (the member's mounts).
    if name not in ASSET_NAMES:
        raise ValueError(f"unknown asset directory {name!r}")
    package = Path(skald.__file__).resolve().parent
    bundled = package / "assets" / name
    if bundled.is_dir():
        return bundled
    return package.parent / name
