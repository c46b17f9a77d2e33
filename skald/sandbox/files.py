"""The file tools on container-only paths: read, write and list inside the member's own
sandbox container (`skald.files.container.ContainerPaths`).

Rules:
- Every operation is one `docker exec` that drops to the member's uid:gid with no
  capability left (`setpriv`, as for commands) and runs `python3 -c PROGRAM <op> <path>
  [<limit>]`: PROGRAM is the constant below and the path is an
  argument, so no character of it (quotes, `$()`, newlines) is ever read as shell text.
  Written bytes go through the exec's stdin.
- Only the member's own container: found by this instance's name for the member's id and
  checked against its `skald.instance` / `skald.user` labels; never created or started
  here. Absent, stopped or paused (the storage guard) answers a plain sentence.
- The role is read at call time: without `sandbox.exec` the container is not reached.
- Regular files only (opened with O_NONBLOCK and checked with fstat: a FIFO would hang
  the exec), read up to the caller's limit; writes go to a temporary file beside the
  target and are renamed over it, keeping an existing file's mode.

Trap: the exec's stdin is a hijacked HTTP connection: the bytes are sent on the raw
socket and its write side shut (EOF for the program); the answer then arrives in Docker's
multiplexed frames (stdout 1, stderr 2).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Final

from skald.files.container import ContainerEntry, ContainerPathError, ContainerPathMissing
from skald.paths import CONTAINER_HOME
from skald.permissions import can
from skald.sandbox.manager import LABEL_INSTANCE, LABEL_USER, SandboxManager
from skald.sandbox.procs import drop_argv
from skald.sandbox.tool import SANDBOX_EXEC
from skald.store.rows import Role, User

__all__ = ["PROGRAM", "ContainerFiles"]

# argv: op path [limit]. Exit 0 with the answer on stdout, else 3 with a sentence on stderr.
PROGRAM: Final = r"""
import datetime, json, os, stat, sys, tempfile
op, path = sys.argv[1], sys.argv[2]
def fail(text):
    sys.stderr.write(text)
    sys.exit(3)
def when(t):
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
def kind(m):
    if stat.S_ISDIR(m): return "dir"
    if stat.S_ISREG(m): return "file"
    if stat.S_ISLNK(m): return "symlink"
    return "other"
try:
    if op == "read":
        limit = int(sys.argv[3])
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode): fail("is a folder")
        if not stat.S_ISREG(st.st_mode): fail("is not a regular file")
        if st.st_size > limit: fail("size %d" % st.st_size)
        out = bytearray()
        while len(out) <= limit:
            piece = os.read(fd, 1 << 20)
            if not piece: break
            out += piece
        if len(out) > limit: fail("size %d" % len(out))
        sys.stdout.buffer.write(bytes(out))
    elif op == "write":
        data = sys.stdin.buffer.read()
        folder = os.path.dirname(path) or "/"
        os.makedirs(folder, exist_ok=True)
        try:
            old = os.stat(path)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            fail("is a folder" if stat.S_ISDIR(old.st_mode) else "is not a regular file")
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".skald-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(temp, stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~mask)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
        sys.stdout.write("created" if old is None else "replaced")
    elif op == "list":
        limit = int(sys.argv[3])
        st = os.stat(path)
        top = {"name": os.path.basename(path) or "/", "kind": kind(st.st_mode), "size": st.st_size, "mtime": when(st.st_mtime)}
        rows, cut = [], False
        if stat.S_ISDIR(st.st_mode):
            with os.scandir(path) as it:
                for e in it:
                    if len(rows) >= limit:
                        cut = True
                        break
                    s = e.stat(follow_symlinks=False)
                    rows.append({"name": e.name, "kind": kind(s.st_mode), "size": s.st_size, "mtime": when(s.st_mtime)})
        rows.sort(key=lambda r: (r["kind"] != "dir", r["name"]))
        sys.stdout.write(json.dumps({"top": top, "rows": rows, "cut": cut}))
    else:
        fail("unknown operation")
except FileNotFoundError:
    fail("does not exist")
except NotADirectoryError:
    fail("goes through something that is not a folder")
except IsADirectoryError:
    fail("is a folder")
except PermissionError:
    fail("is not allowed to you")
except OSError as e:
    fail(e.strerror or str(e))
