"""The instance key: seals secrets the server itself must be able to read (LLM provider
API keys, later connector credentials of global connectors).

It lives in `data/instance.key` (0600), apart from the registry, so a copied database
alone leaks no API key. It is no defence against someone holding the whole data
directory — nothing on one box can be; the docs say so.
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from skald.errors import StorageError

KEY_BYTES = 32


def create_once(path: Path, data: bytes) -> None:
    """Write `data` to a new file `path` (0600) unless one is there. O_EXCL: two processes
    racing to create a key cannot end up with different keys (the loser's `data` is
    dropped; both then read the winner's)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class Sealed(msgspec.Struct, frozen=True):
    nonce: str
    ciphertext: str


class InstanceKey:
    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError("instance keys are 32 bytes")
        self._aead = AESGCM(key)

    @classmethod
    def load_or_create(cls, path: Path) -> InstanceKey:
        if not path.exists():
            create_once(path, secrets.token_bytes(KEY_BYTES))
        data = path.read_bytes()
        if len(data) != KEY_BYTES:
            raise StorageError(
                f"{path} is damaged (expected {KEY_BYTES} bytes); restore it from a backup"
            )
        path.chmod(0o600)
        return cls(data)

    def seal(self, plaintext: str, purpose: str) -> str:
        nonce = secrets.token_bytes(12)
        ct = self._aead.encrypt(nonce, plaintext.encode(), purpose.encode())
        sealed = Sealed(
            nonce=base64.b64encode(nonce).decode(), ciphertext=base64.b64encode(ct).decode()
        )
        return msgspec.json.encode(sealed).decode()

    def open(self, sealed_json: str, purpose: str) -> str:
        sealed = msgspec.json.decode(sealed_json, type=Sealed)
        try:
            plain = self._aead.decrypt(
                base64.b64decode(sealed.nonce),
                base64.b64decode(sealed.ciphertext),
                purpose.encode(),
            )
        except InvalidTag:
            raise StorageError("a sealed secret does not open with this instance key") from None
        return plain.decode()
