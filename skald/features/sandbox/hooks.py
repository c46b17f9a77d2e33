"""Sandbox: `execute_cmd` in the member's container, and the commands found there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.services import ServiceSpec
from skald.plugins import hookimpl
from skald.sandbox.execute import commands_block
from skald.sandbox.tool import ExecuteCmdTool, InstallPackagesTool

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.runtime import Runtime
    from skald.core.user_runtime import UserRuntime
    from skald.permissions import Capability


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool] | None:
    # Only with sandboxes on, and a way to read the member's current row (an exec checks
    # the account is still active).
    if not member.may_execute or member.sandbox is None:
        return None
    return [
        ExecuteCmdTool(member.sandbox, member.fetch_member, member.budget),
        InstallPackagesTool(member.sandbox, member.fetch_member),
    ]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"SANDBOX_COMMANDS": "the commands found in the member's sandbox (commands_block)"}


@hookimpl
def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    if not member.may_execute or member.sandbox is None:
        return {"SANDBOX_COMMANDS": ""}
    return {"SANDBOX_COMMANDS": commands_block(member.sandbox.commands.get(member.user.id, []))}


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.sandbox.tool import SANDBOX_EXEC

    return [SANDBOX_EXEC]


@hookimpl
def skald_services(runtime: Runtime) -> list[ServiceSpec]:
    # Docker may be down: the watcher keeps trying, the server runs regardless.
    sandbox = runtime.sandbox
    if sandbox is None:
        return []
    # The first look (the Docker SDK's import, a ping, reconciliation) once the web app
    # is built: it would otherwise share the start's one core (the GIL).
    return [
        ServiceSpec("sandbox-watcher", lambda: sandbox.watch_forever(runtime.app_built), order=50)
    ]
