"""One long-lived sandbox container per active member, kept in the shape it should have.

- Named `skald-<instance>-<userid>`, labelled `skald.instance` / `skald.user`; every sweep
  or removal filters on this instance's label, so another installation's containers (or
  anything else on the host) are never touched.
- `ensure` compares a hash of the wanted spec (image, uid:gid, mounts, network, limits,
  start script) with the one the container was created with (label `skald.spec`): the
  same -> reuse (start it if stopped), different -> remove and recreate.
- The container starts as root only long enough to give the host uid:gid a passwd entry,
  then drops to that uid. No sudo: members have no standing root. Every exec starts as
  root only to drop to that uid with the command's marker groups (`procs.py`).
- Capabilities: ALL dropped, then only what Skald's own root steps need (`CAP_ADD`);
  no-new-privileges. No raw sockets (NET_RAW), no device nodes (MKNOD), no network admin.
- A member with network access gets a bridge network of their own with a small subnet
  from `[sandbox] subnet_pool` (`network.py`); their container is alone on it, so no
  sandbox sees another's traffic. It goes with the container (deactivate, delete, sweep).
- A sandbox that cannot be made is never silent: `failures` keeps the reason per member
  for `/api/health`, and `ensure` raises it for the member's chat.
- Docker unreachable is a state, not a crash: calls fail with `SandboxUnavailable`,
  `health_reasons()` says why, and `watch_forever` (a supervised service) reconnects and
  reconciles every active member when the daemon is back.
- Every SDK call blocks: they run in this manager's thread pools, never on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec

from skald import walk
from skald.config import SandboxConfig
from skald.errors import SkaldError
from skald.files.homes import move_out_of_home_groups
from skald.files.mounts import GROUPS, MemberMount, docs_mount, home_mount
from skald.log import get_logger
from skald.paths import CONTAINER_HOME
from skald.sandbox.client import DockerUnavailable, connect
from skald.sandbox.image import has_image, image_tag
from skald.sandbox.network import docker_subnets, free_subnets, host_routes, pool_conflict
from skald.sandbox.procs import new_mark, run_killer
from skald.store.rows import Role, User

log = get_logger("skald.sandbox")

T = TypeVar("T")

LABEL_INSTANCE: Final = "skald.instance"
LABEL_USER: Final = "skald.user"
LABEL_SPEC: Final = "skald.spec"
# A container or network of this instance that is no member's sandbox (a household
# connector's box) carries the boot mark of the server start that made it instead of
# `skald.user`: the reconcile at start removes those of earlier starts (a crash's).
LABEL_BOOT: Final = "skald.boot"
STOP_GRACE_S: Final = 5
# How long a caller waits for the watcher's first look at Docker (right after a start)
# before it is told the sandbox is not available.
FIRST_LOOK_WAIT_S: Final = 20.0

# What Skald's own root steps need (the start script, the process killer, setpriv to the
# member's uid with an empty bounding set, `install_packages` running apt and dpkg);
# everything else is dropped. Members' commands keep none of them (execute.py).
CAP_ADD: Final = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "SETPCAP")
SECURITY_OPT: Final = ("no-new-privileges:true",)

# Runs as root at container start: a passwd entry for the member's uid, then the idle
# main process as that uid. The uid/gid come positionally, never interpolated.
START_SCRIPT: Final = r"""set -eu
uid=$1 gid=$2
if ! getent group "$gid" >/dev/null; then groupadd -o -g "$gid" skald; fi
if ! getent passwd "$uid" >/dev/null; then
  useradd -o -M -N -u "$uid" -g "$gid" -d /home/skald -s /bin/bash skald
fi
host=$(cat /proc/sys/kernel/hostname)
# Without a network Docker leaves the hostname out of /etc/hosts; tools then complain.
if ! grep -qw -- "$host" /etc/hosts; then printf '127.0.1.1 %s\n' "$host" >> /etc/hosts; fi
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups sleep infinity
"""

SandboxState = Literal["disabled", "starting", "ok", "unreachable", "image_missing"]


REFRESH_STOP_S: Final = 15.0


class _Busy(Exception):
    """The container must be made again, but a command runs there (`ensure` waits)."""

    def __init__(self, container_id: str) -> None:
        super().__init__(container_id)
        self.container_id = container_id


class SandboxUnavailable(SkaldError):
    """The member's sandbox cannot be used right now; the message says why."""

    code = "sandbox_unavailable"


