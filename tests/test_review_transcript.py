"""The transcript a review reads, on a member's real database: only what the member and
their assistant said in top-level conversations inside the half-open window; never a
task's machine-written message, an answer cut short, a compaction summary, a turn that
was only a tool call, nor a background task's own conversation; over budget, the newest
lines are kept and the render says older ones were left out."""

from __future__ import annotations

import json

from conftest import PASSWORD
from review_support import (
    runtime_fixture,  # noqa: F401  (the `runtime` fixture)
    sign_in,
)

from skald.core.runtime import Runtime
from skald.features.review.transcript import read_window, render
from skald.features.schedule.store import Task
from skald.features.schedule.tasks import completion_message


def _body(role: str, text: str, **extra: object) -> str:
    return json.dumps(
        {"role": role, "content": [{"type": "text", "text": text}] if text else [], **extra}
    )


async def _seed(rt: Runtime) -> Runtime:
    tim = (await rt.core.users.create("tim", PASSWORD, "children")).user.id
    await sign_in(rt, "tim")
    task = Task(
        id="t1", title="tides", prompt="p", origin_conversation="chat", conversation_id="task",
        state="completed", result="the tides", error=None, relayed=True,
        created_at="2026-06-01T10:00:00Z", ended_at=None,
    )  # fmt: skip
    rows = [
        ("chat", "user", _body("user", "before the window"), 0, "2026-06-01T09:59:59Z"),
        ("chat", "user", _body("user", "<skald-context>view: Files</skald-context>"), 0, "2026-06-01T10:00:00Z"),
        ("chat", "user", _body("user", "hello there"), 0, "2026-06-01T10:00:01Z"),
        ("chat", "assistant", _body("assistant", "", tool_calls=[{"id": "c1", "name": "x", "arguments": {}}]), 0, "2026-06-01T10:00:02Z"),
        ("chat", "assistant", _body("assistant", "half an answ", interrupted={"code": "stopped", "detail": "d"}), 0, "2026-06-01T10:00:03Z"),
        ("chat", "assistant", _body("assistant", "summary of earlier"), 1, "2026-06-01T10:00:04Z"),
        ("chat", "user", _body("user", completion_message(task)), 0, "2026-06-01T10:00:05Z"),
        ("task", "user", _body("user", "find the tides"), 0, "2026-06-01T10:00:06Z"),
        ("chat", "assistant", _body("assistant", "hi Tim"), 0, "2026-06-01T10:00:07Z"),
        ("other", "user", _body("user", "second chat"), 0, "2026-06-01T10:00:08Z"),
        ("chat", "user", _body("user", "at the end: outside"), 0, "2026-06-01T10:00:09Z"),
    ]  # fmt: skip

    def fill(c) -> None:  # type: ignore[no-untyped-def]
        for cid, title in (("chat", "Homework"), ("task", "⚙ tides"), ("other", "")):
            c.execute(
                "INSERT INTO conversations(id, title, agent_id, created_at, updated_at) "
                "VALUES (?, ?, 'kid', 'x', 'x')",
                (cid, title),
            )
        c.execute(
            "INSERT INTO schedule_tasks(id, title, prompt, origin_conversation, conversation_id, "
            "state, created_at) VALUES ('t1', 'tides', 'p', 'chat', 'task', 'completed', 'x')"
        )
        c.executemany(
            "INSERT INTO chat_messages(conversation_id, role, body, summary, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            rows,
        )

    await rt.user_runtimes[tim].handle.db.transaction(fill)
    return rt


async def test_only_what_was_said_in_top_level_conversations_inside_the_window(
    runtime: Runtime,
) -> None:
    await _seed(runtime)
    (tim,) = [r for r in runtime.user_runtimes.values() if r.user.username == "tim"]
    got = await read_window(tim.handle.db, "2026-06-01T10:00:00Z", "2026-06-01T10:00:09Z", 10_000)
    assert [(line.role, line.text) for line in got.lines] == [
        ("user", "hello there"),
        ("assistant", "hi Tim"),
        ("user", "second chat"),
    ]
    assert not got.truncated
    text = render(got)
    assert "### Conversation: Homework" in text and "### Conversation: (untitled)" in text
    assert "[2026-06-01 10:00:01 UTC] Them: hello there" in text
    assert "left out" not in text


async def test_over_budget_the_newest_lines_are_kept_and_the_render_says_so(
    runtime: Runtime,
) -> None:
    await _seed(runtime)
    (tim,) = [r for r in runtime.user_runtimes.values() if r.user.username == "tim"]
    got = await read_window(tim.handle.db, None, "2026-06-01T10:00:09Z", 100)
    assert [line.text for line in got.lines] == ["hi Tim", "second chat"]
    assert got.truncated and "oldest messages are left out" in render(got)
