"""Helpers: task agents the assistant hands work to (`execute_task`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.agent.subagent import SubAgentTool
from skald.core.prompt_blocks import task_agents_block
from skald.plugins import hookimpl

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.user_runtime import UserRuntime


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool]:
    # The TASK_AGENTS block describes each helper; the tool names them only (no second copy).
    helpers = {
        a.id: "" for a in sorted(member.agents.values(), key=lambda a: a.id) if a.type == "task"
    }
    return [SubAgentTool(member.child, agents=helpers)]


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {"TASK_AGENTS": "the helper agents execute_task can run (task_agents_block)"}


@hookimpl
def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    return {"TASK_AGENTS": task_agents_block(member.agents.values())}
