"""An MCP server (stdio, standard library only: it runs with the runtime image's python3,
which has no MCP SDK) for the tests of connector processes (never the product).

At start (when its environment has `ESCAPE=1`) it leaves a grandchild behind that hides
like a member's escapee: `env -i setsid sleep 1000` from a shell that exits at once (a
new session, an empty environment, reparented to the container's init). Tools:

- `hello`: answers "hello from escape" (the connector works);
- `peek`: tries to read each file named in `paths` and every process's
  `/proc/<pid>/environ`; answers, one line each, what it could read (`read <path>:
  <bytes>`) or why not (`denied <path>: <error>`), and `environ <pid>: <variables>` for
  every process's environment it could read (its own included);
- `fill`: writes `mib` MiB to `path`; answers "wrote N MiB" or "stopped after N MiB:
  errno E".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ESCAPE = "env -i setsid sleep 1000 >/dev/null 2>&1 </dev/null &"
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
PEEK: dict[str, Any] = {
    "type": "object",
    "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
}

FILL: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "mib": {"type": "integer"}},
}


def _peek(paths: list[str]) -> str:
    lines: list[str] = []
    for path in paths:
        try:
            lines.append(f"read {path}: {Path(path).read_bytes()[:200]!r}")
        except OSError as exc:
            lines.append(f"denied {path}: {type(exc).__name__}")
    for entry in sorted(Path("/proc").iterdir()):
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue
        names = [v.split(b"=", 1)[0].decode() for v in raw.split(b"\0") if v]
        if names:
            lines.append(f"environ {entry.name}: {' '.join(names)}")
    return "\n".join(lines) or "nothing"


def _fill(path: str, mib: int) -> str:
    """Write `mib` MiB to `path`; how far it got."""
    done = 0
    try:
        with Path(path).open("wb") as f:
            for _ in range(mib):
                f.write(b"\0" * 1048576)
                f.flush()
                done += 1
    except OSError as exc:
        return f"stopped after {done} MiB: errno {exc.errno}"
    return f"wrote {done} MiB"


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "escape", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {"name": "hello", "description": "Say hello.", "inputSchema": OBJECT},
                {"name": "peek", "description": "Try to read things.", "inputSchema": PEEK},
                {"name": "fill", "description": "Try to write MiBs.", "inputSchema": FILL},
            ]
        }
    elif method == "tools/call":
        params = message["params"]
        args = params.get("arguments") or {}
        if params["name"] == "hello":
            text = "hello from escape"
        elif params["name"] == "fill":
            text = _fill(str(args["path"]), int(args["mib"]))
        else:
            text = _peek(list(args.get("paths") or []))
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": f"no method {method}"},
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    if os.environ.get("ESCAPE") == "1":
        subprocess.run(["sh", "-c", ESCAPE], check=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
