"""Key derivation and wrapping for encrypted accounts.

Each encrypted account has a random 256-bit data key (DEK) that encrypts its owner
database. The DEK is only ever stored wrapped (AES-256-GCM): once under a key derived
from the password with Argon2id, once under a key derived from the recovery code.
Unwrapping is the password check, so no password hash exists for these accounts.

Everything here is CPU- or memory-heavy and synchronous; callers run it in a thread.
"""

from __future__ import annotations

import base64
import secrets
from typing import Literal

import msgspec
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from argon2.low_level import Type, hash_secret_raw
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from skald.errors import AuthenticationError

DEK_BYTES = 32
SALT_BYTES = 16
NONCE_BYTES = 12


class KdfParams(msgspec.Struct, frozen=True, kw_only=True):
    """Argon2id cost parameters; stored with every wrap so they can change later."""

    memory_kib: int
    time_cost: int
    parallelism: int


# Memory-hard default: an attacker with the file pays 256 MiB per guess.
DEFAULT_KDF = KdfParams(memory_kib=256 * 1024, time_cost=3, parallelism=2)
# For the test suite only (selected from the environment, never from config.toml).
TEST_KDF = KdfParams(memory_kib=8 * 1024, time_cost=1, parallelism=1)

KdfProfile = Literal["default", "test"]
PROFILES: dict[str, KdfParams] = {"default": DEFAULT_KDF, "test": TEST_KDF}


class WrappedKey(msgspec.Struct, frozen=True, kw_only=True):
    """A DEK encrypted under a key derived from a secret. Serialised into the registry."""

    version: int = 1
    kdf: Literal["argon2id", "hkdf-sha256"]
    params: KdfParams | None = None
    salt: str  # base64
    nonce: str  # base64
    ciphertext: str  # base64, includes the GCM tag

    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_json(cls, text: str) -> WrappedKey:
        return msgspec.json.decode(text, type=cls)


def new_dek() -> bytes:
    return secrets.token_bytes(DEK_BYTES)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _argon2_key(secret: str, salt: bytes, params: KdfParams) -> bytes:
    return hash_secret_raw(
        secret=secret.encode("utf-8"),
        salt=salt,
        time_cost=params.time_cost,
        memory_cost=params.memory_kib,
        parallelism=params.parallelism,
        hash_len=DEK_BYTES,
        type=Type.ID,
    )


def _hkdf_key(secret: str, salt: bytes) -> bytes:
    # Recovery codes carry 150 bits of entropy, so a memory-hard KDF adds nothing but delay.
    return HKDF(
        algorithm=hashes.SHA256(), length=DEK_BYTES, salt=salt, info=b"skald recovery v1"
    ).derive(secret.encode("utf-8"))


def _aad(user_id: str, purpose: str) -> bytes:
    # Binds a wrap to its account and purpose: a wrap copied onto another row won't open.
    return f"skald:dek:v1:{user_id}:{purpose}".encode()


def wrap_with_password(dek: bytes, password: str, user_id: str, params: KdfParams) -> WrappedKey:
    salt = secrets.token_bytes(SALT_BYTES)
    kek = _argon2_key(password, salt, params)
    return _seal(dek, kek, user_id, "password", "argon2id", params, salt)


def wrap_with_recovery_code(dek: bytes, code: str, user_id: str) -> WrappedKey:
    salt = secrets.token_bytes(SALT_BYTES)
    kek = _hkdf_key(normalise_recovery_code(code), salt)
    return _seal(dek, kek, user_id, "recovery", "hkdf-sha256", None, salt)


def _seal(
    dek: bytes,
    kek: bytes,
    user_id: str,
    purpose: str,
    kdf: Literal["argon2id", "hkdf-sha256"],
    params: KdfParams | None,
    salt: bytes,
) -> WrappedKey:
    nonce = secrets.token_bytes(NONCE_BYTES)
    sealed = AESGCM(kek).encrypt(nonce, dek, _aad(user_id, purpose))
    return WrappedKey(
        kdf=kdf, params=params, salt=_b64(salt), nonce=_b64(nonce), ciphertext=_b64(sealed)
    )


def unwrap(wrapped: WrappedKey, secret: str, user_id: str, purpose: str) -> bytes:
    """Return the DEK, or raise AuthenticationError if the secret is wrong."""
    salt = _unb64(wrapped.salt)
    if wrapped.kdf == "argon2id":
        if wrapped.params is None:
            raise ValueError("argon2id wrap without parameters")
        kek = _argon2_key(secret, salt, wrapped.params)
    else:
        kek = _hkdf_key(normalise_recovery_code(secret), salt)
    try:
        return AESGCM(kek).decrypt(
            _unb64(wrapped.nonce), _unb64(wrapped.ciphertext), _aad(user_id, purpose)
        )
    except InvalidTag:
        raise AuthenticationError("wrong password or recovery code") from None


def burn_time(params: KdfParams) -> None:
    """Spend what a real check would, so an unknown username looks like a wrong password."""
    _argon2_key("x", b"\0" * SALT_BYTES, params)


# -- recovery codes ----------------------------------------------------------------

# Crockford base32: no I, L, O, U, so it survives being read aloud and handwritten.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CONFUSABLE = str.maketrans({"I": "1", "L": "1", "O": "0", "U": "V"})
RECOVERY_GROUPS = 6
RECOVERY_GROUP_LEN = 5


def new_recovery_code() -> str:
    """30 Crockford characters (150 bits) in groups of five: `7K3MQ-2XR9T-...`."""
    chars = [secrets.choice(_CROCKFORD) for _ in range(RECOVERY_GROUPS * RECOVERY_GROUP_LEN)]
    groups = [
        "".join(chars[i : i + RECOVERY_GROUP_LEN]) for i in range(0, len(chars), RECOVERY_GROUP_LEN)
    ]
    return "-".join(groups)


def normalise_recovery_code(code: str) -> str:
    """Accept what a person types: any case, spaces or dashes, look-alike letters."""
    cleaned = "".join(ch for ch in code.upper() if ch not in " -\t\r\n").translate(_CONFUSABLE)
    if len(cleaned) != RECOVERY_GROUPS * RECOVERY_GROUP_LEN or any(
        ch not in _CROCKFORD for ch in cleaned
    ):
        raise AuthenticationError("that is not a valid recovery code")
    return cleaned


# -- password hashes for unencrypted accounts ------------------------------------


def _hasher(params: KdfParams) -> PasswordHasher:
    return PasswordHasher(
        time_cost=params.time_cost,
        memory_cost=params.memory_kib,
        parallelism=params.parallelism,
        type=Type.ID,
    )


def hash_password(password: str, params: KdfParams) -> str:
    return _hasher(params).hash(password)


def verify_password(stored_hash: str, password: str) -> None:
    """Raise AuthenticationError unless `password` matches (parameters come from the hash)."""
    try:
        PasswordHasher().verify(stored_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        raise AuthenticationError("wrong password") from None
