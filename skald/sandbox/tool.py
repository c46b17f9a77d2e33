"""`execute_cmd`: the agent tool that runs a shell command in the member's sandbox.

Nothing ever runs on the host: without a usable container the tool fails with a clear
error. Not safe to run alongside other calls, and never re-run after a crash (its effects
are unknown): recovery reports it as interrupted instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from skald.agent.tools import Tool, ToolContext, ToolResult
from skald.errors import DiskFullError, QuotaExceededError
from skald.llm.types import ToolSpec
from skald.quota import BudgetSource
from skald.sandbox.execute import container_workdir, describe, run_command
from skald.sandbox.manager import SandboxManager, SandboxUnavailable
from skald.store.rows import Role, User


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
        # A command's writes cannot be metered: a member over quota (or a nearly full
        # disk) gets no command at all until space is freed.
        self._budget = budget
        cfg = manager.config
        self.default_timeout_s = cfg.command_timeout_s
        self.max_timeout_s = max(cfg.command_timeout_max_s, cfg.command_timeout_s)
        self.max_bytes = cfg.output_max_kb * 1024
        self.spec = ToolSpec(
            name="execute_cmd",
            description=(
                "Run a shell command (bash) in the member's own sandbox: a Linux container "
                "with their home at ~ (/home/skald), separate from the household's machine. "
                "Output (stdout and stderr together) streams to the chat and comes back "
                f"here, cut after {cfg.output_max_kb} KiB. The command is stopped after "
                f"timeout_s seconds (default {self.default_timeout_s}). No input can be "
                "typed: use non-interactive flags. Files outside the home are lost when the "
                "sandbox is recreated."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The command line, run with bash -c.",
                    },
                    "workdir": {
                        "type": "string",
                        "description": "Directory to run in: ~ (default), a path under the "
                        "home such as ~/projects/x or projects/x, or an absolute path.",
                    },
                    "timeout_s": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.max_timeout_s,
                        "description": "Time limit in seconds.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(args["command"])
        workdir = container_workdir(args.get("workdir"))
        timeout_s = min(int(args.get("timeout_s") or self.default_timeout_s), self.max_timeout_s)
        if self._budget is not None:
            try:
                await (await self._budget()).recheck()
            except (QuotaExceededError, DiskFullError) as exc:
                return ToolResult.error(f"The command did not run: {exc}.")
        user, role = await self._member()
        try:
            container_id = await self.manager.ensure(user, role)
            result = await run_command(
                self.manager,
                container_id,
                command,
                workdir=workdir,
                timeout_s=timeout_s,
                max_bytes=self.max_bytes,
                on_output=ctx.output,
            )
        except SandboxUnavailable as exc:
            return ToolResult.error(f"The command did not run: {exc}")
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
