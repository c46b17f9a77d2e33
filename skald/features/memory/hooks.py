"""Memory: the two note stores (virtual mounts), the note tools, the memory indexes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.core.prompt_blocks import memory_index_block
from skald.files.mounts import MemberMount, note_mounts
from skald.permissions import can
from skald.plugins import hookimpl
from skald.store.migrations import Feature
from skald.store.migrations.owner import MEMORY
from skald.store.migrations.registry import SHARED_MEMORY
from skald.tools.memory import memory_indexes, memory_tools

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.core.user_runtime import UserRuntime
    from skald.permissions import Capability


@hookimpl
def skald_migrations(schema: str) -> list[Feature]:
    return [SHARED_MEMORY] if schema == "registry" else [MEMORY]


@hookimpl
def skald_mounts() -> list[MemberMount]:
    return note_mounts()


@hookimpl
def skald_tools(member: UserRuntime) -> list[Tool] | None:
    from skald.files.tools import FILES

    if can(member.role, FILES):
        return None  # the file tools reach the notes too (the files feature)
    return memory_tools(
        member.handle.store,
        member.shared,
        member.user.id,
        shared_readable=member.shared_readable,
        budget=member.budget,
    )


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "USER_MEMORY_INDEX": "the member's user-memory/index.md (memory_index_block)",
        "SHARED_MEMORY_INDEX": "the household's shared-memory/index.md (memory_index_block)",
    }


@hookimpl
async def skald_prompt_blocks(member: UserRuntime) -> dict[str, str]:
    user_index, shared_index = await memory_indexes(member.handle.store, member.shared)
    return {
        "USER_MEMORY_INDEX": memory_index_block("user-memory", user_index),
        "SHARED_MEMORY_INDEX": (
            memory_index_block("shared-memory", shared_index) if member.shared_readable else ""
        ),
    }


@hookimpl
def skald_capabilities() -> list[Capability]:
    # Importing the module that enforces a capability declares it.
    from skald.tools.memory import MEMORY_SHARED

    return [MEMORY_SHARED]
