"""Compaction: replace the older part of a conversation with a model-written summary.

The cut is only ever placed at a boundary where no call is separated from its result:
before a message that is not a tool result, with every call made before the cut
already answered before it. Cuts before a user message are preferred (the kept part
then starts like a conversation does). The summary becomes the first message, a user
message starting with `SUMMARY_PREFIX`.

One model call, without tools, makes the summary. The caller owns the policy: when
to compact (`/compact`, or the loop's token threshold) and which model summarises.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import msgspec

from skald.agent.cancel import CancelScope
from skald.agent.history import HistoryStore, project
from skald.errors import SkaldError
from skald.llm.client import ModelClient
from skald.llm.tokens import estimate_messages
from skald.llm.types import (
    Finished,
    ImagePart,
    Message,
    Request,
    Restart,
    TextDelta,
    TextPart,
    ToolSpec,
)

SUMMARY_PREFIX = "[Summary of the earlier part of this conversation]\n"

INSTRUCTIONS = (
    "Summarise the conversation transcript below so that an assistant can continue it "
    "without the original. Keep: what the user asked for and decided, facts and names "
    "they gave, files, commands and results that matter, what was done and what is still "
    "open. Drop small talk and repetition. Write in the language of the conversation, as "
    "a compact list of points. Do not add anything that is not in the transcript.\n\n"
    "<transcript>\n{transcript}\n</transcript>"
)

RESULT_CHARS = 2000  # of each tool result in the transcript
ARGS_CHARS = 500
TRANSCRIPT_CHARS = 400_000  # the oldest part is dropped beyond this


class CompactionError(SkaldError):
    code = "compaction_failed"


class CompactionResult(msgspec.Struct, frozen=True, kw_only=True):
    dropped: int  # messages replaced by the summary
    kept: int
    summary: str


def estimate_tokens(
    messages: Iterable[Message], *, system: str = "", tools: Sequence[ToolSpec] = ()
) -> int:
    """A rough count (characters / 4) for the compaction threshold."""
    return estimate_messages(messages, system=system, tools=tools)


def safe_cuts(messages: Sequence[Message]) -> list[int]:
    """Indexes `i` where `messages[:i]` / `messages[i:]` keeps every call with its result."""
    cuts: list[int] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if i > 0 and m.role != "tool" and not open_calls:
            cuts.append(i)
        open_calls.update(c.id for c in m.tool_calls)
        if m.role == "tool" and m.tool_call_id is not None:
            open_calls.discard(m.tool_call_id)
    return cuts


def choose_cut(messages: Sequence[Message], keep_last_n: int) -> int:
    """Where to cut so that at least `keep_last_n` messages stay; 0 when nothing to do."""
    limit = len(messages) - max(keep_last_n, 0)
    cuts = [i for i in safe_cuts(messages) if i <= limit]
    if not cuts:
        return 0
    at_user = [i for i in cuts if messages[i].role == "user"]
    cut = at_user[-1] if at_user else cuts[-1]
    if cut == 1 and _is_summary(messages[0]):
        return 0  # only an earlier summary would be summarised again
    return cut


async def compact(
    history: HistoryStore,
    model: ModelClient,
    *,
    model_id: str,
    keep_last_n: int = 8,
    max_tokens: int = 2048,
    scope: CancelScope | None = None,
) -> CompactionResult | None:
    """Summarise all but the last `keep_last_n` messages; None when there is nothing to cut."""
    messages = await history.load()
    cut = choose_cut(messages, keep_last_n)
    if cut == 0:
        return None
    prompt = INSTRUCTIONS.format(transcript=transcript(project(messages[:cut])))
    request = Request(
        model=model_id,
        messages=[Message(role="user", content=[TextPart(prompt)])],
        max_tokens=max_tokens,
    )
    work = _collect_text(model, request)
    text = (await (scope.run(work) if scope is not None else work)).strip()
    if not text:
        raise CompactionError("the model returned an empty summary")
    await history.replace_head(cut, Message(role="user", content=[TextPart(SUMMARY_PREFIX + text)]))
    return CompactionResult(dropped=cut, kept=len(messages) - cut, summary=text)


async def _collect_text(model: ModelClient, request: Request) -> str:
    parts: list[str] = []
    finished = False
    events = model.stream(request)
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Restart):
                parts.clear()  # another model starts the summary over
            elif isinstance(event, Finished):
                finished = True
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if not finished:
        raise CompactionError("the model's summary ended before it was complete")
    return "".join(parts)


def transcript(messages: Iterable[Message]) -> str:
    """The messages as plain text for the summarising model."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for m in messages:
        for call in m.tool_calls:
            names[call.id] = call.name
        lines.extend(_render(m, names))
    text = "\n\n".join(lines)
    return text[-TRANSCRIPT_CHARS:]


def _render(m: Message, names: dict[str, str]) -> list[str]:
    body = "".join(
        p.text if isinstance(p, TextPart) else "[image]"
        for p in m.content
        if isinstance(p, TextPart | ImagePart)
    )
    if m.role == "tool":
        name = names.get(m.tool_call_id or "", "a tool")
        flag = " (error)" if m.is_error else ""
        return [f"[result of {name}{flag}]\n{_clip(body, RESULT_CHARS)}"]
    out = [f"[{m.role}]\n{body}"] if body else []
    for call in m.tool_calls:
        out.append(
            f"[assistant called {call.name}] {_clip(json.dumps(call.arguments, ensure_ascii=False), ARGS_CHARS)}"
        )
    return out


def _clip(text: str, limit: int) -> str:
    return (
        text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
    )


def _is_summary(m: Message) -> bool:
    return m.role == "user" and m.text.startswith(SUMMARY_PREFIX)
