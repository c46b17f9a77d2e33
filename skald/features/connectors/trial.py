"""The Add form's **Test**: start an item that is not saved yet, list its tools, stop it.

Rule: the trial runs with the isolation a real instance of the item would get, through
the supervisor's own launch code: a personal item in the administrator's own container
(dependencies installed there, as a member's first start does), a household stdio item
in a box of its own (or on the host when the operator chose `household_on_host`), a URL
item from the host. Its files sit in a throwaway folder named `t-<random>` (and so does
its box), so a trial never touches an installed connector of the same name.

Trap: the secret values typed for a trial are used once and never stored; every text
that goes back (the error, stderr lines) is scrubbed of them first.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
from typing import TYPE_CHECKING

import msgspec

from skald.errors import ConflictError, InvalidInputError, SkaldError
from skald.features.connectors.feed import Manifest
from skald.features.connectors.install import _write_folder, deps_hash
from skald.features.connectors.redact import redact
from skald.features.connectors.shapes import TrialOut, TrialTool
from skald.features.connectors.store import Connector
from skald.mcp import HttpTransport, McpError, StdioTransport, Timeouts, Transport, connect
from skald.store.registry import now_iso

if TYPE_CHECKING:
    from skald.features.connectors.service import Connectors
    from skald.features.connectors.supervisor import Launch

TRIAL_TIMEOUT_S = 600.0  # a first in-container npm install is minutes on a slow line
STDERR_LINES = 20


async def trial(
    c: Connectors,
    admin_id: str,
    manifest: Manifest,
    files: dict[str, bytes],
    given: dict[str, str],
) -> TrialOut:
    """Start, list, stop. A server that does not start is an answer (`ok: false` and
    why), not an error of the request."""
    sup = c.supervisor
    if sup is None:
        raise ConflictError("connectors are not running on this server")
    personal_stdio = manifest.scope == "personal" and manifest.transport == "stdio"
    if personal_stdio and admin_id not in sup.members:
        raise ConflictError("your data is locked: sign in again to test a connector")
    values = list(given.values())
    folder = await asyncio.to_thread(_write_folder, c.root / ".trials", files)
    hashed = deps_hash(manifest.dependencies, files) if manifest.dependencies else None
    row = Connector(
        name=f"t-{secrets.token_hex(6)}",
        display_name=manifest.display_name,
        description="",
        icon="",
        feed_version=1,
        transport=manifest.transport,
        manifest={**msgspec.to_builtins(manifest), "_deps_hash": hashed},
        auth=manifest.auth.type,
        scope=manifest.scope,
        status="installed",
        install_dir=str(folder),
        last_error=None,
        last_stderr=None,
        installed_at=now_iso(),
        updated_at=now_iso(),
    )
    from skald.features.connectors.supervisor import ConnectorInstance

    inst = ConnectorInstance(sup, "" if manifest.scope == "household" else admin_id, row)
    inst.secrets = values
    transport: Transport | None = None
    launch: Launch | None = None
    try:
        async with asyncio.timeout(TRIAL_TIMEOUT_S):
            launch = await _launch(c, inst, row, manifest, hashed, given, files)
            transport = _transport(launch)
            session = await connect(
                transport, name=manifest.name, timeouts=Timeouts(handshake=60, request=60)
            )
            try:
                tools = await session.list_tools()
            finally:
                await session.close()
        return TrialOut(
            ok=True, tools=[TrialTool(name=t.name, description=t.description or "") for t in tools]
        )
    except (InvalidInputError, ConflictError):
        raise  # the request's fault (a secret not given): a 4xx
    except (SkaldError, McpError, TimeoutError, OSError, ValueError) as exc:
        error = redact(str(exc) or type(exc).__name__, values)[:1000]
        tail = transport.stderr_tail(STDERR_LINES) if transport is not None else []
        return TrialOut(ok=False, error=error, stderr=[redact(s, values) for s in tail])
    finally:
        if launch is not None and launch.group is not None:
            with contextlib.suppress(Exception):
                await launch.group.kill()
        if inst.boxes is not None:
            await inst.boxes.remove(row.name)
        await asyncio.to_thread(shutil.rmtree, folder, True)


async def _launch(
    c: Connectors,
    inst: object,
    row: Connector,
    manifest: Manifest,
    hashed: str | None,
    given: dict[str, str],
    files: dict[str, bytes],
) -> Launch:
    from skald.features.connectors.supervisor import ConnectorInstance, http_launch

    sup = c.supervisor
    assert sup is not None and isinstance(inst, ConnectorInstance) and row.install_dir is not None
    if manifest.transport == "http":
        return http_launch(manifest, row.install_dir, given)
    if manifest.dependencies and manifest.scope == "household":
        await c.installer.install_deps_on_host(manifest.dependencies, files)
    if manifest.scope == "personal":
        return await sup._in_container(sup.members[inst.owner], row, manifest, hashed, given)
    if not c.config.household_on_host:
        return await sup._in_box(inst, row, manifest, hashed)
    return sup._on_host(row.install_dir, manifest, hashed, given)


def _transport(launch: Launch) -> Transport:
    if launch.url is not None:
        return HttpTransport(launch.url, launch.headers)
    assert launch.argv is not None
    return StdioTransport(launch.argv, launch.env, cwd=launch.cwd, start=launch.start)
