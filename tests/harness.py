"""A real Skald server in a subprocess, and a small API client that speaks its rules
(session cookie, CSRF header). Used by the end-to-end, shutdown and browser tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

ADMIN = "mum"
ADMIN_PW = "mum's long password"

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def skald_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env.update(
        {
            "HOME": str(home),
            "SKALD_SECURITY_KDF_PROFILE": "test",
            "SKALD_LOG_FORMAT": "json",
            # No sandbox containers unless a test asks for them.
            "SKALD_SANDBOX_ENABLED": "false",
        }
    )
    env.update(extra)
    return env


def wait_until(
    what: Callable[[], T], seconds: float = 60.0, show: Callable[[], object] | None = None
) -> T:
    """What `what()` answers once that is true (asked every tenth of a second); after
    `seconds`, an AssertionError naming `what` and, given `show`, what it answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(0.1)
    shown = f": {show()}" if show else ""
    raise AssertionError(f"timed out waiting for {getattr(what, '__name__', what)}{shown}")


def until_healthy(
    proc: subprocess.Popen[bytes],
    url: str,
    timeout: float,
    name: str,
    log: Callable[[], str],
    pause: float = 0.1,
) -> bool:
    """How a started server is awaited (Skald's, the real model's): True once `url` answers
    200, False after `timeout`; a RuntimeError naming `name` with its log if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{log()}")
        try:
            if httpx.get(url, timeout=10 * pause).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(pause)
    return False


def run_cli(
    data: Path, env: dict[str, str], *argv: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skald", "--data", str(data), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


class ServerProcess:
    def __init__(self, root: Path, host: str = "127.0.0.1", **env_extra: str) -> None:
        self.root = root
        self.data = root / "data"
        self.host = host  # what it listens on; the tests reach it on 127.0.0.1
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = skald_env(root, **env_extra)
        self.log_path = root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(self, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_cli(self.data, self.env, *argv, stdin=stdin)

    def create_admin(self) -> None:
        r = self.cli("setup", "--admin", ADMIN, "--password-stdin", stdin=ADMIN_PW + "\n")
        assert r.returncode == 0, r.stderr

    def add_user(self, name: str, password: str, role: str = "member") -> None:
        """`skald user add` through the CLI (the server may be running or not)."""
        r = self.cli("user", "add", name, "--role", role, "--password-stdin", stdin=password + "\n")
        assert r.returncode == 0, r.stderr

    def start(self, timeout: float = 30.0) -> ServerProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "skald",
                "--data",
                str(self.data),
                "serve",
                "--host",
                self.host,
                "--port",
                str(self.port),
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        if until_healthy(self.proc, f"{self.url}/api/health", timeout, "server", self.log):
            return self
        # The caller's cleanup never runs when start() raises: stop it here, or it
        # outlives the test (seen under heavy load, where a start can take 30 s).
        self.close()
        raise RuntimeError(f"server did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def own_log(self, last: int) -> str:
        """The last `last` lines of the server's log but for the request log's."""
        lines = [line for line in self.log().splitlines() if '"skald.http"' not in line]
        return "\n".join(lines[-last:])

    def setup_token(self) -> str:
        return (self.data / "setup-token").read_text().strip()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> tuple[int, float]:
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - started

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def household(
    root: Path, *people: tuple[str, str], role: str = "member", config: str = "", **env_extra: str
) -> Iterator[ServerProcess]:
    """A running server with the administrator (`ADMIN`) and `people` (name, password)
    in `role`, and `config` (TOML) added to its config.toml; killed afterwards. The shape
    of most browser tests' `server` fixture."""
    srv = ServerProcess(root, **env_extra)
    srv.create_admin()
    for name, password in people:
        srv.add_user(name, password, role)
    if config:
        with (srv.data / "config.toml").open("a", encoding="utf-8") as out:
            out.write(f"\n{config}")
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


class Api:
    """A browser-like client: keeps the session cookie and sends the CSRF header."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.Client(base_url=base_url, timeout=30)
        self.csrf = ""

    def login(self, username: str, password: str) -> dict[str, Any]:
        r = self.http.post("/api/auth/login", json={"username": username, "password": password})
        assert r.status_code == 200, r.text
        me: dict[str, Any] = r.json()
        self.csrf = me["csrf_token"]
        return me

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf, **kw.pop("headers", {})}
        return self.http.request(method, path, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)

    def add_model(
        self,
        base_url: str,
        model: str,
        *,
        kind: str = "openai_compatible",
        api_key: str | None = None,
    ) -> None:
        """As an admin: a provider at `base_url` (the fake) and one model on it."""
        body: dict[str, Any] = {"name": f"Fake {model}", "kind": kind, "base_url": base_url}
        if api_key:
            body["api_key"] = api_key
        r = self.post("/api/llm/providers", json=body)
        assert r.status_code == 201, r.text
        r = self.post(
            "/api/llm/models", json={"provider_id": r.json()["id"], "model": model, "name": model}
        )
        assert r.status_code == 201, r.text

    @property
    def session_cookie(self) -> str:
        return str(self.http.cookies.get("skald_session", ""))

    def close(self) -> None:
        self.http.close()
