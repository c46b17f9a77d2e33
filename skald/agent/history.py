"""The history store interface, an in-memory store, and the projection for the model.

Persistence order (what makes a crash lose nothing):
1. the user message, before the first model call;
2. the assistant message with all its tool calls, before any of them runs (every call
   starts `pending`);
3. `awaiting_approval` / `running` marks, before the wait or the run starts;
4. each tool result together with its final state, as soon as it is known.

A call is unfinished while it has no result. Every call ends up with exactly one result
(`append_result` of a second one is a bug, and `MemoryHistory` refuses it).

Stores persist in arrival order; results of concurrent calls may arrive out of call
order. `project()` turns whatever a store returns into a valid conversation for a model:
each call's result right after its assistant message, in call order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from skald.llm.types import ImagePart, Message, TextPart, ToolCall


class CallState(StrEnum):
    PENDING = "pending"  # stored with its assistant message, not started
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    DONE = "done"
    ERROR = "error"
    DENIED = "denied"
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        return self not in _OPEN


_OPEN = frozenset({CallState.PENDING, CallState.AWAITING_APPROVAL, CallState.RUNNING})


class UnfinishedCall(msgspec.Struct, frozen=True):
    call: ToolCall
    state: CallState


class HistoryStore(Protocol):
    """One conversation's history. Every method must be durable when it returns."""

    @property
    def conversation_id(self) -> str: ...

    async def append(self, message: Message) -> None:
        """Store a user, assistant or system message; an assistant's calls start `pending`."""
        ...

    async def mark_call(self, call_id: str, state: CallState) -> None:
        """Move an unfinished call to `awaiting_approval` or `running`."""
        ...

    async def append_result(
        self, result: Message, state: CallState, metadata: Mapping[str, Any] | None = None
    ) -> None:
        """Store a tool message and finish its call with `state`, atomically."""
        ...

    async def load(self) -> list[Message]:
        """The conversation as stored (from the latest summary on), in append order."""
        ...

    async def start_turn(self, message: Message) -> list[Message] | None:
        """A new user message, when no call is open: store it and return `load()`, as one
        atomic step (one trip to the store instead of three). With a call still open,
        store nothing and return None: the loop settles the calls, then `append`s."""
        ...

    async def unfinished_calls(self) -> list[UnfinishedCall]:
        """Calls without a result, in the order they were made."""
        ...

    async def replace_head(self, count: int, summary: Message) -> None:
        """Compaction: the first `count` messages of `load()` are replaced by `summary`."""
        ...


# The misuse every store refuses, in the same words: a store is a way of keeping the
# history, not a looser contract.


def check_append(message: Message) -> None:
    """`append` takes no tool result: a result comes with its call's final state."""
    if message.role == "tool":
        raise ValueError("tool results go through append_result")


def check_mark(state: CallState) -> None:
    """`mark_call` only moves an open call on; finishing one is `append_result`'s."""
    if state.finished:
        raise ValueError("a call is finished by append_result")


def check_result(result: Message, state: CallState) -> str:
    """The id of the call `result` finishes, once it is a tool message with a final state."""
    if result.role != "tool" or result.tool_call_id is None:
        raise ValueError("a result is a tool message with a tool_call_id")
    if not state.finished:
        raise ValueError(f"a result needs a final state, not {state}")
    return result.tool_call_id


class MemoryHistory:
    """A `HistoryStore` in memory: tests, and ephemeral sub-agent sessions."""

    def __init__(self, conversation_id: str = "memory", messages: Iterable[Message] = ()) -> None:
        self._conversation_id = conversation_id
        self.messages: list[Message] = []
        self.states: dict[str, CallState] = {}
        self.calls: dict[str, ToolCall] = {}
        self.metadata: dict[str, Mapping[str, Any]] = {}
        for message in messages:
            self._add(message)

    @property
    def conversation_id(self) -> str:
        return self._conversation_id

    async def append(self, message: Message) -> None:
        check_append(message)
        self._add(message)

    async def mark_call(self, call_id: str, state: CallState) -> None:
        self._require_open(call_id)
        check_mark(state)
        self.states[call_id] = state

    async def append_result(
        self, result: Message, state: CallState, metadata: Mapping[str, Any] | None = None
    ) -> None:
        call_id = check_result(result, state)
        self._require_open(call_id)
        self.messages.append(result)
        self.states[call_id] = state
        if metadata:
            self.metadata[call_id] = metadata

    async def load(self) -> list[Message]:
        return list(self.messages)

    async def start_turn(self, message: Message) -> list[Message] | None:
        if await self.unfinished_calls():
            return None
        await self.append(message)
        return await self.load()

    async def unfinished_calls(self) -> list[UnfinishedCall]:
        return [
            UnfinishedCall(call, state)
            for call_id, call in self.calls.items()
            if not (state := self.states[call_id]).finished
        ]

    async def replace_head(self, count: int, summary: Message) -> None:
        self.messages[:count] = [summary]

    def _add(self, message: Message) -> None:
        for call in message.tool_calls:
            if call.id in self.calls:
                raise ValueError(f"duplicate tool call id {call.id!r}")
            self.calls[call.id] = call
            self.states[call.id] = CallState.PENDING
        if message.role == "tool" and message.tool_call_id in self.states:
            self.states[message.tool_call_id] = CallState.DONE
        self.messages.append(message)

    def _require_open(self, call_id: str) -> None:
        state = self.states.get(call_id)
        if state is None:
            raise ValueError(f"unknown tool call {call_id!r}")
        if state.finished:
            raise ValueError(f"tool call {call_id!r} already has a result ({state})")


