"""An MCP server that leaks its secrets everywhere it can (standard library only, stdio,
so it also runs in a member's container): for the rule that a connector's stored secret
never appears in what Skald shows, stores or logs (tests/test_connectors_secrets.py).

Its secrets come from the environment: LEAK_TOKEN and LEAK_PASSWORD. Tools:
- `leak`: prints both to stderr, sends them in log notifications (as text and inside a
  JSON object, where a quote or backslash is escaped), then answers a JSON-RPC error
  that quotes them;
- `fail`: a tool result marked as an error that quotes them;
- `crash`: writes a line that is not JSON-RPC, the token starting at column 70 (cut
  short in the protocol error's excerpt), and exits.
"""

import json
import os
import sys

TOKEN = os.environ.get("LEAK_TOKEN", "")
PASSWORD = os.environ.get("LEAK_PASSWORD", "")
OBJECT = {"type": "object", "properties": {}}
TOOLS = [
    {"name": n, "description": f"the {n} tool", "inputSchema": OBJECT}
    for n in ("leak", "fail", "crash")
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(data: object) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "error", "data": data},
        }
    )


def call(request_id: object, name: str) -> None:
    if name == "leak":
        print(
            f"Traceback: auth failed with token={TOKEN} password={PASSWORD}",
            file=sys.stderr,
            flush=True,
        )
        log(f"retrying with {TOKEN} and {PASSWORD}")
        log({"token": TOKEN, "password": PASSWORD})
        error = {"code": -32000, "message": f"upstream refused {TOKEN} / {PASSWORD}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "fail":
        text = f"could not sign in as {TOKEN} with {PASSWORD}"
        result = {"content": [{"type": "text", "text": text}], "isError": True}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    else:
        sys.stdout.write("x" * 70 + TOKEN + " " + PASSWORD + "\n")
        sys.stdout.flush()
        sys.exit(3)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "leaky", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            call(request_id, message["params"]["name"])
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
