"""Videos in the chat (issue 31): an mp4/webm/mov attachment reaches a model marked
`video` as a video part; a model that cannot watch videos gets the file's name and a
note, and the member is told; over 32 MiB a video, or 48 MiB a message, stays a note.
Real owner databases, the fake provider over real HTTP on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from conftest import add_models
from fake_llm import FakeLLM

from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.core.uploads import MAX_VIDEO_BYTES, content_for
from skald.files.mime import sniff
from skald.llm.types import TextPart, VideoPart
from skald.store.conversations import Attachment

MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64
MOV = b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00qt  " + b"\x00" * 64


async def _video(runtime: Runtime, ada: str, conversation_id: str, name: str, data: bytes) -> str:
    folder = await runtime.conversations.attachment_folder(ada, conversation_id)
    folder.path.mkdir(parents=True, exist_ok=True)
    (folder.path / name).write_bytes(data)
    return f"uploads/{conversation_id}/{name}"


def _video_parts(body: dict[str, object]) -> list[dict[str, object]]:
    parts: list[dict[str, object]] = []
    for message in body["messages"]:  # type: ignore[attr-defined]
        content = message.get("content")
        if isinstance(content, list):
            parts += [p for p in content if p.get("type") == "video_url"]
    return parts


def test_mp4_webm_and_mov_are_told_by_their_first_bytes() -> None:
    assert sniff(MP4) == "video/mp4"
    assert sniff(MOV) == "video/quicktime"
    assert sniff(b"\x1aE\xdf\xa3" + b"\x00" * 20) == "video/webm"


async def test_a_video_reaches_a_model_that_watches_videos_as_a_video_part(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "watches", capabilities=("tools", "vision", "video"))
    fake_llm.script("watches", ["A cat jumps."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    path = await _video(runtime, ada, conversation.id, "cat.mp4", MP4)
    sent = await svc.send(ada, conversation.id, "what happens?", [path])
    assert isinstance(sent, Sent) and not sent.videos_not_seen
    assert (await svc.wait(ada, sent)).reply == "A cat jumps."
    parts = _video_parts(fake_llm.bodies()[-1])
    url = f"data:video/mp4;base64,{base64.b64encode(MP4).decode()}"
    assert parts == [{"type": "video_url", "video_url": {"url": url}}]
    assert not (await svc.history(ada, conversation.id))[0].videos_not_seen


async def test_a_video_for_a_model_that_cannot_watch_videos_says_so(
    runtime: Runtime, ada: str, fake_llm: FakeLLM
) -> None:
    await add_models(runtime, fake_llm, "sees", capabilities=("tools", "vision"))
    fake_llm.script("sees", ["I cannot watch it."])
    svc = runtime.conversations
    conversation = await svc.create(ada)
    path = await _video(runtime, ada, conversation.id, "clip.mov", MOV)
    sent = await svc.send(ada, conversation.id, "what happens?", [path])
    assert isinstance(sent, Sent) and sent.videos_not_seen and not sent.images_not_seen
    assert (await svc.wait(ada, sent)).reply == "I cannot watch it."
    body = fake_llm.bodies()[-1]
    assert _video_parts(body) == [] and "cannot watch videos" in json.dumps(body)
    first = (await svc.history(ada, conversation.id))[0]
    assert first.videos_not_seen and first.text == "what happens?"


def test_a_video_over_its_limit_or_past_the_messages_budget_stays_a_note(
    runtime: Runtime, ada: str, tmp_path: Path
) -> None:
    home = runtime.core.layout.home(ada)
    folder = home / "uploads" / "c0ffee"
    folder.mkdir(parents=True)
    sizes = {"a.mp4": 20 << 20, "b.mp4": 30 << 20, "c.mp4": MAX_VIDEO_BYTES + 1}
    attachments = []
    for name, size in sizes.items():
        with (folder / name).open("wb") as f:
            f.write(MP4)
        os.truncate(folder / name, size)  # sparse: the size is what counts
        attachments.append(
            Attachment(name=name, path=f"uploads/c0ffee/{name}", mime="video/mp4", size=size)
        )
    parts = content_for(runtime.core.layout, ada, "watch", attachments, watch_videos=True)
    videos = [p for p in parts if isinstance(p, VideoPart)]
    assert len(videos) == 1 and len(base64.b64decode(videos[0].data_b64)) == 20 << 20
    notes = {p.text.split(" (")[0][-5:]: p.text for p in parts if isinstance(p, TextPart)}
    assert "over the 32 MiB a video or the 48 MiB a message" in notes["b.mp4"]
    assert "over the 32 MiB" in notes["c.mp4"] and "not shown" not in notes["a.mp4"]
