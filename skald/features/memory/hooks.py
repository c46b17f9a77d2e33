"""Memory: the two note stores (virtual mounts), the note tools, the memory indexes."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from skald.core.prompt_blocks import memory_index_block
from skald.files.mounts import MemberMount, note_mounts
from skald.files.tools import memory_tools
from skald.plugins import hookimpl, lazy
from skald.store.note_paths import INDEX_NOTE
from skald.store.notes import PRIVATE_NOTES, SHARED_NOTES, KeptNotes
from skald.store.owner import OwnerStore
from skald.tools.memory import MEMORY_SHARED

if TYPE_CHECKING:
    from skald.agent.tools import Tool
    from skald.plugins.facade import Member, Server


skald_migrations = lazy.migrations(
    registry=("skald.store.migrations.registry:SHARED_MEMORY",),
    owner=("skald.store.migrations.owner:MEMORY",),
)


@hookimpl
def skald_mounts() -> list[MemberMount]:
    return note_mounts()


@hookimpl
def skald_tools(member: Member) -> list[Tool] | None:
    from skald.files.tools import FILES

    if member.can(FILES):
        return None  # the file tools reach the notes too (the files feature)
    return memory_tools(
        OwnerStore(member.db),
        member.server.shared_memory,
        member.id,
        shared_readable=member.can(MEMORY_SHARED),
        budget=member.budget,
        mounts=member.router.member_mounts,
    )


@hookimpl
def skald_placeholders() -> dict[str, str]:
    return {
        "USER_MEMORY_INDEX": "the member's user-memory/index.md (memory_index_block)",
        "SHARED_MEMORY_INDEX": "the household's shared-memory/index.md (memory_index_block)",
    }


@hookimpl
def skald_server_state(server: Server) -> list[object]:
    # The household's index, as each turn's prompt shows it (kept between turns).
    return [KeptNotes(server.db, SHARED_NOTES)]


@hookimpl
def skald_member_state(member: Member) -> list[object]:
    # The member's own index, likewise (their database's writes are counted).
    return [KeptNotes(member.db, PRIVATE_NOTES)]


@hookimpl
async def skald_prompt_blocks(member: Member) -> dict[str, str]:
    mine, household = member.state(KeptNotes), member.server.state(KeptNotes)
    user_index, shared_index = mine.now(INDEX_NOTE), household.now(INDEX_NOTE)
    if user_index is None or shared_index is None:
        # Two databases, two threads: read both at once (two tasks only when needed).
        user_index, shared_index = await asyncio.gather(
            mine.text(INDEX_NOTE), household.text(INDEX_NOTE)
        )
    return {
        "USER_MEMORY_INDEX": memory_index_block("user-memory", user_index),
        "SHARED_MEMORY_INDEX": (
            memory_index_block("shared-memory", shared_index) if member.can(MEMORY_SHARED) else ""
        ),
    }


skald_capabilities = lazy.capabilities("skald.tools.memory:MEMORY_SHARED")
