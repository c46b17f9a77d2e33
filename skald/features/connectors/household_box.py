"""A household connector's own container (its "box"): third-party code from a feed that
runs once for the whole household never runs as Skald's account on the host.

Rule: one box per stdio household connector (separate containers: the simplest thing that
keeps connectors' secrets apart; each sees only its own processes). A box is made by the
sandbox manager's own code (`create_container`, `ensure_network`) from the runtime image,
with the sandboxes' limits, ALL capabilities dropped but Skald's root steps', and
no-new-privileges; the connector itself runs as the service's uid with no capability,
under a marker group (`skald/sandbox/procgroup.py`). It sees

- its own files read-only at `/connector` and its dependencies read-only at `/deps`
  (`{DIR}`, `{HOME}` and `{DEPS}` of its manifest point there); nothing of the data
  directory (no key, no database, no member's home, no other connector);
- the variables its manifest declares, given to its own process only (`docker exec -e`);
- a read-only root filesystem; `/tmp` and its `HOME` are memory-backed scratch of
  `BOX_SCRATCH_MB` each, so a box cannot fill the disk (Docker's storage is outside
  the storage guard, which pauses members' sandboxes only);
- a bridge network of its own with a subnet from the sandbox pool (the internet and the
  LAN, never a member's network nor another box's), or none when its manifest says
  `"network": false`.

Lifecycle: made (or reused, same spec and same server start) when the instance launches,
removed with its network when the instance stops (switch-off by everyone, uninstall,
update, shutdown). Labelled `skald.instance` and `skald.boot` (the server start's mark,
instead of `skald.user`), so member sweeps leave it alone and the reconcile at the next
start removes a box a crash left behind.

Trap: remote (http) household connectors stay on the host: they are only HTTP requests
from Skald. `[connectors] household_on_host = true` runs stdio household connectors on
the host as before (an operator's explicit choice for hosts without Docker): they can
then read everything Skald's account can.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from skald.log import get_logger
from skald.sandbox.manager import (
    LABEL_BOOT,
    LABEL_INSTANCE,
    LABEL_SPEC,
    ContainerSpec,
    Mount,
    SandboxUnavailable,
)

if TYPE_CHECKING:
    from skald.sandbox.manager import SandboxManager

log = get_logger("skald.features.connectors")

LABEL_CONNECTOR: Final = "skald.connector"
BOX_DIR: Final = "/connector"
BOX_DEPS: Final = "/deps"
BOX_HOME: Final = "/home/skald"
# The only writable places of a box: memory-backed, this size each (and charged to the
# box's memory limit). The root filesystem is read-only, so the box cannot fill the disk.
BOX_SCRATCH_MB: Final = 64
# The box's main process: idle, as the service's uid (no passwd entry: the root is
# read-only, and the connector runs by number).
BOX_START: Final = r"""set -eu
exec setpriv --reuid="$1" --regid="$2" --clear-groups sleep infinity
"""


def reach(scope: str, transport: str, network: bool, on_host: bool) -> str:
    """What a connector can reach, as a key the Marketplace words for administrators."""
    if transport == "http":
        return "remote"
    if scope != "household":
        return "personal"
    if on_host:
        return "host"
    return "box_network" if network else "box_offline"


class HouseholdBoxes:
    """The boxes of one server's household connectors."""

    def __init__(self, manager: SandboxManager) -> None:
        self.manager = manager

    def name(self, connector: str) -> str:
        return f"skald-{self.manager.instance_id}-connector-{connector}"

    def spec(self, connector: str, folder: str, deps: str | None, network: bool) -> ContainerSpec:
        mounts = [Mount(source=folder, target=BOX_DIR, read_only=True)]
        if deps:
            mounts.append(Mount(source=deps, target=BOX_DEPS, read_only=True))
        return self.manager.confined(
            name=self.name(connector),
            network=f"{self.name(connector)}-net" if network else "none",
            mounts=tuple(mounts),
            start_script=BOX_START,
        )

    async def ensure(self, connector: str, folder: str, deps: str | None, network: bool) -> str:
        """The connector's box, running; returns its id."""
        spec = self.spec(connector, folder, deps, network)
        client = self.manager.client()
        return await self.manager.call(self._ensure_blocking, client, spec, connector)

    def _owner(self, connector: str) -> dict[str, str]:
        return {LABEL_CONNECTOR: connector, LABEL_BOOT: str(self.manager.boot_mark)}

    def _ensure_blocking(self, client: Any, spec: ContainerSpec, connector: str) -> str:
        import docker.errors

        try:
            found = client.containers.get(spec.name)
        except docker.errors.NotFound:
            found = None
        if found is not None:
            labels = found.labels or {}
            if labels.get(LABEL_INSTANCE) != self.manager.instance_id:
                raise SandboxUnavailable(
                    f"a container named {spec.name} exists but is not this Skald's"
                )
            same = labels.get(LABEL_SPEC) == spec.digest and labels.get(LABEL_BOOT) == str(
                self.manager.boot_mark
            )
            if same and found.status == "running":
                return str(found.id)
            found.remove(force=True)  # another spec, a stopped one, or an earlier start's
        owner = self._owner(connector)
        if spec.network != "none":
            self.manager.ensure_network(client, spec.network, owner)
        created = self.manager.create_container(
            client, spec, owner, read_only=True, tmpfs=self._scratch()
        )
        created.start()
        log.info("household connector box created", container=spec.name)
        return str(created.id)

    def _scratch(self) -> dict[str, str]:
        size = f"size={BOX_SCRATCH_MB}m"
        owner = f"uid={self.manager.uid},gid={self.manager.gid},mode=0700"
        return {"/tmp": f"{size},mode=1777", BOX_HOME: f"{size},{owner}"}  # noqa: S108

    async def remove(self, connector: str) -> None:
        """The box and its network go: nothing of the connector is left running."""
        try:
            client = self.manager.client()
            await self.manager.call(self._remove_blocking, client, connector)
        except Exception as exc:  # Docker away: the next start's reconcile removes it
            log.warning(
                "household connector box not removed", connector=connector, error=str(exc)[:300]
            )

    def _remove_blocking(self, client: Any, connector: str) -> None:
        import docker.errors

        name = self.name(connector)
        labels = [f"{LABEL_INSTANCE}={self.manager.instance_id}", f"{LABEL_CONNECTOR}={connector}"]
        for container in client.containers.list(all=True, filters={"label": labels}):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        for network in client.networks.list(names=[f"{name}-net"], filters={"label": labels}):
            with contextlib.suppress(docker.errors.NotFound):
                network.remove()
