"""Compaction: one summarising model call; the cut never separates a call from its result."""

from __future__ import annotations

import pytest
from test_agent_fakes import (
    ScriptedModel,
    assert_every_call_answered_once,
    call,
    calls,
    echo_tool,
    make_loop,
    text,
)

from skald.agent import (
    SUMMARY_PREFIX,
    Compacted,
    CompactionError,
    MemoryHistory,
    compact,
    estimate_tokens,
)
from skald.agent.compaction import choose_cut, safe_cuts, transcript
from skald.llm.types import Message, TextPart, ToolCall


def user(t: str) -> Message:
    return Message(role="user", content=[TextPart(t)])


def assistant(t: str = "", *call_ids: str) -> Message:
    tool_calls = [ToolCall(id=i, name="echo", arguments={"i": i}) for i in call_ids]
    return Message(role="assistant", content=[TextPart(t)] if t else [], tool_calls=tool_calls)


def result(call_id: str) -> Message:
    return Message(role="tool", content=[TextPart(f"result {call_id}")], tool_call_id=call_id)


def conversation() -> list[Message]:
    return [
        user("plan my week"),
        assistant("checking", "a", "b"),
        result("b"),  # concurrent results arrive out of order
        result("a"),
        assistant("", "c"),
        result("c"),
        assistant("here is your week"),
        user("and the weekend?"),
        assistant("", "d"),
        result("d"),
        assistant("free"),
        user("thanks"),
        assistant("you're welcome"),
    ]


def split_is_clean(messages: list[Message], cut: int) -> bool:
    head_calls = {c.id for m in messages[:cut] for c in m.tool_calls}
    tail_results = {m.tool_call_id for m in messages[cut:] if m.role == "tool"}
    return not head_calls & tail_results and (cut == len(messages) or messages[cut].role != "tool")


def test_no_cut_separates_a_call_from_its_results() -> None:
    messages = conversation()
    cuts = safe_cuts(messages)
    assert cuts == [1, 4, 6, 7, 8, 10, 11, 12]
    assert all(split_is_clean(messages, c) for c in cuts)
    for keep in range(len(messages) + 2):
        cut = choose_cut(messages, keep)
        assert cut == 0 or split_is_clean(messages, cut)
        assert cut == 0 or len(messages) - cut >= keep


def test_the_cut_prefers_a_user_message() -> None:
    messages = conversation()
    assert choose_cut(messages, 3) == 7  # before "and the weekend?", not at 10
    assert choose_cut(messages, 1) == 11
    assert choose_cut(messages, 20) == 0
    only_summary = [user(SUMMARY_PREFIX + "old"), user("hi"), assistant("hello")]
    assert choose_cut(only_summary, 2) == 0  # would only re-summarise the summary


def test_an_open_call_blocks_every_cut_after_it() -> None:
    messages = [user("x"), assistant("", "a"), user("y"), assistant("z")]
    assert safe_cuts(messages) == [1]  # before the call, never after it


async def test_compact_summarises_the_head_with_one_call_and_keeps_the_tail() -> None:
    history = MemoryHistory("c", conversation())
    model = ScriptedModel(text("- the user planned the week"))

    done = await compact(history, model, model_id="summariser", keep_last_n=3)

    assert done is not None
    assert (done.dropped, done.kept, done.summary) == (7, 6, "- the user planned the week")
    (request,) = model.requests
    assert request.model == "summariser"
    assert request.tools == []
    (prompt,) = request.messages
    assert prompt.role == "user"
    assert "plan my week" in prompt.text and "[assistant called echo]" in prompt.text
    assert "[result of echo]\nresult a" in prompt.text
    assert history.messages[0].text == SUMMARY_PREFIX + "- the user planned the week"
    assert [m.text for m in history.messages[1:3]] == ["and the weekend?", ""]
    assert len(history.messages) == 7
    assert_every_call_answered_once(history.messages)


async def test_nothing_to_compact_makes_no_model_call() -> None:
    history = MemoryHistory("c", [user("hi"), assistant("hello")])
    model = ScriptedModel()
    assert await compact(history, model, model_id="m", keep_last_n=8) is None
    assert model.requests == []


async def test_an_empty_summary_changes_nothing() -> None:
    history = MemoryHistory("c", conversation())
    with pytest.raises(CompactionError):
        await compact(history, ScriptedModel(text("  ")), model_id="m", keep_last_n=2)
    assert history.messages == conversation()


def test_the_estimate_is_characters_over_four() -> None:
    assert estimate_tokens([user("x" * 400)]) == 100
    assert estimate_tokens([user("x" * 400)], system="y" * 400) == 200


def test_the_transcript_clips_long_results() -> None:
    long = Message(role="tool", content=[TextPart("z" * 5000)], tool_call_id="a")
    rendered = transcript([assistant("", "a"), long])
    assert "more characters]" in rendered
    assert len(rendered) < 3000


async def test_the_loop_compacts_automatically_over_the_threshold() -> None:
    old = [m for i in range(10) for m in (user(f"question {i} " + "x" * 400), assistant("ok"))]
    history = MemoryHistory("conv-1", old)
    model = ScriptedModel(text("summary of ten questions"), calls(call("echo")), text("answer"))
    loop, _, sink = make_loop(
        model, [echo_tool()], history=history, compact_at_tokens=500, compact_keep_last=2
    )

    result = await loop.run_turn("new question")

    assert result.status == "done"
    summary_request, first_round, second_round = model.requests
    assert summary_request.tools == [] and "question 0" in summary_request.messages[0].text
    assert first_round.messages[0].text.startswith(SUMMARY_PREFIX)
    assert [m.text for m in first_round.messages[1:]] == [
        "question 9 " + "x" * 400,
        "ok",
        "new question",
    ]
    assert second_round.messages[0].text.startswith(SUMMARY_PREFIX)  # once per turn
    (event,) = sink.of(Compacted)
    assert (event.dropped, event.kept) == (18, 3)


async def test_compact_on_request() -> None:
    history = MemoryHistory("conv-1", conversation())
    loop, _, sink = make_loop(ScriptedModel(text("short")), history=history)

    done = await loop.compact(keep_last_n=2)

    assert done is not None and done.dropped == 11
    assert [m.role for m in history.messages] == ["user", "user", "assistant"]
    assert len(sink.of(Compacted)) == 1
