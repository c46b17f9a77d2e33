"""The local operations channel: the instance lock and a token-guarded loopback API.

One data directory is served by at most one process. `skald serve` holds an exclusive
`flock` on `data/.serve.lock` for its whole life; `skald backup` (when no server runs)
and `skald restore` hold the same lock while they work, so a server cannot start half
way through. The lock file names its holder as one JSON line (`{"role": "serve",
"pid": ..., "host": ..., "port": ...}`), written after the lock is taken: it is a hint
for messages and for finding the port, never the lock itself.

A serving process writes a fresh random token to `data/ops.token` (0600, atomically)
at every start. Operator commands on the same machine (`skald status`, `doctor`,
`backup`, ...) read it and call `/api/ops/*` on the loopback interface with the header
`X-Skald-Ops-Token`; the server answers 404 to anything else. Reading the token needs
the service account's file permissions, which is the whole authorisation model: whoever
can read the data directory can already read every unencrypted byte in it.

API (stable; other commands build on it):

- `is_serving(layout) -> bool`
- `holder(layout) -> LockHolder | None`: what the lock file says about its holder
- `InstanceLock(layout, role)`: `acquire()` (raises `InstanceBusyError`), `release()`,
  also a context manager
- `write_token(layout) -> str`, `remove_token(layout, token)`, `read_token(layout)`
- `async ops_request(layout, config, method, path, body=None, timeout=60) -> dict | None`
- `OPS_HEADER`, `OPS_PREFIX`, `token_matches(expected, sent)`
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import socket
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import msgspec

from skald.channels.ops import OPS_HEADER, OPS_PREFIX, token_matches
from skald.config import Config
from skald.errors import SkaldError
from skald.paths import DataLayout

__all__ = [
    "OPS_HEADER",
    "OPS_PREFIX",
    "InstanceBusyError",
    "InstanceLock",
    "LockHolder",
    "holder",
    "is_serving",
    "lock_path",
    "ops_request",
    "read_token",
    "remove_token",
    "token_matches",
    "token_path",
    "write_token",
]

LOCK_NAME = ".serve.lock"
TOKEN_NAME = "ops.token"  # noqa: S105 - a file name, not a secret

Role = Literal["serve", "backup", "restore"]


class InstanceBusyError(SkaldError):
    """Another process holds this data directory's instance lock."""

    code = "instance_busy"


class LockHolder(msgspec.Struct, frozen=True, kw_only=True):
    role: str = "serve"
    pid: int = 0
    host: str | None = None
    port: int | None = None


def lock_path(layout: DataLayout) -> Path:
    return layout.root / LOCK_NAME


def token_path(layout: DataLayout) -> Path:
    return layout.root / TOKEN_NAME


# -- the instance lock -----------------------------------------------------------------


def _open_lock_file(layout: DataLayout) -> int:
    layout.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    # O_CLOEXEC (Python's default) keeps the lock out of child processes.
    fd = os.open(lock_path(layout), os.O_RDWR | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _busy_message(layout: DataLayout, role: Role) -> str:
    info = holder(layout)
    if info is not None and info.role in ("backup", "restore"):
        what = f"a `skald {info.role}` (pid {info.pid}) is using this data directory"
        return f"{what}; try again when it has finished"
    suffix = f" (pid {info.pid})" if info is not None and info.pid else ""
    if role == "serve":
        return f"another Skald is already serving this data directory{suffix}"
    return (
        f"a Skald server is serving this data directory{suffix}: stop it first "
        "(systemctl --user stop skald)"
    )


class InstanceLock:
    """The exclusive lock on `data/.serve.lock`, held by one process at a time."""

    def __init__(self, layout: DataLayout, role: Role, **details: Any) -> None:
        self.layout = layout
        self.role = role
        self.details = details
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> InstanceLock:
        if self._fd is not None:
            return self
        fd = _open_lock_file(self.layout)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InstanceBusyError(_busy_message(self.layout, self.role)) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        info = LockHolder(role=self.role, pid=os.getpid(), **self.details)
        os.ftruncate(fd, 0)
        os.pwrite(fd, msgspec.json.encode(info) + b"\n", 0)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        # Closing the descriptor drops the flock; the file itself stays (removing it
        # would race with a process that has just opened it).
        os.close(fd)

    def __enter__(self) -> InstanceLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def is_serving(layout: DataLayout) -> bool:
    """True while some process holds the instance lock of this data directory.

    A `skald backup` or `restore` also holds it; `holder()` tells which.
    """
    path = lock_path(layout)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the shared lock if it was taken
    return False


def holder(layout: DataLayout) -> LockHolder | None:
    """What the lock file says about its holder (None if empty or unreadable)."""
    try:
        raw = lock_path(layout).read_bytes()
    except OSError:
        return None
    try:
        return msgspec.json.decode(raw.strip() or b"null", type=LockHolder | None)
    except msgspec.DecodeError:
        return None


# -- the token -------------------------------------------------------------------------


def write_token(layout: DataLayout) -> str:
    """A fresh token in `data/ops.token` (0600), replaced atomically; returns it."""
    token = secrets.token_urlsafe(32)
    fd, name = tempfile.mkstemp(prefix=".ops.token.", dir=layout.root)
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(token_path(layout))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return token


def remove_token(layout: DataLayout, token: str) -> None:
    """Remove the token file if it is still ours (a newer server may have replaced it)."""
    path = token_path(layout)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="ascii").strip() == token:
            path.unlink()


