"""Building connector feeds for tests: folders of real files and their connectors.json."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from skald.features.connectors.feedtool import write_index

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "mcp_servers"


def python_connector(
    root: Path, name: str, script: str, *, extra: dict[str, Any] | None = None
) -> Path:
    """A stdio connector running `script` (a file of tests/mcp_servers) with this Python."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVERS / script, folder / script)
    manifest: dict[str, Any] = {
        "name": name,
        "display_name": name.title(),
        "description": f"the {name} test server",
        "transport": "stdio",
        "command": [sys.executable, "{DIR}/" + script],
        "entry": script,
        "scope": "household",
    }
    manifest.update(extra or {})
    (folder / "connector.json").write_text(json.dumps(manifest))
    return folder


def simple_feed(root: Path, names: tuple[str, ...] = ("clock",), **extra: Any) -> Path:
    for name in names:
        python_connector(root, name, "clock_server.py", extra=extra.get(name))
    write_index(root, 1)
    return root