class Mount(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    target: str
    read_only: bool


class ContainerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a container is created from; its hash decides reuse or recreate."""

    name: str
    image: str
    user: str  # "uid:gid" the member's commands run as
    # "none", or the member's own bridge network (alone on it: no other sandbox sees
    # its traffic or reaches it).
    network: str
    mounts: tuple[Mount, ...]
    memory_mb: int
    pids: int
    cpus: float
    start_script: str
    cap_add: tuple[str, ...]
    security_opt: tuple[str, ...]

    @property
    def digest(self) -> str:
        raw = json.dumps(msgspec.to_builtins(self), sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:24]


def _enclosing(mounts: tuple[Mount, ...], mount: Mount) -> Mount | None:
    """The mount whose folder `mount`'s mountpoint lies in (the deepest one around it);
    None outside every mount (Docker makes it in the image's own file system)."""
    around = [m for m in mounts if mount.target.startswith(m.target + "/")]
    return max(around, key=lambda m: len(m.target), default=None)


def _ancestors(relative: str) -> list[str]:
    """`a/b/c` -> `a`, `a/b`, `a/b/c`."""
    names = relative.split("/")
    return ["/".join(names[: i + 1]) for i in range(len(names))]


def _prune(folder: Path, relative: str, wanted: set[str]) -> None:
    """Empty folders below `folder` (Skald's own folder of mountpoints) not in `wanted`."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in list(entries):
            path = f"{relative}/{entry.name}" if relative else entry.name
            if not entry.is_dir(follow_symlinks=False):
                continue
            _prune(Path(entry.path), path, wanted)
            if path not in wanted:
                with contextlib.suppress(OSError):
                    Path(entry.path).rmdir()


def _remove_empty(folder: Path) -> None:
    _prune(folder, "", set())
    with contextlib.suppress(OSError):
        folder.rmdir()


class SandboxManager:
    def __init__(
        self,
        config: SandboxConfig,
        *,
        instance_id: str,
        homes_dir: Path,
        docs_dir: Path,
        members: Callable[[], Awaitable[list[tuple[User, Role]]]],
        mounts: Callable[[User, Role], list[MemberMount]] | None = None,
        uid: int | None = None,
        gid: int | None = None,
        poll_s: float = 3.0,
        mountpoints_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.instance_id = instance_id
        self.homes_dir = homes_dir
        self.docs_dir = docs_dir
        # `<user id>/<group>/`: the read-only folder of mountpoints bound over each
        # group's name in the home (`~/shared`), Skald's own (no member writes there).
        self.mountpoints_dir = mountpoints_dir or homes_dir.parent / "mountpoints"
        self.members = members
        # The member's mounts (the runtime's: built-ins and plugins); by default the
        # built-in home and manual alone.
        self.mounts = mounts or (
            lambda user, _role: [home_mount(homes_dir / user.id), docs_mount(docs_dir)]
        )
        self.uid = os.getuid() if uid is None else uid
        self.gid = os.getgid() if gid is None else gid
        self.image = config.image or image_tag()
        self.poll_s = poll_s
        self.state: SandboxState = "starting"
        self.reason = "connecting to Docker"
        self.commands: dict[str, list[str]] = {}  # user id -> probe result
        self._client: Any = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._network_lock = threading.Lock()
        self._wake = asyncio.Event()
        # The watcher's first look: until then the state is "starting" (see `first_look`).
        self._watching = False
        self._looked = asyncio.Event()
        # Control calls and long output streams get separate pools, so a few long-running
        # commands can never hold up an `ensure` or a kill.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="skald-docker")
        self.stream_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="skald-exec")
        self.reconciled = 0  # completed reconciliations (tests wait on it)
        # Why a member's sandbox could not be made (user id -> reason), until it can.
        self.failures: dict[str, str] = {}
        # Marker group of every command of this server start; anything marked by an
        # earlier start is a crash's leftover (procs.py).
        self.boot_mark = new_mark()
        self._cleaned: set[str] = set()  # containers swept of leftovers this boot
        self.pool_problem: str | None = None  # the address pool against the host routes
        # Commands running per member (`running`): a container whose mounts changed is
        # made again only once none runs there (never in the middle of one).
        self._running: dict[str, int] = {}
        self._idle: dict[str, asyncio.Event] = {}
        self._refreshes: set[asyncio.Task[None]] = set()  # `refresh`, awaited at close

    # -- plumbing -----------------------------------------------------------------------

    def container_name(self, user_id: str) -> str:
        return f"skald-{self.instance_id}-{user_id}"

    def network_name(self, user_id: str) -> str:
        """The member's own bridge network."""
        return f"skald-{self.instance_id}-{user_id}-net"

    @property
    def exec_user(self) -> str:
        return f"{self.uid}:{self.gid}"

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking SDK call in the control pool; a lost daemon becomes a state."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))
        except Exception as exc:
            if _is_connection_error(exc):
                self._lost(f"Docker is not reachable: {_brief(exc)}")
                raise SandboxUnavailable(self.unavailable_message()) from None
            raise

    def client(self) -> Any:
        if self._client is None or self.state == "unreachable":
            raise SandboxUnavailable(self.unavailable_message())
        return self._client

    def unavailable_message(self) -> str:
        if self.state == "image_missing":
            return (
                f"the sandbox is not ready: its image {self.image} is missing "
                "(an administrator can build it with `skald image build`)"
            )
        return f"the sandbox is not available right now ({self.reason}); try again later"

    def _lost(self, reason: str) -> None:
        if self.state != "unreachable":
            log.warning("docker unreachable", reason=reason)
        self.state = "unreachable"
        self.reason = reason
        self._wake.set()

    def health_reasons(self) -> list[str]:
        if self.state == "disabled":
            return []
        if self.state == "image_missing":
            return [f"sandbox image {self.image} is missing: run `skald image build`"]
        if self.state != "ok":
            return [f"sandboxes unavailable: {self.reason}"]
        reasons = [] if self.pool_problem is None else [self.pool_problem]
        # Public endpoint: how many members and why, never who.
        counts: dict[str, int] = {}
        for reason in self.failures.values():
            counts[reason] = counts.get(reason, 0) + 1
        return reasons + [
            f"the sandbox of {n} member(s) could not be made: {reason}"
            for reason, n in sorted(counts.items())
        ]

    # -- the spec -------------------------------------------------------------------------

    def spec_for(
        self, user: User, role: Role, mounts: list[MemberMount] | None = None
    ) -> ContainerSpec:
        mounts = self.mounts(user, role) if mounts is None else mounts
        return self.confined(
            name=self.container_name(user.id),
            network="none"
            if role.attributes.sandbox_network == "none"
            else self.network_name(user.id),
            # Every mount of the member that has both a host folder and a container path,
            # and a read-only folder of mountpoints over each group's name (`~/shared`:
            # nothing lands in the home's own folder of that name, which the file tools
            # never show), the home first (Docker mounts in order: nested ones after).
            mounts=tuple(
                sorted(
                    [
                        *(
                            Mount(
                                source=str(m.host_path),
                                target=m.container_path,
                                read_only=m.read_only,
                            )
                            for m in mounts
                            if m.host_path is not None and m.container_path is not None
                        ),
                        *(
                            Mount(
                                source=str(self.mountpoints_dir / user.id / group),
                                target=f"{CONTAINER_HOME}/{group}",
                                read_only=True,
                            )
                            for group in GROUPS
                        ),
                    ],
                    key=lambda m: m.target,
                )
            ),
            start_script=START_SCRIPT,
        )

    def confined(
        self, *, name: str, network: str, mounts: tuple[Mount, ...], start_script: str
    ) -> ContainerSpec:
        """A container of this instance (a member's sandbox, a household connector's
        box): the runtime image and user, the configured limits, and the same dropped
        capabilities and `no-new-privileges` for every one."""
        return ContainerSpec(
            name=name,
            image=self.image,
            user=self.exec_user,
            network=network,
            mounts=mounts,
            memory_mb=self.config.memory_mb,
            pids=self.config.pids,
            cpus=self.config.cpus,
            start_script=start_script,
            cap_add=CAP_ADD,
            security_opt=SECURITY_OPT,
        )

    def _write_mount_files(self, mounts: list[MemberMount]) -> None:
        # A mount's own files (a signpost's README), written afresh at every ensure.
        for m in mounts:
            if m.files and m.host_path is not None:
                m.host_path.mkdir(mode=0o755, parents=True, exist_ok=True)
                with walk.opened(m.host_path) as fd:
                    for name, text in m.files:
                        walk.write_file_at(fd, name, text.encode("utf-8"), 0o644)

    def _prepare_host_dirs(self, spec: ContainerSpec) -> None:
        # Made by us before Docker sees them: Docker would create missing bind sources
        # (and mountpoints inside the home, such as docs) owned by root.
        # A mount point is made in the mount it lies in (the home, or a group's folder
        # of mountpoints: `shared/photos` in the one bound at ~/shared), by descriptor:
        # the member may have put a link in the home (`walk.makedirs_at` refuses it with
        # ELOOP instead of following it).
        home = next(m for m in spec.mounts if m.target == CONTAINER_HOME)
        # The groups' names must be folders there (the mountpoints of their folders of
        # mountpoints): what older versions let the member keep there moves aside.
        if Path(home.source).parent == self.homes_dir:
            move_out_of_home_groups(self.homes_dir, Path(home.source).name)
        for m in spec.mounts:
            mode = 0o755 if self._is_mountpoints(m) else 0o700
            Path(m.source).mkdir(mode=mode, parents=True, exist_ok=True)
            outer = _enclosing(spec.mounts, m)
            if outer is None:
                continue
            inner = m.target[len(outer.target) + 1 :]
            try:
                with walk.opened(Path(outer.source)) as fd:
                    os.close(walk.makedirs_at(fd, inner.split("/")))
            except OSError as exc:
                shown = m.target.replace(CONTAINER_HOME, "~", 1)
                raise SandboxUnavailable(
                    f"{shown} in your home is a symbolic link or not a folder "
                    f"({exc.strerror}); remove it (Files page) and try again"
                ) from None

    def _is_mountpoints(self, mount: Mount) -> bool:
        return Path(mount.source).parent.parent == self.mountpoints_dir

    def _prune_mountpoints(self, spec: ContainerSpec) -> None:
        """Remove the mountpoints no mount of `spec` needs any more (a folder whose
        access was revoked) from the groups' folders of mountpoints. Only while no
        container of the member exists: removing a folder another mount namespace
        mounts on detaches that mount there."""
        for group in (m for m in spec.mounts if self._is_mountpoints(m)):
            wanted = {
                part
                for m in spec.mounts
                if m.target.startswith(group.target + "/")
                for part in _ancestors(m.target[len(group.target) + 1 :])
            }
            _prune(Path(group.source), "", wanted)

    # -- ensure / stop / remove -----------------------------------------------------------

    def _lock(self, user_id: str) -> asyncio.Lock:
        return self._locks.setdefault(user_id, asyncio.Lock())

    async def first_look(self) -> None:
        """While the watcher has not yet looked at Docker (the first moments after a
        start: it looks once the web app is built), wait for that look, so a call then
        is not refused with "connecting to Docker". Bounded; without a watcher (tests
        that drive `check` themselves) there is nothing to wait for."""
        if self.state == "starting" and self._watching:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._looked.wait(), FIRST_LOOK_WAIT_S)

    async def ensure(self, user: User, role: Role, *, wait: bool = True) -> str:
        """The member's container, running and matching its spec; returns its id."""
        if not user.active:
            raise SandboxUnavailable(f"{user.username}'s account is deactivated")
        await self.first_look()
        client = self.client()
        mounts = self.mounts(user, role)
        spec = self.spec_for(user, role, mounts)
        async with self._lock(user.id):
            await asyncio.to_thread(self._prepare_host_dirs, spec)
            await asyncio.to_thread(self._write_mount_files, mounts)
            try:
                container_id = await self._ensure_between_commands(client, spec, user.id, wait)
            except SandboxUnavailable as exc:
                if self.state == "ok":  # the daemon is fine: this member's sandbox is not
                    self.failures[user.id] = str(exc)
                raise
            except Exception as exc:
                if _is_connection_error(exc):
                    raise
                reason = f"Docker refused to make it: {_brief(exc)}"
                self.failures[user.id] = reason
                log.error("sandbox ensure failed", user_id=user.id, error=reason)
                raise SandboxUnavailable(f"your sandbox could not be made ({reason})") from None
            self.failures.pop(user.id, None)
            if user.id not in self._cleaned:
                await self._kill_stale(client, user.id, container_id)
            return container_id

    async def _ensure_between_commands(
        self, client: Any, spec: ContainerSpec, user_id: str, wait: bool
    ) -> str:
        """`_ensure_blocking`, but a container that must be made again while a command
        runs there is kept until the member's commands end (`wait`), or kept as it is
        for now (`wait=False`: reconciliation, which comes back later)."""
        while True:
            busy = bool(self._running.get(user_id))
            try:
                return await self.call(self._ensure_blocking, client, spec, user_id, busy)
            except _Busy as kept:
                if not wait:
                    return kept.container_id
                log.info("sandbox remade once its commands end", user_id=user_id)
                await self._idle.setdefault(user_id, asyncio.Event()).wait()

    def refresh(self, user_id: str, fetch: Callable[[str], Awaitable[tuple[User, Role]]]) -> None:
        """The member's mounts changed (a shared folder, a project): make their container
        again in the background, once their running commands end (`ensure` waits). A
        member without a container gets the new mounts with their first one."""
        task = asyncio.get_running_loop().create_task(self._refresh(user_id, fetch))
        self._refreshes.add(task)
        task.add_done_callback(self._refreshes.discard)

    async def _refresh(
        self, user_id: str, fetch: Callable[[str], Awaitable[tuple[User, Role]]]
    ) -> None:
        try:
            user, role = await fetch(user_id)
            if not user.active or await self.container_id(user_id) is None:
                return
            # Without sandbox.exec the watcher keeps no container (Runtime's member list).
            if user.id in {u.id for u, _ in await self.members() if u.active}:
                await self.ensure(user, role)
        except Exception as exc:
            log.warning("sandbox not remade yet", user_id=user_id, error=_brief(exc))

    async def refreshed(self, timeout_s: float | None = None) -> None:
        """Wait for the refreshes started so far (tests; `close`, bounded there)."""
        if self._refreshes:
            _, late = await asyncio.wait(set(self._refreshes), timeout=timeout_s)
            for task in late:
                task.cancel()

    @contextlib.asynccontextmanager
    async def running(self, user: User, role: Role) -> AsyncIterator[str]:
        """The member's container, counted as busy while the block runs a command in it:
        a change of mounts meanwhile waits for the block to end."""
        container_id = await self.ensure(user, role)
        # No await between the ensure and the count: nothing can remake it in between.
        self._running[user.id] = self._running.get(user.id, 0) + 1
        self._idle.setdefault(user.id, asyncio.Event()).clear()
        try:
            yield container_id
        finally:
            left = self._running.pop(user.id, 1) - 1
            if left:
                self._running[user.id] = left
            else:
                self._idle[user.id].set()

    async def _kill_stale(self, client: Any, user_id: str, container_id: str) -> None:
        """First use since this server started: a crash may have left commands running;
        none of them may outlive it (they are no call's any more). A failure here is
        logged and tried again at the next use, never the member's command's failure."""
        try:
            killed = await self.call(run_killer, client, container_id, "stale", self.boot_mark)
        except SandboxUnavailable:
            raise
        except Exception as exc:
            log.warning("leftovers of a crash not swept yet", user_id=user_id, error=_brief(exc))
            return
        if killed:
            log.warning("killed commands left by a crash", user_id=user_id, n=killed)
        self._cleaned.add(user_id)

    def _ensure_blocking(
        self, client: Any, spec: ContainerSpec, user_id: str, busy: bool = False
    ) -> str:
        import docker.errors

        try:
            container = client.containers.get(spec.name)
        except docker.errors.NotFound:
            container = None
        if container is not None:
            labels = container.labels or {}
            if labels.get(LABEL_INSTANCE) != self.instance_id:
                raise SandboxUnavailable(
                    f"a container named {spec.name} exists but is not this Skald's; "
                    "remove or rename it"
                )
            if labels.get(LABEL_SPEC) == spec.digest and container.status in (
                "running",
                "created",
                "exited",
                "paused",  # by the storage guard: it stays so until the disk has room
            ):
                if container.status in ("created", "exited"):
                    container.start()
                return str(container.id)
            if busy and container.status in ("running", "paused"):
                raise _Busy(str(container.id))  # a command runs there: not now
            log.info(
                "recreating sandbox",
                container=spec.name,
                status=container.status,
                drifted=labels.get(LABEL_SPEC) != spec.digest,
            )
            container.remove(force=True)
        if not has_image(client, spec.image):
            self.state = "image_missing"
            raise SandboxUnavailable(self.unavailable_message())
        if spec.network != "none":
            self.ensure_network(client, spec.network, {LABEL_USER: user_id})
        self._prune_mountpoints(spec)  # no container of the member exists here
        created = self.create_container(client, spec, {LABEL_USER: user_id})
        created.start()
        log.info("sandbox created", container=spec.name, id=created.short_id)
        return str(created.id)

    def ensure_network(self, client: Any, name: str, owner: dict[str, str]) -> None:
        """A bridge of its own (a member's, or a box's: `owner` labels say whose), with an
        explicit subnet from Skald's pool."""
        # Docker accepts two networks of one name: ensures must not race.
        with self._network_lock:
            self._ensure_network_locked(client, name, owner)

    def _ensure_network_locked(self, client: Any, name: str, owner: dict[str, str]) -> None:
        import docker.errors
        import docker.types

        found = client.networks.list(names=[name], filters={"label": self._label()})
        if any(n.name == name for n in found):
            return
        pool = ipaddress.IPv4Network(self.config.subnet_pool)
        routes = host_routes()
        conflict = pool_conflict(pool, routes)
        if conflict is not None:
            raise SandboxUnavailable(conflict)
        taken = docker_subnets(client.networks.list()) + [r.net for r in routes]
        for subnet in free_subnets(pool, self.config.subnet_prefix, taken):
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=str(subnet[1]))]
            )
            try:
                client.networks.create(
                    name,
                    driver="bridge",
                    ipam=ipam,
                    options={"com.docker.network.bridge.enable_icc": "false"},
                    labels={LABEL_INSTANCE: self.instance_id, **owner},
                    check_duplicate=True,
                )
            except docker.errors.APIError as exc:
                if "overlap" in str(exc).lower():
                    continue  # taken a moment ago (another instance): the next one
                raise
            log.info("sandbox network created", network=name, subnet=str(subnet))
            return
        raise SandboxUnavailable(
            f"the sandbox address pool {pool} is exhausted (no free /"
            f"{self.config.subnet_prefix} left); an administrator can widen "
            "[sandbox] subnet_pool"
        )

    def _label(self) -> str:
        return f"{LABEL_INSTANCE}={self.instance_id}"

    def create_container(
        self, client: Any, spec: ContainerSpec, owner: dict[str, str], **extra: Any
    ) -> Any:
        """Create (not start) a container from `spec`, labelled with this instance, the
        spec's digest and `owner` (`skald.user`, or `skald.boot` for a box). `extra`:
        more of Docker's create options (a box's read-only root and scratch tmpfs)."""
        from docker.types import Mount as DockerMount

        uid, gid = spec.user.split(":")
        return client.containers.create(
            spec.image,
            command=["sh", "-c", spec.start_script, "skald-start", uid, gid],
            name=spec.name,
            labels={LABEL_INSTANCE: self.instance_id, LABEL_SPEC: spec.digest, **owner},
            user="0:0",
            environment={"HOME": CONTAINER_HOME, "USER": "skald", "LANG": "C.UTF-8"},
            working_dir=CONTAINER_HOME,
            init=True,
            restart_policy={"Name": "unless-stopped"},
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",
            pids_limit=spec.pids,
            nano_cpus=int(spec.cpus * 1e9),
            cap_drop=["ALL"],
            cap_add=list(spec.cap_add),
            security_opt=list(spec.security_opt),
            network_mode=spec.network if spec.network == "none" else None,
            network=None if spec.network == "none" else spec.network,
            mounts=[
                DockerMount(m.target, m.source, type="bind", read_only=m.read_only)
                for m in spec.mounts
            ],
            stdin_open=False,
            tty=False,
            **extra,
        )

    async def container_id(self, user_id: str) -> str | None:
        """The member's container id if it exists (no create)."""
        import docker.errors

        client = self.client()

        def get() -> str | None:
            try:
                return str(client.containers.get(self.container_name(user_id)).id)
            except docker.errors.NotFound:
                return None

        return await self.call(get)

    async def stop(self, user_id: str) -> None:
        """Deactivation: nothing of the member's runs, and their network and its
        addresses go back to the pool. The same as `remove`: a reactivated member gets
        a fresh container (the home is on the host and stays)."""
        await self.remove(user_id)

    async def remove(self, user_id: str) -> None:
        """Remove the member's container and network (deactivated or deleted)."""
        await self._on_container(user_id, lambda c: c.remove(force=True))
        await self.call(self._remove_networks, self.client(), {user_id})
        # Their folders of mountpoints (empty folders only; made again at the next ensure).
        await asyncio.to_thread(_remove_empty, self.mountpoints_dir / user_id)
        self.commands.pop(user_id, None)
        self.failures.pop(user_id, None)
        self._cleaned.discard(user_id)

    def _remove_networks(
        self, client: Any, users: set[str] | None, keep: Collection[str] = ()
    ) -> None:
        """Remove this instance's networks of `users` (None: every one not in `keep`,
        the old shared one included). One still in use stays, for the next sweep."""
        import docker.errors

        for network in client.networks.list(filters={"label": self._label()}):
            labels = network.attrs.get("Labels") or {}
            # A box's network goes with its box; here only when a crash left it.
            if LABEL_BOOT in labels and (
                users is not None or labels[LABEL_BOOT] == str(self.boot_mark)
            ):
                continue
            owner = labels.get(LABEL_USER)
            if (users is not None and owner not in users) or (users is None and owner in keep):
                continue
            try:
                network.remove()
                log.info("sandbox network removed", network=network.name)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                log.warning("sandbox network still in use", network=network.name, error=_brief(exc))

    async def _on_container(self, user_id: str, action: Callable[[Any], object]) -> None:
        import docker.errors

        client = self.client()

        def run() -> None:
            for container in self._own(client, user_id):
                with contextlib.suppress(docker.errors.NotFound):
                    action(container)

        async with self._lock(user_id):
            await self.call(run)

    def _own(self, client: Any, user_id: str | None = None) -> list[Any]:
        """This instance's members' sandboxes (all of them, or one member's); boxes are
        not among them (no `skald.user` label)."""
        labels = [f"{LABEL_INSTANCE}={self.instance_id}"]
        labels.append(LABEL_USER if user_id is None else f"{LABEL_USER}={user_id}")
        return list(client.containers.list(all=True, filters={"label": labels}))

    async def pause_all(self) -> int:
        """Freeze every running container of this instance (the disk is nearly full)."""
        return await self._each_own("running", lambda c: c.pause())

    async def unpause_all(self) -> int:
        """Thaw the containers `pause_all` froze."""
        return await self._each_own("paused", lambda c: c.unpause())

    async def _each_own(self, status: str, action: Callable[[Any], object]) -> int:
        import docker.errors

        client = self.client()

        def run() -> int:
            done = 0
            for container in self._own(client):
                if container.status == status:
                    with contextlib.suppress(docker.errors.NotFound):
                        action(container)
                        done += 1
            return done

        return await self.call(run)

    # -- reconciliation and the watcher ---------------------------------------------------

    async def reconcile(self) -> None:
        """Every active member's container as it should be; others' removed."""
        members = await self.members()
        active = {user.id for user, _ in members if user.active}
        for user, role in members:
            if not user.active:
                continue
            try:
                await self.ensure(user, role, wait=False)
            except SandboxUnavailable:
                if self.state != "ok":
                    raise  # the daemon or the image: nobody's sandbox can be made
                # This member's alone (recorded in `failures`): the others still get theirs.
            except Exception as exc:
                log.error("sandbox ensure failed", user_id=user.id, error=_brief(exc))
        networked = {
            user.id
            for user, role in members
            if user.active and role.attributes.sandbox_network != "none"
        }
        await self.sweep(active, networked)
        self.reconciled += 1

    async def sweep(self, active: set[str], networked: set[str] | None = None) -> None:
        """Remove the containers of members not active (deactivated, deleted, unknown),
        the networks of members who should have none, and the boxes (and networks) an
        earlier server start left (`skald.boot`; this instance's label only)."""
        client = self.client()

        def run() -> None:
            for container in self._own(client):
                owner = (container.labels or {}).get(LABEL_USER, "")
                if owner not in active:
                    log.info("removing sandbox of an inactive member", container=container.name)
                    container.remove(force=True)
            boxes = client.containers.list(all=True, filters={"label": [self._label(), LABEL_BOOT]})
            for container in boxes:
                if (container.labels or {}).get(LABEL_BOOT) != str(self.boot_mark):
                    log.info("removing a box left by an earlier start", container=container.name)
                    container.remove(force=True)
            self._remove_networks(client, None, keep=active if networked is None else networked)

        await self.call(run)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        if self._client is None:
            self._client = await loop.run_in_executor(self._pool, connect, self.config.docker_host)
        else:
            await loop.run_in_executor(self._pool, self._client.ping)

    async def check(self) -> bool:
        """One look at the daemon and the image; True when the sandbox just came back."""
        try:
            return await self._check()
        finally:
            self._looked.set()

    async def _check(self) -> bool:
        was = self.state
        try:
            await self._connect()
            present = await self.call(has_image, self._client, self.image)
        except DockerUnavailable as exc:
            self._lost(str(exc))
            return False
        except SandboxUnavailable:
            return False  # `call` has recorded the reason
        except Exception as exc:
            self._lost(_brief(exc))
            return False
        if not present:
            if self.state != "image_missing":
                log.warning("sandbox image missing", image=self.image)
            self.state = "image_missing"
            self.reason = f"image {self.image} is missing"
            return False
        if was != "ok":
            log.info("docker reachable", image=self.image)
        self.state = "ok"
        self.reason = ""
        # Known before any member needs a network (a route may appear later: a VPN).
        self.pool_problem = await asyncio.to_thread(self._pool_problem)
        return was != "ok"

    def _pool_problem(self) -> str | None:
        pool = ipaddress.IPv4Network(self.config.subnet_pool)
        return pool_conflict(pool, host_routes())

    async def watch_forever(self, after: asyncio.Event | None = None) -> None:
        """Supervised service: poll the daemon, reconcile at start and after each outage.
        `after`: the first look waits for it (the server sets it once the web app is
        built, so the Docker SDK's import and the ping do not slow the start down);
        callers meanwhile wait in `first_look`."""
        self._watching = True
        if after is not None:
            await after.wait()
        backoff = self.poll_s
        while True:
            came_back = await self.check()
            if came_back:
                try:
                    await self.reconcile()
                    backoff = self.poll_s
                except SandboxUnavailable:
                    pass
            if self.state == "ok":
                backoff = self.poll_s
            else:
                backoff = min(max(backoff * 2, self.poll_s), 30.0)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=backoff)
                # Woken by a failed call: give the daemon a moment before looking again.
                await asyncio.sleep(min(1.0, self.poll_s))
            except TimeoutError:
                pass

    async def close(self) -> None:
        # A refresh half-way through a Docker call cannot be cancelled: let it finish.
        await self.refreshed(timeout_s=REFRESH_STOP_S)
        # A control call already running (a container being created) cannot be cancelled
        # either: wait for it (bounded), so nothing of this manager's lands after `close`
        # returns, when whoever closed it may be removing its containers. Calls not
        # started yet are dropped; output streams (long commands) are not waited for.
        self.stream_pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True),
                REFRESH_STOP_S,
            )
        if self._client is not None:
            client, self._client = self._client, None
            await asyncio.to_thread(client.close)


def _is_connection_error(exc: BaseException) -> bool:
    import docker.errors
    import requests.exceptions

    if isinstance(exc, requests.exceptions.ConnectionError | ConnectionError):
        return True
    if isinstance(exc, docker.errors.APIError):
        return False
    return isinstance(exc, docker.errors.DockerException) and "Connection" in str(exc)


def _brief(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    for marker, short in (
        ("FileNotFoundError", "no socket (is the daemon running?)"),
        ("ConnectionRefusedError", "connection refused (is the daemon running?)"),
        ("Connection aborted", "connection lost"),
    ):
        if marker in text:
            return short
    return text[:300]