MISSING_RESULT = "No result was recorded for this call (it was interrupted)."


def project(
    messages: Iterable[Message],
    *,
    max_argument_chars: int | None = None,
    max_result_chars: int | None = None,
) -> list[Message]:
    """A valid conversation for a model: every call followed by exactly one result.

    Results are placed right after their assistant message in call order; a call with
    no stored result gets an error placeholder; results without a call are dropped.

    With limits, every text inside a call's arguments longer than `max_argument_chars`
    and every result text longer than `max_result_chars` is cut, with a marker saying
    how large it was (`clip_text`): the store keeps the whole text once, and the model
    is not sent a 10 MiB `write_file` content again at every later round. The cut is a
    pure function of the stored text, so the projection stays byte-stable between
    rounds (prompt caches keep working).
    """
    messages = list(messages)
    results: dict[str, Message] = {}
    for m in messages:
        if m.role == "tool" and m.tool_call_id is not None:
            results.setdefault(m.tool_call_id, m)
    out: list[Message] = []
    for m in messages:
        if m.role == "tool":
            continue
        if m.interrupted is not None:
            if not m.text and not m.tool_calls:
                continue  # only the record of a failure: nothing was said
            m = _with_interruption_note(m)
        out.append(_clip_calls(m, max_argument_chars))
        for call in m.tool_calls:
            found = results.pop(call.id, None)
            out.append(_clip_result(found, max_result_chars) if found else _placeholder(call.id))
    return out


INTERRUPTED_NOTE = "[This answer was interrupted: {detail}]"


def _with_interruption_note(message: Message) -> Message:
    """The model learns that its earlier answer was cut, and why (a stop, a failure)."""
    assert message.interrupted is not None
    note = INTERRUPTED_NOTE.format(detail=message.interrupted.detail)
    content = [*message.content, TextPart(f"\n\n{note}")]
    return msgspec.structs.replace(message, content=content, interrupted=None)


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters plus a marker naming its whole size, if longer."""
    if len(text) <= limit:
        return text
    # isascii() is O(1) in CPython (a flag of the string): no 10 MiB copy on the loop.
    size = human_size(len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))
    return f"{text[:limit]}\n[truncated: {size}; full text stored]"


def clip_arguments(value: Any, limit: int) -> Any:
    """Arguments with every text longer than `limit` clipped (nested ones included)."""
    if isinstance(value, str):
        return clip_text(value, limit)
    if isinstance(value, dict):
        return {k: clip_arguments(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_arguments(v, limit) for v in value]
    return value


def _clip_calls(message: Message, limit: int | None) -> Message:
    if limit is None or not message.tool_calls:
        return message
    calls = [
        msgspec.structs.replace(call, arguments=clip_arguments(call.arguments, limit))
        for call in message.tool_calls
    ]
    return msgspec.structs.replace(message, tool_calls=calls)


def _clip_result(message: Message, limit: int | None) -> Message:
    if limit is None or all(
        len(p.text) <= limit for p in message.content if isinstance(p, TextPart)
    ):
        return message
    content = [
        TextPart(clip_text(p.text, limit)) if isinstance(p, TextPart) else p
        for p in message.content
    ]
    return msgspec.structs.replace(message, content=content)


def human_size(size: int) -> str:
    """Sizes as the markers, the quota messages and the UI speak them: KiB, MiB, GiB."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB"):
        if value < 1024:
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _placeholder(call_id: str) -> Message:
    return Message(
        role="tool", content=[TextPart(MISSING_RESULT)], tool_call_id=call_id, is_error=True
    )


def tool_result_message(
    call_id: str, text: str, *, is_error: bool, images: Iterable[ImagePart] = ()
) -> Message:
    return Message(
        role="tool", content=[TextPart(text), *images], tool_call_id=call_id, is_error=is_error
    )


def call_ids(messages: Iterable[Message]) -> set[str]:
    return {call.id for m in messages for call in m.tool_calls}
