"""The Inbox: approval requests (and questions) waiting for the caller (capability `inbox`).

Everything resolves in the caller's own owner database: another member's item is simply
not found. The handlers see the facade only (`Server`, `Member`): the caller's pending
items through `member.inbox()`, a decision through the conversation service (it resumes
the waiting turn), an answer through the ask tool the core keeps in the member's state.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AuthRequest, group, requires
from skald.api.openapi import errors
from skald.core.ask import AskUserTool
from skald.permissions import declare
from skald.plugins.facade import Member, Server  # Litestar reads the annotations
from skald.store.inbox import InboxItem

INBOX_CAP = declare("inbox", "See and answer approval requests and questions")
# Every route's guard: the group in ROUTES gives it.
INBOX = [requires(INBOX_CAP)]


class ApproveIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Approve this and later calls of the same tool: for 15 minutes, or for the conversation.
    bypass: Literal["15m", "conversation"] | None = None


class AnswerIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    answer: Annotated[str, msgspec.Meta(max_length=10_000)]


@get("/api/inbox")
async def list_inbox(member: NamedDependency[Member]) -> list[InboxItem]:
    return await member.inbox()


@post("/api/inbox/{item_id:str}/approve", status_code=204, responses=errors(404))
async def approve(
    item_id: FromPath[str],
    request: AuthRequest,
    server: NamedDependency[Server],
    data: JSONBody[ApproveIn | None] = None,
) -> None:
    bypass = None if data is None else data.bypass
    await server.conversations.decide(request.user.user.id, item_id, True, bypass)


@post("/api/inbox/{item_id:str}/reject", status_code=204, responses=errors(404))
async def reject(
    item_id: FromPath[str], request: AuthRequest, server: NamedDependency[Server]
) -> None:
    await server.conversations.decide(request.user.user.id, item_id, False)


@post("/api/inbox/{item_id:str}/answer", status_code=204, responses=errors(400, 404))
async def answer(
    item_id: FromPath[str],
    data: JSONBody[AnswerIn],
    member: NamedDependency[Member],
) -> None:
    await member.state(AskUserTool).answer(item_id, data.answer)


ROUTES = [group(list_inbox, approve, reject, answer, guards=INBOX)]
