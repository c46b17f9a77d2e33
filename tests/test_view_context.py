"""The eye's bounds (issue 31): 12 items, 120-character labels, 4,096-character values,
16,384 in all; over-long input is trimmed with a note saying how much was left out,
never refused; items keep their order and repeats; a highlighted passage keeps its line
numbers on its way to the model and back to the chips."""

from __future__ import annotations

import json

from conftest import add_models
from fake_llm import FakeLLM

from skald.core.conversations import VIEW_MAX_ITEMS, VIEW_TOTAL_MAX, VIEW_VALUE_MAX, Sent
from skald.core.runtime import Runtime
from skald.store.conversations import ViewItem

PASSAGE = "     3\tThe quick brown fox\n     4\tjumps over\n     5\tthe lazy dog."


async def _sent_block(
    runtime: Runtime, ada: str, fake_llm: FakeLLM, view: list[ViewItem]
) -> tuple[str, str]:
    svc = runtime.conversations
    conversation = await svc.create(ada)
    sent = await svc.send(ada, conversation.id, "rewrite this", view_context=view)
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    user = [m for m in fake_llm.bodies()[-1]["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    return conversation.id, content if isinstance(content, str) else json.dumps(content)


async def test_a_highlighted_passage_reaches_the_model_with_its_line_numbers(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "m")
    fake_llm.script("m", ["Done."])
    view = [ViewItem("file", "~/story.md"), ViewItem("selection (lines 3-5)", PASSAGE)]
    conversation_id, text = await _sent_block(runtime, ada, fake_llm, view)
    assert "- selection (lines 3-5):\n       3\tThe quick brown fox\n       4\tjumps over" in text
    first = (await runtime.conversations.history(ada, conversation_id))[0]
    assert first.view == [
        ViewItem("file", "~/story.md"),
        ViewItem("selection (lines 3-5)", PASSAGE),
    ]
    assert first.text == "rewrite this"


async def test_over_long_view_context_is_trimmed_with_a_note_never_refused(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "m")
    fake_llm.script("m", ["Done.", "Done again."])
    view = [ViewItem("selection", "x" * 20_000)] + [ViewItem("page", "Files")] * 14
    svc = runtime.conversations
    conversation = await svc.create(ada)
    sent = await svc.send(ada, conversation.id, "hi", view_context=view)
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    items = (await svc.history(ada, conversation.id))[0].view
    assert items[0].value.startswith("x" * VIEW_VALUE_MAX)
    assert items[0].value.endswith(f"[… {20_000 - VIEW_VALUE_MAX:,} characters left out]")
    # Order and repeats kept, 12 items, then how many were left out.
    assert [i.label for i in items[1:VIEW_MAX_ITEMS]] == ["page"] * (VIEW_MAX_ITEMS - 1)
    assert items[-1] == ViewItem("left out", "3 more items")
    # The total is bounded too: later values get what room is left, with the note.
    many = [ViewItem(f"part {n}", "y" * VIEW_VALUE_MAX) for n in range(5)]
    sent = await svc.send(ada, conversation.id, "again", view_context=many)
    assert isinstance(sent, Sent)
    await svc.wait(ada, sent)
    kept = next(i for i in await svc.history(ada, conversation.id) if i.text == "again").view
    assert sum(len(i.value.split("[…")[0].rstrip()) for i in kept) <= VIEW_TOTAL_MAX
    assert kept[4].value.endswith(
        f"[… {5 * VIEW_VALUE_MAX - VIEW_TOTAL_MAX:,} characters left out]"
    )
