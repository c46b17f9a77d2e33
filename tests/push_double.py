"""A Web Push service double: a real HTTP server on 127.0.0.1 that checks a push request
as a real push service would, and decrypts it as the browser would.

Written from the RFCs, independently of the libraries Skald sends with (`http_ece`,
`py_vapid`): only `cryptography`'s primitives (ECDH, ECDSA, HMAC, AES-GCM) are shared.

- RFC 8292 (VAPID): `Authorization: vapid t=<JWT>,k=<key>`; the key must be the
  application server key the subscription was made with; the JWT is ES256 (raw r||s),
  signed by that key, with `aud` = the endpoint's origin, `exp` in the future and at most
  24 hours ahead, and `sub` a `mailto:` or `https:` contact. A legacy `Crypto-Key:
  p256ecdsa=` header, when present, must name the same key.
- RFC 8030: a `TTL` header (a non-negative integer); `Urgency`, when present, one of
  very-low, low, normal, high.
- RFC 8291/8188: `Content-Encoding: aes128gcm`; the body's header (salt, record size,
  key id = the sender's ephemeral P-256 key) and its records are decrypted with the
  subscription's private key and auth secret; the padding delimiter is checked.

A subscription can be marked gone (the service answers 410, as for an unsubscribed
browser); an unknown one answers 404. Every accepted message is kept decrypted; every
refusal is kept with its reason.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from http_double import ServedDouble


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _point(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class Subscription:
    """What a browser keeps for one push subscription."""

    id: str
    server_key: str  # the applicationServerKey it was created with (base64url)
    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))
    gone: bool = False

    @property
    def p256dh(self) -> str:
        return b64u(_point(self.private.public_key()))


def verify_vapid(headers: Any, endpoint_origin: str, server_key: str, now: float) -> dict[str, Any]:
    auth = headers.get("Authorization") or ""
    scheme, _, params = auth.partition(" ")
    if scheme.lower() != "vapid":
        raise Refused(401, f"Authorization scheme is {scheme!r}, not vapid")
    parts = dict(p.strip().split("=", 1) for p in params.split(",") if "=" in p)
    token, key = parts.get("t"), parts.get("k")
    if not token or not key:
        raise Refused(401, "Authorization lacks t= or k=")
    if key != server_key:
        raise Refused(403, "k is not the key the subscription was made with")
    crypto_key = headers.get("Crypto-Key")
    if crypto_key and "p256ecdsa=" in crypto_key:
        named = crypto_key.split("p256ecdsa=", 1)[1].split(";")[0].split(",")[0]
        if named != key:
            raise Refused(403, "Crypto-Key p256ecdsa differs from k")
    try:
        head_b64, claims_b64, sig_b64 = token.split(".")
        head = json.loads(unb64u(head_b64))
        claims = json.loads(unb64u(claims_b64))
        sig = unb64u(sig_b64)
    except ValueError:
        raise Refused(401, "the JWT is malformed") from None
    if head.get("alg") != "ES256":
        raise Refused(401, f"JWT alg is {head.get('alg')!r}, not ES256")
    if len(sig) != 64:
        raise Refused(401, "an ES256 signature is 64 bytes (r||s)")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(key))
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    try:
        public.verify(der, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise Refused(403, "the JWT signature does not verify with k") from None
    if claims.get("aud") != endpoint_origin:
        raise Refused(403, f"aud is {claims.get('aud')!r}, not {endpoint_origin!r}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= now:
        raise Refused(403, "the JWT has expired (or has no exp)")
    if exp > now + 24 * 3600:
        raise Refused(403, "exp is more than 24 hours ahead")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub.startswith(("mailto:", "https:")):
        raise Refused(403, "sub must be a mailto: or https: contact")
    return dict(claims)


def decrypt(body: bytes, sub: Subscription) -> bytes:
    """RFC 8291 on RFC 8188, as a browser does it."""
    if len(body) < 21:
        raise Refused(400, "the body is shorter than an aes128gcm header")
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    keyid = body[21 : 21 + idlen]
    records = body[21 + idlen :]
    if idlen != 65:
        raise Refused(400, "the key id must be the sender's 65-byte P-256 key")
    if rs < 18:
        raise Refused(400, "record size too small")
    sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), keyid)
    shared = sub.private.exchange(ec.ECDH(), sender)
    ua_public = _point(sub.private.public_key())
    prk_key = _hmac(sub.auth, shared)
    ikm = _hmac(prk_key, b"WebPush: info\x00" + ua_public + keyid + b"\x01")
    prk = _hmac(salt, ikm)
    cek = _hmac(prk, b"Content-Encoding: aes128gcm\x00\x01")[:16]
    base_nonce = _hmac(prk, b"Content-Encoding: nonce\x00\x01")[:12]
    out = b""
    chunks = [records[i : i + rs] for i in range(0, len(records), rs)]
    if not chunks:
        raise Refused(400, "no records")
    for seq, chunk in enumerate(chunks):
        nonce = (int.from_bytes(base_nonce, "big") ^ seq).to_bytes(12, "big")
        try:
            plain = AESGCM(cek).decrypt(nonce, chunk, None)
        except InvalidTag:
            raise Refused(
                400, "the payload does not decrypt with the subscription's keys"
            ) from None
        plain = plain.rstrip(b"\x00")
        last = seq == len(chunks) - 1
        if not plain or plain[-1] != (2 if last else 1):
            raise Refused(400, "bad padding delimiter")
        out += plain[:-1]
    return out


class PushDouble(ServedDouble):
    """`tls` (a server context) and `name` make it an https service for that host name;
    `hosts` and `sni` record the Host headers and TLS server names it was sent."""

    def __init__(
        self, server_key: str, *, tls: ssl.SSLContext | None = None, name: str = "127.0.0.1"
    ) -> None:
        self.server_key = server_key
        self.subscriptions: dict[str, Subscription] = {}
        self.messages: list[dict[str, Any]] = []  # accepted, decrypted
        self.refusals: list[str] = []
        self.hosts: list[str] = []
        self.sni: list[str | None] = []
        self._lock = threading.Lock()
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                double.hosts.append(self.headers.get("Host") or "")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status, reason = double.receive(self.path, self.headers, body)
                self.send_response(status)
                if status == 201:
                    self.send_header("Location", f"{double.origin}/message/{secrets.token_hex(4)}")
                self.send_header("Content-Length", str(len(reason.encode())))
                self.end_headers()
                self.wfile.write(reason.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            scheme = "https"
            tls.sni_callback = lambda _sock, server_name, _ctx: self.sni.append(server_name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.origin = f"{scheme}://{name}:{self.server.server_address[1]}"
        self.serve(self.server)

    def subscribe(self) -> Subscription:
        sub = Subscription(id=secrets.token_hex(8), server_key=self.server_key)
        self.subscriptions[sub.id] = sub
        return sub

    def endpoint(self, sub: Subscription) -> str:
        return f"{self.origin}/push/{sub.id}"

    def browser_json(self, sub: Subscription) -> dict[str, Any]:
        """What `PushSubscription.toJSON()` gives the page."""
        return {
            "endpoint": self.endpoint(sub),
            "expirationTime": None,
            "keys": {"p256dh": sub.p256dh, "auth": b64u(sub.auth)},
        }

    def receive(self, path: str, headers: Any, body: bytes) -> tuple[int, str]:
        try:
            sub_id = path.removeprefix("/push/")
            sub = self.subscriptions.get(sub_id)
            if not path.startswith("/push/") or sub is None:
                raise Refused(404, "no such subscription")
            if sub.gone:
                raise Refused(410, "the subscription has expired")
            claims = verify_vapid(headers, self.origin, sub.server_key, time.time())
            ttl = headers.get("TTL")
            if ttl is None or not ttl.isdigit():
                raise Refused(400, "a TTL header (seconds) is required")
            urgency = headers.get("Urgency")
            if urgency is not None and urgency not in ("very-low", "low", "normal", "high"):
                raise Refused(400, f"Urgency {urgency!r} is not one of RFC 8030's")
            if headers.get("Content-Encoding") != "aes128gcm":
                raise Refused(415, "Content-Encoding must be aes128gcm")
            if len(body) > 4096:
                raise Refused(413, "the payload is larger than 4096 bytes")
            plain = decrypt(body, sub)
        except Refused as exc:
            with self._lock:
                self.refusals.append(f"{exc.status} {exc.reason}")
            return exc.status, exc.reason
        with self._lock:
            self.messages.append(
                {
                    "subscription": sub.id,
                    "payload": json.loads(plain),
                    "ttl": int(ttl),
                    "urgency": urgency,
                    "claims": claims,
                    "size": len(body),
                }
            )
        return 201, "created"
