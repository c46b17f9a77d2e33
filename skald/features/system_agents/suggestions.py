"""Accepting a report's suggestion: the change becomes an approval request, never a write.

Rule: accepting makes a conversation of the caller's own ("Suggested change: <note>")
holding the edit as a call the assistant has not run yet, under a call id starting
with `SUGGESTION_CALL`, and resumes it. The call then passes the caller's approval
rules like any other: the `@suggested` category (added for that id by this feature's
`skald_approval_facts`) meets the seeded rule `default.suggested` (require), so the
request waits in the Inbox with the edit's diff; a rule that denies the note's write
still denies it. Approving runs the edit; rejecting leaves the note as it is. After a
restart the call is open in the history and recovery asks again (the id, hence the
category, is stored with it).

Who may accept: whoever may read the report (`Reader.may_read`), once per suggestion
(the first click wins; a second one, by anyone, is a 409). A reader who may not read
the report is told it does not exist, as the Reports page does.
"""

from __future__ import annotations

import secrets
from typing import Final

import msgspec

from skald.errors import InvalidInputError
from skald.features.system_agents.reports import Reader, Reports
from skald.llm.types import Message, TextPart, ToolCall
from skald.plugins.facade import Member
from skald.store.conversations import OwnerHistory

__all__ = ["SUGGESTION_CALL", "Accepted", "accept"]

SUGGESTION_CALL: Final = "suggested_"
EDIT_TOOL: Final = "edit_file"


class Accepted(msgspec.Struct, frozen=True, kw_only=True):
    conversation_id: str  # where the approval request waits (also in the Inbox)
    call_id: str


async def accept(
    member: Member, reports: Reports, reader: Reader, report_id: str, n: int
) -> Accepted:
    suggestion = await reports.suggestion(reader, report_id, n)  # NotFound: not theirs
    tools = {t.name for t in member.server.plugins.tools(member)}
    if EDIT_TOOL not in tools:
        raise InvalidInputError("your role has no tool that edits notes, so it cannot apply this")
    await reports.claim(report_id, n, member.id)  # Conflict: accepted already
    try:
        hub = member.conversations
        conversation = await hub.new_conversation(f"Suggested change: {suggestion.note}"[:200])
        history = OwnerHistory(member.db, conversation.id)
        call = ToolCall(
            id=SUGGESTION_CALL + secrets.token_hex(8),
            name=EDIT_TOOL,
            arguments={
                "path": suggestion.note,
                "old_text": suggestion.old_text,
                "new_text": suggestion.new_text,
            },
        )
        asked = f"Apply the change memory upkeep suggested for {suggestion.note}: {suggestion.text}"
        await history.append(Message(role="user", content=[TextPart(text=asked)]))
        said = f"Changing {suggestion.note} as suggested, once you approve it."
        await history.append(
            Message(role="assistant", content=[TextPart(text=said)], tool_calls=[call])
        )
        await hub.resume(conversation.id)
    except BaseException:
        await reports.accepted(report_id, n, None)  # it can be accepted again
        raise
    await reports.accepted(report_id, n, conversation.id)
    return Accepted(conversation_id=conversation.id, call_id=call.id)