def read_token(layout: DataLayout) -> str | None:
    try:
        text = token_path(layout).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


# -- the client ------------------------------------------------------------------------


def _address(layout: DataLayout, config: Config) -> tuple[str, int]:
    info = holder(layout)
    port = info.port if info is not None and info.port else config.server.port
    host = "::1" if info is not None and info.host == "::1" else "127.0.0.1"
    return host, port


def _find_server(layout: DataLayout, config: Config) -> tuple[str, str, int] | None:
    """(token, host, port) of the server holding the lock; None if nobody holds it."""
    if not is_serving(layout):
        return None
    info = holder(layout)
    if info is not None and info.role != "serve":
        raise SkaldError(
            f"a `skald {info.role}` (pid {info.pid}) is using this data directory; "
            "try again when it has finished"
        )
    token = read_token(layout)
    if token is None:
        raise SkaldError(
            f"a Skald server is serving {layout.root} but {token_path(layout)} is missing "
            "or unreadable (is it still starting, or run by another account?)"
        )
    host, port = _address(layout, config)
    return token, host, port


async def ops_request(
    layout: DataLayout,
    config: Config,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    timeout: float = 60,  # noqa: ASYNC109 - passed to the HTTP client as its timeout
) -> dict[str, Any] | None:
    """Call the running server's ops API; None when no server serves this data directory.

    `path` is the full path (`/api/ops/status`). Raises `SkaldError` with a sentence for
    the operator when a server holds the lock but cannot be asked (no token, no answer,
    an error status).
    """
    import httpx

    found = await asyncio.to_thread(_find_server, layout, config)
    if found is None:
        return None
    token, host, port = found
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    try:
        async with httpx.AsyncClient(
            base_url=base, timeout=httpx.Timeout(timeout, connect=5.0), trust_env=False
        ) as http:
            r = await http.request(method, path, json=body, headers={OPS_HEADER: token})
    except httpx.TimeoutException:
        raise SkaldError(
            f"the Skald server serving {layout.root} did not answer {method} {path} "
            f"on {base} within {timeout:g}s"
        ) from None
    except httpx.TransportError as exc:
        raise SkaldError(
            f"a Skald server is serving {layout.root} but does not answer on {base} "
            f"({exc.__class__.__name__}); is it still starting?"
        ) from None
    if r.status_code == 404 and not r.headers.get("x-skald-ops"):
        raise SkaldError(
            f"the server on {base} refused the ops token: is it the one serving {layout.root}?"
        )
    try:
        data = r.json()
    except json.JSONDecodeError:
        data = None
    if r.status_code >= 400:
        message = f"HTTP {r.status_code}"
        if isinstance(data, dict):
            with contextlib.suppress(KeyError, TypeError):
                message = str(data["error"]["message"])
        raise SkaldError(f"the server could not {method} {path}: {message}")
    if not isinstance(data, dict):
        raise SkaldError(f"the server answered {method} {path} with something else than JSON")
    return data


async def fetch_health(host: str, port: int, wait_s: float = 3.0) -> dict[str, Any] | None:
    """`/api/health` of whatever answers at host:port, when it looks like Skald's (has a
    version); None when nothing answers or something else does."""
    import httpx

    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    try:
        async with httpx.AsyncClient(timeout=wait_s, trust_env=False) as http:
            r = await http.get(f"{base}/api/health")
        data = r.json()
    except (httpx.HTTPError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("version"), str):
        return data
    return None


def bind_error(host: str, port: int) -> OSError | None:
    """Why host:port cannot be listened on now, or None when it can (blocking, quick).

    SO_REUSEADDR as the server sets it: a port with only TIME_WAIT leftovers counts as free.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None
