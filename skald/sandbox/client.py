"""Opening the Docker Engine API client (blocking: callers run it in a thread)."""

from __future__ import annotations

from typing import Any

from skald.errors import SkaldError

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
# Generous: several members' commands stream at once, each holding a connection.
POOL_SIZE = 32


class DockerUnavailable(SkaldError):
    """The Docker daemon cannot be reached (not installed, not running, no permission)."""

    code = "docker_unavailable"


def connect(docker_host: str = "", timeout_s: float = 30.0) -> Any:
    """A `docker.DockerClient` for `docker_host` (empty: the default socket), checked with
    a ping. Raises DockerUnavailable with the reason."""
    import docker
    import docker.errors

    url = docker_host or DEFAULT_SOCKET
    try:
        client = docker.DockerClient(
            base_url=url, version="auto", timeout=int(timeout_s), max_pool_size=POOL_SIZE
        )
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerUnavailable(f"Docker is not reachable at {url}: {_short(exc)}") from None
    except OSError as exc:
        raise DockerUnavailable(f"Docker is not reachable at {url}: {exc}") from None
    return client


def _short(exc: Exception) -> str:
    text = str(exc)
    # The SDK nests the socket error inside a long requests message; keep the gist.
    for marker in ("FileNotFoundError", "ConnectionRefusedError", "PermissionError"):
        if marker in text:
            return {
                "FileNotFoundError": "no such socket (is the daemon running?)",
                "ConnectionRefusedError": "connection refused (is the daemon running?)",
                "PermissionError": "permission denied (is this account in the docker group?)",
            }[marker]
    return text[:300]
