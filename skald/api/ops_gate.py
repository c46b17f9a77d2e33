"""The ops channel's gate (docs/dev/security.md): `/api/ops*` passes only from loopback
with exactly one header carrying the ops token; anything else is the same 404 as a path
that does not exist, so the channel cannot be found from the network.

It wraps the whole app (skald/api/app.py), below every feature; the ops feature's routes
check the flag it sets (`ops_only`). Trap: the flag lives on the ASGI scope, which only
server code writes; a header can never set it, and the path is compared with repeated
slashes folded, since the router folds them too.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from skald.api.security import send_json
from skald.channels.ops import OPS_HEADER, OPS_PREFIX, token_matches

# Set on the ASGI scope by the gate, and only by it: clients cannot write scope keys.
SCOPE_FLAG = "skald.ops"
# Marks answers that passed the gate, so a client can tell "refused" from a real 404.
APPROVED_HEADER = (b"x-skald-ops", b"1")
NOT_FOUND_BODY = b'{"error":{"code":"not_found","message":"Not Found"}}'
_HEADER = OPS_HEADER.lower().encode("latin-1")
_SLASHES = re.compile(r"/{2,}")


def is_ops_path(path: str) -> bool:
    path = _SLASHES.sub("/", path)
    return path == OPS_PREFIX or path.startswith(OPS_PREFIX + "/")


def _loopback(scope: dict[str, Any]) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def approved(scope: dict[str, Any], token: str | None) -> bool:
    """Loopback peer and exactly one header with the right token."""
    if token is None or not _loopback(scope):
        return False
    sent = [v for k, v in scope.get("headers", ()) if k.lower() == _HEADER]
    if len(sent) != 1:
        return False
    return token_matches(token, sent[0].decode("latin-1"))


class OpsGate:
    """ASGI wrapper: `/api/ops*` passes only with the ops token from loopback."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and is_ops_path(scope.get("path", "")):
            if scope["type"] != "http" or not approved(scope, self.token):
                if scope["type"] == "http":
                    await send_json(send, 404, NOT_FOUND_BODY)
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
            scope[SCOPE_FLAG] = True
            inner_send = send

            async def send_marked(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), APPROVED_HEADER]
                await inner_send(message)

            send = send_marked
        else:
            scope.pop(SCOPE_FLAG, None)
        await self.app(scope, receive, send)
