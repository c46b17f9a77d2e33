"""Writing a feed's `connectors.json`: the digest of every file of every connector folder.

`python -m skald.features.connectors.feedtool DIR [--version N]` (also used by the tests to build
feeds). Each folder's integer version is kept from the existing index, or 1; bump it
(`--bump FOLDER`) when a connector changes, so installations offer "Update".
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any


def write_index(
    root: Path, version: int | None = None, bump: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Write `root/connectors.json` for the folders under `root`; returns it."""
    index_path = root / "connectors.json"
    old: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {}
    versions = {c["folder"]: c["version"] for c in old.get("connectors", [])}
    items = []
    for folder in sorted(p for p in root.iterdir() if (p / "connector.json").is_file()):
        files = {
            str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*"))
            if f.is_file()
        }
        item_version = versions.get(folder.name, 1) + (1 if folder.name in bump else 0)
        items.append({"folder": folder.name, "version": item_version, "files": files})
    index = {"version": version or int(old.get("version", 0)) + 1, "connectors": items}
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--version", type=int)
    parser.add_argument("--bump", action="append", default=[])
    args = parser.parse_args()
    write_index(args.root, args.version, tuple(args.bump))


if __name__ == "__main__":
    main()
