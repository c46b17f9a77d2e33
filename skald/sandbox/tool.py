"""`execute_cmd` and `install_packages`: the agent tools that run in the member's sandbox.

Nothing ever runs on the host: without a usable container the tool fails with a clear
error. Not safe to run alongside other calls, and never re-run after a crash (its effects
are unknown): recovery reports it as interrupted instead.

Only a role holding `sandbox.exec` gets the tools (the sandbox feature's tool hook), and
each checks again before running, against the role as it is at that moment: a
capability removed while a turn runs stops the very next command.

`install_packages` is the only way to root in a sandbox (there is no sudo): Skald runs
apt-get as root with package names it has checked (no options, versions or paths), a
person approves every call whatever the rules say (`always_ask`), and afterwards the
home is scrubbed of anything root left there (execute.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from skald.agent.tools import EXEC, Tool, ToolContext, ToolResult, Touches
from skald.errors import DiskFullError, QuotaExceededError
from skald.llm.types import tool_spec
from skald.paths import CONTAINER_HOME
from skald.permissions import can, declare
from skald.quota import BudgetSource, CommandWatch
from skald.sandbox.execute import CommandResult, container_workdir, describe, run_command
from skald.sandbox.manager import SandboxManager, SandboxUnavailable
from skald.store.rows import Role, User

SANDBOX_EXEC = declare("sandbox.exec", "Let the assistant run commands in the member's sandbox")


async def in_sandbox(
    manager: SandboxManager,
    member: Callable[[], Awaitable[tuple[User, Role]]],
    refused: str,
    command: str,
    **how: Any,
) -> CommandResult | ToolResult:
    """Run `command` (`run_command`'s keyword arguments in `how`) in the member's sandbox,
    or say why not (`refused`: how the refusal starts) as the tool's error result.

    The role is read now, not when the turn began: `sandbox.exec` taken away mid-turn
    stops the very next command."""
    user, role = await member()
    if not can(role, SANDBOX_EXEC):
        return ToolResult.error(
            f"{refused}: this member's role does not allow running commands ({SANDBOX_EXEC.name})."
        )
    try:
        async with manager.running(user, role) as container_id:
            return await run_command(manager, container_id, command, **how)
    except SandboxUnavailable as exc:
        return ToolResult.error(f"{refused}: {exc}")


class ExecuteCmdTool(Tool):
    concurrency_safe = False
    kind = "exec"
    rerun_on_recovery = False

    def __init__(
        self,
        manager: SandboxManager,
        member: Callable[[], Awaitable[tuple[User, Role]]],
        budget: BudgetSource | None = None,
    ) -> None:
        self.manager = manager
        self._member = member
        # A member over quota (or a nearly full disk) gets no command at all until space
        # is freed; a running command's writes are watched (`CommandWatch`): it is
        # stopped once the member is over quota, and each of its files is capped at
        # the quota (RLIMIT_FSIZE).
        self._budget = budget
        cfg = manager.config
        self.default_timeout_s = cfg.command_timeout_s
        self.max_timeout_s = max(cfg.command_timeout_max_s, cfg.command_timeout_s)
        self.max_bytes = cfg.output_max_kb * 1024
        self.spec = tool_spec(
            "execute_cmd",
            "Run a bash command in the member's sandbox (a Linux container, home at ~ "
            f"= {CONTAINER_HOME}; only the home survives a rebuild). Output (stdout+stderr, "
            f"cut after {cfg.output_max_kb} KiB) streams to the chat. No input can be "
            f"typed. Stopped after timeout_s (default {self.default_timeout_s}).",
            {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The command line, run with bash -c.",
                },
                "workdir": {
                    "type": "string",
                    "description": "~ (default), a path under it, or absolute.",
                },
                "timeout_s": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_timeout_s,
                    "description": "Time limit in seconds.",
                },
            },
            ["command"],
        )

    def touches(self, args: Mapping[str, Any]) -> Touches:
        # What a command reaches cannot be told from its text: a category, no paths.
        return Touches(categories=frozenset({EXEC}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(args["command"])
        workdir = container_workdir(args.get("workdir"))
        timeout_s = min(int(args.get("timeout_s") or self.default_timeout_s), self.max_timeout_s)
        watch: CommandWatch | None = None
        if self._budget is not None:
            budget = await self._budget()
            try:
                await budget.recheck()
            except (QuotaExceededError, DiskFullError) as exc:
                return ToolResult.error(f"The command did not run: {exc}.")
            watch = CommandWatch(budget)
            await watch.start()
        result = await in_sandbox(
            self.manager,
            self._member,
            "The command did not run",
            command,
            workdir=workdir,
            timeout_s=timeout_s,
            max_bytes=self.max_bytes,
            on_output=ctx.output,
            max_file_bytes=0 if watch is None else watch.budget.quota,
            stop_when=None if watch is None else watch.until_over,
        )
        if watch is not None:
            await watch.settle()
        if isinstance(result, ToolResult):
            return result
        if result.stopped:
            return ToolResult.error(
                f"{describe(result, timeout_s, self.max_bytes)}\n"
                "The command was stopped and further writes are refused until space is "
                "freed: delete files you no longer need."
            )
        return ToolResult(
            content=describe(result, timeout_s, self.max_bytes),
            is_error=result.exit_code != 0,
            metadata={
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "truncated": result.truncated,
                "duration_s": result.duration_s,
                "workdir": workdir,
            },
        )


# Debian package names (policy 5.6.1), lower case; an optional :arch. No options, no
# versions, no paths: nothing but a name reaches apt-get.
PACKAGE_NAME: Final = r"^[a-z0-9][a-z0-9+.-]{1,100}(:[a-z0-9-]{1,20})?$"
MAX_PACKAGES: Final = 20


def install_command(packages: list[str]) -> str:
    names = " ".join(shlex.quote(p) for p in packages)
    return (
        "export DEBIAN_FRONTEND=noninteractive; "
        "apt-get update -qq && "
        f"apt-get install -y -q --no-install-recommends -- {names}"
    )


class InstallPackagesTool(Tool):
    concurrency_safe = False
    kind = "exec"
    rerun_on_recovery = False
    always_ask = True

    def __init__(
        self, manager: SandboxManager, member: Callable[[], Awaitable[tuple[User, Role]]]
    ) -> None:
        self.manager = manager
        self._member = member
        cfg = manager.config
        self.timeout_s = max(cfg.command_timeout_max_s, cfg.command_timeout_s)
        self.max_bytes = cfg.output_max_kb * 1024
        self.spec = tool_spec(
            "install_packages",
            "apt-get install Debian packages into the sandbox (there is no sudo; a "
            "person approves each call; they last until the sandbox is rebuilt).",
            {
                "packages": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_PACKAGES,
                    "items": {"type": "string", "pattern": PACKAGE_NAME},
                    "description": 'Debian package names, e.g. ["pandoc", "gcc"].',
                },
            },
            ["packages"],
        )

    def touches(self, args: Mapping[str, Any]) -> Touches:
        # It runs a command (as root): the exec category, so rules on `@exec` see it.
        return Touches(categories=frozenset({EXEC}))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        packages = [str(p) for p in args["packages"]]
        if (
            not packages
            or len(packages) > MAX_PACKAGES
            or not all(re.fullmatch(PACKAGE_NAME, p) for p in packages)
        ):
            return ToolResult.error("Give 1 to 20 Debian package names (no options or versions).")
        result = await in_sandbox(
            self.manager,
            self._member,
            "Nothing was installed",
            install_command(packages),
            workdir="/",
            timeout_s=self.timeout_s,
            max_bytes=self.max_bytes,
            on_output=ctx.output,
            as_root=True,
        )
        if isinstance(result, ToolResult):
            return result
        return ToolResult(
            content=describe(result, self.timeout_s, self.max_bytes),
            is_error=result.exit_code != 0,
            metadata={"exit_code": result.exit_code, "packages": packages},
        )