"""

_REFUSED: Final = 3


class ContainerFiles:
    """One member's container as the file tools reach it (see the module's rules)."""

    def __init__(
        self, manager: SandboxManager, member: Callable[[], Awaitable[tuple[User, Role]]]
    ) -> None:
        self.manager = manager
        self._member = member

    async def read(self, path: str, limit: int) -> bytes:
        return await self._run(path, "read", str(limit))

    async def write(self, path: str, data: bytes) -> bool:
        return (await self._run(path, "write", stdin=data)) == b"created"

    async def listing(
        self, path: str, limit: int
    ) -> tuple[ContainerEntry, list[ContainerEntry], bool]:
        answer = json.loads(await self._run(path, "list", str(limit)))
        rows = [_entry(r) for r in answer["rows"]]
        return _entry(answer["top"]), rows, bool(answer["cut"])

    async def _container(self, path: str) -> str:
        user, role = await self._member()
        if not can(role, SANDBOX_EXEC):
            raise ContainerPathError(
                f"{path} is inside the sandbox, which this member's role may not use "
                f"({SANDBOX_EXEC.name})."
            )
        manager = self.manager
        client = manager.client()
        name = manager.container_name(user.id)

        def look() -> tuple[str, str, dict[str, str]] | None:
            import docker.errors

            try:
                found = client.containers.get(name)
            except docker.errors.NotFound:
                return None
            return str(found.id), str(found.status), dict(found.labels or {})

        seen = await manager.call(look)
        if seen is None:
            raise ContainerPathError(
                f"{path} is inside your sandbox, which is not there now; run a command "
                "(execute_cmd) to start it."
            )
        container_id, status, labels = seen
        if labels.get(LABEL_INSTANCE) != manager.instance_id or labels.get(LABEL_USER) != user.id:
            raise ContainerPathError(f"{path} cannot be reached: the sandbox is not yours.")
        if status == "paused":
            raise ContainerPathError(
                f"{path} is inside your sandbox, which is paused because the disk is nearly "
                "full; it can be reached again once space is freed."
            )
        if status != "running":
            raise ContainerPathError(
                f"{path} is inside your sandbox, which is not running ({status}); run a "
                "command (execute_cmd) to start it."
            )
        return container_id

    async def _run(self, path: str, op: str, *extra: str, stdin: bytes | None = None) -> bytes:
        container_id = await self._container(path)
        manager = self.manager
        api = manager.client().api
        # As a command's process: the member's uid:gid, no capability left (the uid may
        # be 0 under a root service account), this boot's marker group (procs.py).
        drop = drop_argv((manager.boot_mark,), manager.uid, manager.gid)
        argv = [*drop, "--", "python3", "-c", PROGRAM, op, path, *extra]

        def run() -> tuple[int | None, bytes, bytes]:
            exec_id = api.exec_create(
                container_id,
                argv,
                stdout=True,
                stderr=True,
                stdin=stdin is not None,
                tty=False,
                user="0:0",  # setpriv drops to the member (drop_argv)
                environment={"HOME": CONTAINER_HOME},
            )["Id"]
            out, err = _exchange(api, exec_id, stdin)
            return api.exec_inspect(exec_id).get("ExitCode"), out, err

        code, out, err = await manager.call(run)
        if code == 0:
            return out
        said = err.decode("utf-8", "replace").strip()
        if code == _REFUSED and said == "does not exist":
            raise ContainerPathMissing(f"Nothing is at {path} in your sandbox.")
        if code == _REFUSED:
            raise ContainerPathError(_refusal(path, said))
        if code in (126, 127):
            raise ContainerPathError(
                f"{path} cannot be reached: python3 is missing in your sandbox "
                "(install_packages can put it back)."
            )
        raise ContainerPathError(f"{path} could not be reached in your sandbox ({said[:200]}).")


def _exchange(api: Any, exec_id: str, stdin: bytes | None) -> tuple[bytes, bytes]:
    from docker.utils.socket import frames_iter

    if stdin is None:
        out, err = api.exec_start(exec_id, demux=True)
        return out or b"", err or b""
    sock = api.exec_start(exec_id, socket=True)
    try:
        raw = sock._sock  # the hijacked connection; its write side ends the program's stdin
        raw.sendall(stdin)
        raw.shutdown(socket.SHUT_WR)
        streams = {1: bytearray(), 2: bytearray()}
        for stream, chunk in frames_iter(sock, tty=False):
            streams.setdefault(stream, bytearray()).extend(chunk)
        return bytes(streams[1]), bytes(streams[2])
    finally:
        sock.close()


def _refusal(path: str, said: str) -> str:
    if said.startswith("size "):
        return f"{path} is too large ({said[5:]} bytes) for the file tools; use execute_cmd."
    return f"{path} {said} in your sandbox."


def _entry(row: dict[str, Any]) -> ContainerEntry:
    return ContainerEntry(
        name=str(row["name"]), kind=row["kind"], size=int(row["size"]), mtime=str(row["mtime"])
    )
