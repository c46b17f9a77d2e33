"""The Inbox: approval requests (and questions) waiting for the caller (capability `inbox`).

Everything resolves in the caller's own owner database: another member's item is simply
not found.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from skald.api.deps import AnyRequest, requires
from skald.api.openapi import errors
from skald.api.security import principal_of
from skald.core.runtime import Runtime
from skald.permissions import declare
from skald.store.inbox import InboxItem

INBOX_CAP = declare("inbox", "See and answer approval requests and questions")
INBOX = [requires(INBOX_CAP)]


class ApproveIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Approve this and later calls of the same tool: for 15 minutes, or for the conversation.
    bypass: Literal["15m", "conversation"] | None = None


class AnswerIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    answer: Annotated[str, msgspec.Meta(max_length=10_000)]


@get("/api/inbox", guards=INBOX)
async def list_inbox(request: AnyRequest, rt: NamedDependency[Runtime]) -> list[InboxItem]:
    mine = await rt.user_runtime(principal_of(request).user)
    return await mine.inbox.pending()


@post("/api/inbox/{item_id:str}/approve", guards=INBOX, status_code=204, responses=errors(404))
async def approve(
    item_id: FromPath[str],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
    data: JSONBody[ApproveIn | None] = None,
) -> None:
    bypass = None if data is None else data.bypass
    await rt.conversations.decide(principal_of(request).user.id, item_id, True, bypass)


@post("/api/inbox/{item_id:str}/reject", guards=INBOX, status_code=204, responses=errors(404))
async def reject(item_id: FromPath[str], request: AnyRequest, rt: NamedDependency[Runtime]) -> None:
    await rt.conversations.decide(principal_of(request).user.id, item_id, False)


@post("/api/inbox/{item_id:str}/answer", guards=INBOX, status_code=204, responses=errors(400, 404))
async def answer(
    item_id: FromPath[str],
    data: JSONBody[AnswerIn],
    request: AnyRequest,
    rt: NamedDependency[Runtime],
) -> None:
    mine = await rt.user_runtime(principal_of(request).user)
    await mine.ask.answer(item_id, data.answer)


ROUTES = [list_inbox, approve, reject, answer]
