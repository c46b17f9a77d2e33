"""Sandbox: `execute_cmd` in the member's container, and the commands found there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl, lazy
from skald.sandbox.execute import commands_block
from skald.sandbox.tool import SANDBOX_EXEC, ExecuteCmdTool, InstallPackagesTool

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.plugins.facade import Member, Server
    from skald.sandbox.manager import SandboxManager


def _sandbox(member: Member) -> SandboxManager | None:
    # The manager as it was when the member unlocked (None before it is built), and
    # only for members holding `sandbox.exec`.
    sandbox = member.sandbox
    return sandbox if sandbox is not None and member.can(SANDBOX_EXEC) else None


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    # Only with sandboxes on; an exec checks the account is still active (member.fetch).
    sandbox = _sandbox(member)
    if sandbox is None:
        return None
    return [
        ExecuteCmdTool(sandbox, member.fetch, member.budget),
        InstallPackagesTool(sandbox, member.fetch),
    ]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"SANDBOX_COMMANDS": "the commands found in the member's sandbox (commands_block)"}


@hookimpl
def skald_prompt_blocks(member: Member) -> dict[str, str]:
    sandbox = _sandbox(member)
    if sandbox is None:
        return {"SANDBOX_COMMANDS": ""}
    return {"SANDBOX_COMMANDS": commands_block(sandbox.commands.get(member.id, []))}


skald_capabilities = lazy.capabilities("skald.sandbox.tool:SANDBOX_EXEC")


@hookimpl
def skald_services(server: Server) -> list[ServiceSpec]:
    # Docker may be down: the watcher keeps trying, the server runs regardless.
    sandbox = server.sandbox
    if sandbox is None:
        return []
    # The first look (the Docker SDK's import, a ping, reconciliation) once the web app
    # is built: it would otherwise share the start's one core (the GIL).
    return [
        ServiceSpec("sandbox-watcher", lambda: sandbox.watch_forever(server.app_built), order=50)
    ]
