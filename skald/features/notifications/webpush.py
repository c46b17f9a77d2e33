"""Web Push to a browser: the payload encrypted for the subscription (RFC 8291,
`aes128gcm` of RFC 8188) and the request signed with the instance's VAPID key (RFC 8292).

Libraries: `http_ece` (Mozilla's encrypted-content-encoding) encrypts, `py_vapid` signs
the JWT; both build on `cryptography`, already a dependency. The request goes out with
httpx, asynchronously.

Rules:
- One VAPID key per instance, in `data/vapid.pem` (0600, created once with O_EXCL, like
  `instance.key`; backups carry it, so subscriptions survive a restore). Browsers bind a
  subscription to the public key: replacing the file silently orphans every device.
- The JWT's `aud` is the endpoint's origin, `exp` at most 24 h ahead (we use 12 h),
  `sub` the operator's contact (`notifications.vapid_subject`).
- A push service answering 404 or 410 says the subscription is gone: the caller deletes
  it. Anything else that is not 2xx is a failed attempt, logged, the device kept.

Trap: an endpoint is a URL a member gave us, and the server will POST to it. Only https
endpoints on host names or canonically written public addresses are accepted
(`check_endpoint`) unless the operator allows private ones
(`notifications.push_allow_private`, for tests and LAN push services). What a name
resolves to is checked when the message goes out, by the client's transport
(`pinned.PinnedTransport`), which also connects to the address it checked.

Trap: `py_vapid` and `http_ece` are imported where a key is loaded or a message is
encrypted, not at the top: the server imports this module at every start, and a
household without push devices should not hold them (about 1 MiB;
`tests/test_cold_start.py`). So are `cryptography`'s key serialization and elliptic
curves (about 0.5 MiB more: the server's own keys need only its AEAD, hashes and HKDF).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import httpx

from skald.errors import InvalidInputError
from skald.features.notifications.pinned import EndpointRefusedError, check_host, is_public

if TYPE_CHECKING:
    from py_vapid import Vapid02

__all__ = [
    "JWT_LIFETIME_S",
    "MAX_PAYLOAD",
    "PushOutcome",
    "PushTarget",
    "VapidKey",
    "check_endpoint",
    "encrypt",
    "send",
]

# RFC 8291: a push service must accept 4096 bytes of encrypted body; one record of
# aes128gcm costs 86 bytes of header (salt, rs, key id) plus 17 of tag and padding.
MAX_PAYLOAD = 3993
JWT_LIFETIME_S = 12 * 3600

# "refused": the endpoint is not one the server posts to (not a valid URL for httpx, or
# its host resolved to an address that is not public); the device stays, nothing sent.
PushOutcome = Literal["sent", "gone", "failed", "refused"]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class VapidKey:
    """The instance's VAPID key pair (P-256)."""

    def __init__(self, vapid: Vapid02) -> None:
        from cryptography.hazmat.primitives import serialization

        self._vapid = vapid
        point = vapid.public_key.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        # What a browser's pushManager.subscribe() takes as applicationServerKey.
        self.public_key = b64url(point)

    @classmethod
    def load_or_create(cls, path: Path) -> VapidKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        from skald.core.sealing import create_once

        if not path.exists():
            key = ec.generate_private_key(ec.SECP256R1())
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            create_once(path, pem)
        path.chmod(0o600)
        from py_vapid import Vapid02

        return cls(Vapid02.from_pem(path.read_bytes()))

    def authorization(self, endpoint: str, subject: str, now: float | None = None) -> str:
        """`vapid t=<JWT>,k=<public key>` for a request to `endpoint`."""
        parts = urlsplit(endpoint)
        claims = {
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int((time.time() if now is None else now) + JWT_LIFETIME_S),
            "sub": subject,
        }
        header: str = self._vapid.sign(claims)["Authorization"]
        return header


@dataclass(frozen=True)
class PushTarget:
    """A browser's subscription: where to post and its public keys (base64url)."""

    endpoint: str
    p256dh: str
    auth: str


def check_endpoint(endpoint: str, *, allow_private: bool) -> str:
    """The endpoint if the server may post to it, else InvalidInputError saying why."""
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname or ""
        _ = parts.port  # raises on a bad port
    except ValueError:
        raise InvalidInputError("the push endpoint is not a valid URL") from None
    if parts.scheme not in ("https", "http") or not host or parts.username or parts.password:
        raise InvalidInputError("the push endpoint must be an https URL")
    check_host(host)
    if allow_private:
        return endpoint
    if parts.scheme != "https":
        raise InvalidInputError("the push endpoint must be an https URL")
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise InvalidInputError("the push endpoint must be a public push service")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return endpoint  # a name: what it resolves to is checked when sending
    if not is_public(address):
        raise InvalidInputError("the push endpoint must be a public push service")
    return endpoint


def check_keys(p256dh: str, auth: str) -> None:
    """The browser's keys must be a P-256 point and a 16-byte secret."""
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        point = b64url_decode(p256dh)
        secret = b64url_decode(auth)
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except (ValueError, TypeError):
        raise InvalidInputError("the subscription's p256dh key is not a P-256 public key") from None
    if len(secret) != 16:
        raise InvalidInputError("the subscription's auth secret must be 16 bytes")


def encrypt(payload: bytes, target: PushTarget) -> bytes:
    """The `aes128gcm` body for this subscription: a fresh sender key and salt each time."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"a push payload is at most {MAX_PAYLOAD} bytes")
    import http_ece
    from cryptography.hazmat.primitives.asymmetric import ec

    sender = ec.generate_private_key(ec.SECP256R1())
    body: bytes = http_ece.encrypt(
        payload,
        salt=os.urandom(16),
        private_key=sender,
        dh=b64url_decode(target.p256dh),
        auth_secret=b64url_decode(target.auth),
        version="aes128gcm",
    )
    return body


async def send(
    client: httpx.AsyncClient,
    target: PushTarget,
    payload: bytes,
    *,
    key: VapidKey,
    subject: str,
    ttl: int,
    urgency: str = "normal",
) -> tuple[PushOutcome, int | None]:
    """Post one encrypted message; returns the outcome and the HTTP status (if any)."""
    headers = {
        "Authorization": key.authorization(target.endpoint, subject),
        "TTL": str(ttl),
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
        "Urgency": urgency,
    }
    try:
        # In a thread: a key pair made and agreed per message (and, the first time, the
        # encryption library imported).
        body = await asyncio.to_thread(encrypt, payload, target)
        r = await client.post(target.endpoint, content=body, headers=headers)
    except (EndpointRefusedError, httpx.InvalidURL):
        return "refused", None
    except httpx.HTTPError:
        return "failed", None
    if r.status_code in (404, 410):
        return "gone", r.status_code
    if 200 <= r.status_code < 300:
        return "sent", r.status_code
    return "failed", r.status_code
