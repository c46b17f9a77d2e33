"""Connectors on what real MCP servers offer beyond tools (issue 23 items 3 and 4): a
legacy HTTP+SSE server behind a connector's `url`, resources read by the model and shown
on the page, subscriptions, prompts, and image results reaching the model as pictures.

The server is tests/mcp_servers/rich_server.py (the official Python SDK), over the legacy
SSE transport or streamable HTTP on 127.0.0.1, so a `personal` connector needs no Docker."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import Client
from connector_support import pending, running, simple_feed
from fake_llm import Call, FakeLLM, check_openai
from mcp_support import rich_http

from skald.agent import CancelScope, ToolContext
from skald.agent.events import Event
from skald.agent.history import tool_result_message
from skald.agent.tools import judged_name
from skald.approvals.rules import Rule
from skald.core.conversations import Sent
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.content import SAVE_ABOVE
from skald.features.connectors.events import EventStore
from skald.features.connectors.tools import tools_for
from skald.llm.openai_compat import wire_messages
from skald.llm.types import ImagePart, Message, TextPart, ToolCall

MakeClient = Callable[[], Awaitable[Client]]


def _ignore(event: Event) -> None:
    pass


def ctx(conversation: str = "conv") -> ToolContext:
    return ToolContext(
        conversation_id=conversation, call_id="c", depth=0, cancel=CancelScope(), sink=_ignore
    )


async def switch_on(
    runtime: Runtime, client: Client, tmp_path: Path, url: str, name: str = "notes"
) -> None:
    feed = simple_feed(
        tmp_path / "feed", (name,), **{name: {"scope": "personal", "transport": "http", "url": url}}
    )
    c = service.require(runtime.server)
    c.config = msgspec.structs.replace(c.config, feed=str(feed))
    await c.installer.install(c.feed(), name)
    r = await client.call("POST", f"/api/connectors/{name}/activate")
    assert r.status_code == 200, r.text


def model_tool(runtime: Runtime, owner: str, name: str) -> Any:
    [tool] = [t for t in runtime.user_runtimes[owner].all_tools() if t.name == name]
    return tool


async def test_a_legacy_sse_server_lists_and_calls_tools_through_a_connector(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with rich_http("sse") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        inst = await running(runtime, household["ada"], "notes")
        assert [t.name for t in inst.tools] == ["echo", "picture", "note"]
        listed = (await ada.call("GET", "/api/connectors/notes")).json()
        assert [t["name"] for t in listed["tools"]][:1] == ["mcp__notes__echo"]
        result = await model_tool(runtime, household["ada"], "mcp__notes__echo").run(
            {"text": "ciao"}, ctx()
        )
        assert not result.is_error and result.content == "ciao"


async def _models(runtime: Runtime, fake: FakeLLM, api: str, capabilities: list[str]) -> None:
    if api == "openai":
        provider = await runtime.llm.add_provider(
            "Fake", "openai_compatible", fake.base_url_openai, "sk-test-123"
        )
    else:
        provider = await runtime.llm.add_provider(
            "Fake", "anthropic", fake.base_url_anthropic, "sk-ant-test"
        )
    await runtime.llm.add_model(provider.id, "m", "m", "average", capabilities, 1, True)


def _pictures(api: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The (media type, base64) of every picture the request carries after a tool call,
    in the provider's own shape."""
    found = []
    for m in body["messages"]:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if api == "openai" and part.get("type") == "image_url":
                head, _, data = part["image_url"]["url"].partition(";base64,")
                found.append((head.removeprefix("data:"), data))
            if api == "anthropic" and part.get("type") == "tool_result":
                for block in part.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "image":
                        found.append((block["source"]["media_type"], block["source"]["data"]))
    return found


