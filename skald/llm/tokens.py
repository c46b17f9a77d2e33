"""Token counts when the server reports none: a rough estimate (characters / 4).

Rule: a count that was estimated says so (`Usage.estimated`); totals that include one
estimate are estimated. Trap: an estimate is for budgets, rests and records, never for
a price; images count a flat 1000 characters (their real cost depends on the model).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import msgspec

from skald.llm.types import Message, Request, TextPart, ToolCall, ToolSpec, Usage

CHARS_PER_TOKEN = 4
IMAGE_CHARS = 1000


def estimate_messages(
    messages: Iterable[Message], *, system: str = "", tools: Sequence[ToolSpec] = ()
) -> int:
    chars = len(system) + sum(len(msgspec.json.encode(t)) for t in tools)
    for m in messages:
        chars += sum(len(p.text) if isinstance(p, TextPart) else IMAGE_CHARS for p in m.content)
        chars += sum(len(c.name) + len(json.dumps(c.arguments)) for c in m.tool_calls)
    return chars // CHARS_PER_TOKEN


def estimate_request(request: Request) -> int:
    """What the prompt of `request` costs, roughly."""
    return estimate_messages(request.messages, tools=request.tools)


def estimate_output(text: str, calls: Sequence[ToolCall] = ()) -> int:
    chars = len(text) + sum(len(c.name) + len(json.dumps(c.arguments)) for c in calls)
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def completed(
    reported: Usage | None, request: Request, text: str, calls: Sequence[ToolCall] = ()
) -> Usage:
    """The server's counts, each missing one (0 or no report) filled by an estimate."""
    reported = reported or Usage()
    estimated = reported.estimated
    input_tokens, output_tokens = reported.input_tokens, reported.output_tokens
    if input_tokens <= 0:
        input_tokens, estimated = estimate_request(request), True
    if output_tokens <= 0 and (text or calls):
        output_tokens, estimated = estimate_output(text, calls), True
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=reported.cost_usd,
        estimated=estimated,
    )
