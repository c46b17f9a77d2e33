"""Device cookies: a browser that signed in successfully keeps its own sign-in budget.

OWASP's "device cookie" defence against lockout as denial of service. After a successful
sign-in the browser gets an entry `username.issued.nonce.signature` (HMAC-SHA256 under a
key kept in the registry); one cookie holds the entries of the last few accounts signed
in on that browser. A sign-in that presents a valid entry for the username it tries is
throttled on that entry's own budget (`LoginThrottle`, key `device:<nonce>`) instead of
the account's and the address's, so a guesser elsewhere on the network cannot lock the
household's own browsers out. The cookie grants nothing else: the password is checked
as always.

Traps: an entry is bound to the (normalised) username it was issued for, so it cannot
lend its budget to another account; it expires after `MAX_AGE_S`; a forged, expired or
foreign entry is treated as no cookie at all (never as an error). Rotating the key in the
registry forgets every device.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

DEVICE_COOKIE = "skald_device"
MAX_AGE_S = 180 * 86400
MAX_ENTRIES = 5
_ENTRY_SEP = "~"


def _normal(username: str) -> str:
    return username.strip().lower()


class DeviceCookies:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 32:
            raise ValueError("device cookie keys are at least 32 bytes")
        self._key = key
        self.clock = clock

    def _sign(self, body: str) -> str:
        mac = hmac.new(self._key, b"skald device v1:" + body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def _entries(self, cookie: str | None) -> list[tuple[str, str, str]]:
        """The valid entries of a cookie: (username, nonce, entry text)."""
        out: list[tuple[str, str, str]] = []
        now = self.clock()
        for entry in (cookie or "").split(_ENTRY_SEP)[: MAX_ENTRIES * 2]:
            parts = entry.rsplit(".", 3)
            if len(parts) != 4:
                continue
            username, issued, nonce, sig = parts
            if not hmac.compare_digest(
                sig.encode(), self._sign(f"{username}.{issued}.{nonce}").encode()
            ):
                continue
            if not issued.isdigit() or now - int(issued) > MAX_AGE_S:
                continue
            out.append((username, nonce, entry))
        return out

    def find(self, cookie: str | None, username: str) -> str | None:
        """The device id (nonce) this cookie holds for `username`, or None."""
        name = _normal(username)
        return next((nonce for user, nonce, _ in self._entries(cookie) if user == name), None)

    def after_sign_in(self, cookie: str | None, username: str) -> str:
        """The cookie to send back after `username` signed in: a fresh entry for them
        first, the other accounts' valid entries after it, at most MAX_ENTRIES."""
        name = _normal(username)
        body = f"{name}.{int(self.clock())}.{secrets.token_urlsafe(12)}"
        fresh = f"{body}.{self._sign(body)}"
        others = [entry for user, _, entry in self._entries(cookie) if user != name]
        return _ENTRY_SEP.join([fresh, *others][:MAX_ENTRIES])