async def _turn(runtime: Runtime, owner: str, fake: FakeLLM, size: str) -> tuple[str, str]:
    await runtime.core.registry.save_rule(
        Rule(0, "default", "@mcp:notes", None, "allow", 5, "notes"), create=True
    )
    svc = runtime.conversations
    conversation = await svc.create(owner)
    fake.script("m", [[Call("mcp__notes__picture", {"size": size})], "A grey square."])
    sent = await svc.send(owner, conversation.id, "draw me something")
    assert isinstance(sent, Sent)
    reply = await svc.wait(owner, sent)
    assert reply.reply == "A grey square.", reply
    return conversation.id, reply.reply


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_tools_png_reaches_a_vision_model_as_an_image_part(
    api: str,
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    with rich_http("http") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        await running(runtime, household["ada"], "notes")
        await _models(runtime, fake_llm, api, ["tools", "vision"])
        await _turn(runtime, household["ada"], fake_llm, "small")
    first, second = fake_llm.bodies(api)  # type: ignore[arg-type]
    assert _pictures(api, first) == []
    [(mime, data)] = _pictures(api, second)
    assert mime == "image/png"
    picture = base64.b64decode(data)  # the server's 2x2 PNG, as it sent it
    assert picture.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", picture[16:24]) == (2, 2)
    assert "[image image/png, " in json.dumps(second) and "shown to you" in json.dumps(second)


async def test_a_model_that_cannot_see_gets_a_note_and_a_large_picture_is_saved(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    with rich_http("http") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        await running(runtime, household["ada"], "notes")
        await _models(runtime, fake_llm, "openai", ["tools"])
        conversation_id, _ = await _turn(runtime, household["ada"], fake_llm, "large")
    second = fake_llm.bodies("openai")[1]
    assert _pictures("openai", second) == []
    [result] = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert "cannot see pictures" in result
    # Large: saved in ada's uploads of the conversation, and the text names the file.
    path = re.search(r"saved as (uploads/\S+\.png)", result)
    assert path is not None and path[1].startswith(f"uploads/{conversation_id}/notes-")
    mine = runtime.user_runtimes[household["ada"]]
    saved = mine.router.physical(path[1]).path.read_bytes()
    assert saved.startswith(b"\x89PNG") and len(saved) > SAVE_ABOVE


def test_pictures_of_a_batch_of_tool_results_follow_the_whole_batch_on_openai() -> None:
    """OpenAI takes no picture in a tool message, nor a user message between two tool
    messages of one batch: the pictures follow the batch (the fake checks as the API)."""
    picture = ImagePart(media_type="image/png", data_b64=base64.b64encode(b"x" * 8).decode())
    messages = [
        Message(role="user", content=[TextPart("two things")]),
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(id="a", name="t", arguments={}),
                ToolCall(id="b", name="t", arguments={}),
            ],
        ),
        tool_result_message("a", "one", is_error=False, images=[picture]),
        tool_result_message("b", "two", is_error=False),
    ]
    wire = wire_messages(messages)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user"]
    assert check_openai({"model": "m", "messages": wire}) is None
    assert wire[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def _tool_texts(fake: FakeLLM) -> list[str]:
    return [
        m.get("content") or ""
        for body in fake.bodies("openai")
        for m in body["messages"]
        if m.get("role") == "tool"
    ]


async def test_the_model_reads_a_resource_through_a_tool_and_the_page_lists_them(
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    with rich_http("sse") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        inst = await running(runtime, household["ada"], "notes")
        await _models(runtime, fake_llm, "openai", ["tools", "vision"])
        # Reads of this server's resources (and listings) are allowed without asking.
        for pattern in ("mcp__notes__read_resource", "connector_resources"):
            await runtime.core.registry.save_rule(
                Rule(0, "default", pattern, None, "allow", 5, "notes"), create=True
            )
        svc = runtime.conversations
        owner = household["ada"]
        conversation = await svc.create(owner)
        fake_llm.script(
            "m",
            [
                [Call("connector_resources", {"connector": "notes"})],
                [Call("connector_read_resource", {"connector": "notes", "uri": "note://shopping"})],
                "You need milk and eggs.",
            ],
        )
        sent = await svc.send(owner, conversation.id, "what is on my shopping list?")
        assert isinstance(sent, Sent)
        reply = await svc.wait(owner, sent)
        assert reply.reply == "You need milk and eggs.", (reply, _tool_texts(fake_llm))
        listing, read = _tool_texts(fake_llm)[-2:]
        assert "note://shopping: shopping - Shopping list (text/plain)" in listing
        assert "note://{name}" in listing
        assert read == "milk, eggs"
        prompt = fake_llm.bodies("openai")[0]["messages"][0]["content"]
        assert "[3 tools, 3 resources]" in prompt and "connector_read_resource" in prompt

        # The page: resources, templates and prompts of the running instance.
        page = (await ada.call("GET", "/api/connectors/notes")).json()
        assert [r["uri"] for r in page["resources"]] == ["note://shopping", "file:///logo.png"]
        assert page["resources"][0]["title"] == "Shopping list"
        assert [t["uri"] for t in page["templates"]] == ["note://{name}"]
        assert page["prompts"] == [
            {
                "name": "greet",
                "title": "",
                "description": "a greeting",
                "arguments": [{"name": "name", "description": "who", "required": True}],
            }
        ]

        # The resource read is subscribed to (the server supports it): an update becomes
        # a connector event in ada's own database (for event triage), not a line of the
        # card's diagnostics; the same update again right after is not stored twice.
        assert inst.catalog.subscribed == {"note://shopping"}
        note = model_tool(runtime, owner, "mcp__notes__note")
        assert (await note.run({"text": "bread"}, ctx())).content == "noted"
        assert (await note.run({"text": "bread, jam"}, ctx())).content == "noted"
        store = EventStore(runtime.user_runtimes[owner].handle.db)
        for _ in range(100):
            if (await store.count())[0]:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        (stored,) = await store.pending(10)
        assert (stored.server, stored.kind, stored.refs) == (
            "notes",
            "resources/updated",
            {"uri": "note://shopping"},
        )
        assert not [e for e in inst.events if e.kind == "resource"]


async def test_a_prompt_is_filled_in_for_the_composer(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with rich_http("http") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        await running(runtime, household["ada"], "notes")
        r = await ada.call(
            "POST", "/api/connectors/notes/prompts/greet", json={"arguments": {"name": "Ada"}}
        )
        assert r.status_code == 200, r.text
        assert r.json() == {"text": "Say hello to Ada in Italian."}
        r = await ada.call("POST", "/api/connectors/notes/prompts/nothing", json={})
        assert r.status_code == 404
        r = await ada.call("POST", "/api/connectors/notes/prompts/greet", json={"arguments": 3})
        assert r.status_code == 400
        # Another member who has not switched it on has no instance to ask.
        bo = await make_client()
        await bo.login("mum")
        r = await bo.call("POST", "/api/connectors/notes/prompts/greet", json={})
        assert r.status_code == 409


async def test_resource_reads_are_judged_per_connector_in_both_tool_shapes(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    """The approval facts see the real server behind the generic pair (issue 23 item 1
    stays closed): `mcp__<server>__read_resource` and `@mcp:<server>`."""
    with rich_http("http") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        inst = await running(runtime, household["ada"], "notes")
        mine = runtime.user_runtimes[household["ada"]]
        for above in (3, 0):  # direct tools, then the catalogue
            tools = {
                t.name: t for t in tools_for({"notes": inst}, mine.facade, catalogue_above=above)
            }
            read = tools["connector_read_resource"]
            touches = read.touches({"connector": "notes", "uri": "note://shopping"})
            assert judged_name(read.name, touches) == "mcp__notes__read_resource"
            assert touches.categories == frozenset({"@mcp:notes"})
            other = read.touches({"connector": "tz", "uri": "x"})
            assert other.categories == frozenset({"@mcp:tz"}) and other.acts_as is None
            listing = tools["connector_resources"].touches({"connector": "notes"})
            assert listing.categories == frozenset({"@mcp:notes"})


async def _read(
    runtime: Runtime, fake: FakeLLM, owner: str, conversation: str, server: str, answer: str
) -> str:
    """The model reads note://shopping of `server`: "ran", or "asked" (then `answer`:
    approve, or "conversation" for the rest of the conversation)."""
    svc = runtime.conversations
    call = Call("connector_read_resource", {"connector": server, "uri": "note://shopping"})
    fake.script("m", [[call], "ok"])
    sent = await svc.send(owner, conversation, f"read {server}")
    assert isinstance(sent, Sent)
    reply = await svc.wait(owner, sent)
    if reply.status != "awaiting_approval":
        await asyncio.wait_for(sent.done, 20)
        assert _tool_texts(fake)[-1] == "milk, eggs"
        return "ran"
    [item] = await pending(runtime, owner)
    # The Inbox names the server's read, never the generic tool.
    assert item.tool == f"mcp__{server}__read_resource"
    assert item.preview == f"{server} → read note://shopping"
    await svc.decide(owner, item.id, True, "conversation" if answer == "conversation" else None)
    await asyncio.wait_for(sent.done, 20)
    return "asked"


@pytest.mark.parametrize("above", [3, 0], ids=["direct", "catalogue"])
async def test_approving_one_connectors_reads_for_the_conversation_approves_no_other(
    above: int,
    runtime: Runtime,
    make_client: MakeClient,
    household: dict[str, str],
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> None:
    with rich_http("sse") as first, rich_http("http") as second:
        c = service.require(runtime.server)
        c.config = msgspec.structs.replace(c.config, catalogue_above=above)
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path / "a", first, "notes")
        await switch_on(runtime, ada, tmp_path / "b", second, "memo")
        owner = household["ada"]
        await running(runtime, owner, "notes")
        await running(runtime, owner, "memo")
        await _models(runtime, fake_llm, "openai", ["tools"])
        conversation = (await runtime.conversations.create(owner)).id
        assert (
            await _read(runtime, fake_llm, owner, conversation, "notes", "conversation") == "asked"
        )
        offered = {t["function"]["name"] for t in fake_llm.bodies("openai")[-1]["tools"]}
        assert ("connector_call" in offered) is (above == 0)
        assert await _read(runtime, fake_llm, owner, conversation, "notes", "") == "ran"
        # Not another connector's reads, in the same conversation.
        assert await _read(runtime, fake_llm, owner, conversation, "memo", "approve") == "asked"
        assert await _read(runtime, fake_llm, owner, conversation, "memo", "") == "asked"


async def test_the_page_opens_a_listed_resource_and_nothing_else(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    with rich_http("sse") as url:
        ada = await make_client()
        await ada.login("ada")
        await switch_on(runtime, ada, tmp_path, url)
        await running(runtime, household["ada"], "notes")
        base = "/api/connectors/notes/resource?uri="
        r = await ada.call("GET", base + "note://shopping")
        assert r.status_code == 200, r.text
        assert r.json()["text"] == "milk, eggs" and r.json()["image"] is None
        logo = (await ada.call("GET", base + "file:///logo.png")).json()
        assert logo["mime_type"] == "image/png" and logo["text"] is None
        assert base64.b64decode(logo["image"]).startswith(b"\x89PNG")
        # Only what the server listed (a template filled in is the model's business).
        assert (await ada.call("GET", base + "note://other")).status_code == 404
