"""Ask: the assistant asks the member a question through the Inbox (`ask_user`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.user_runtime import UserRuntime


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool]:
    # One instance per member: it keeps the answers that arrive before recovery asks.
    return [member.ask]
