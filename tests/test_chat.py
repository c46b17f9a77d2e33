"""The chat end to end, in process: real API, real owner databases, a fake provider that
speaks the real wire formats."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    PASSWORD,
    MakeClient,
    admin_adds_models,
    post_chat,
    signed_in,
    wait_idle,
)
from fake_llm import Call, FakeLLM, Hang, Text

from skald.agent import CallState, prompts
from skald.assets import asset_dir
from skald.core.hub import TurnJob
from skald.core.runtime import Runtime
from skald.errors import NotFoundError
from skald.llm.types import Message, TextPart, ToolCall
from skald.store.conversations import Attachment, OwnerHistory


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_two_round_turn_with_a_tool_is_persisted(
    api: str,
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", api)])
    fake_llm.script(
        "model-a",
        [
            [
                Call(
                    "write_file",
                    {"path": "user-memory/bread.md", "content": "# Bread\nAda likes sourdough."},
                )
            ],
            Text("Noted: you like sourdough."),
        ],
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "Remember that I like sourdough bread")
    assert out["status"] == "done" and out["reply"] == "Noted: you like sourdough."

    # The second request carried the tool result after its call (the fake checks that).
    bodies = fake_llm.bodies(api)  # type: ignore[arg-type]
    assert len(bodies) == 2
    assert "sk-" not in str(fake_llm.requests[0].body)

    items = (await ada.call("GET", f"/api/conversations/{out['conversation_id']}/messages")).json()
    roles = [i["role"] for i in items]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert (
        items[1]["tool_calls"][0]["name"] == "write_file"
        and items[1]["tool_calls"][0]["status"] == "done"
    )
    assert items[2]["tool_call_id"] == items[1]["tool_calls"][0]["id"]
    assert items[3]["text"] == "Noted: you like sourdough."
    # The note really is in Ada's encrypted memory, and its index lists it.
    store = (await runtime.user_runtime(await runtime.core.users.get("ada"))).handle.store
    assert "sourdough" in await store.note_get("bread.md")
    assert "bread.md" in await store.note_get("index.md")
    convs = (await ada.call("GET", "/api/conversations")).json()
    assert convs[0]["usage"]["input_tokens"] > 0 and convs[0]["status"] == "idle"


async def test_fallback_on_503_but_not_on_401(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai"), ("model-b", "openai")])
    fake_llm.script("model-a", [503])
    fake_llm.script("model-b", ["B here."])
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "hello")
    assert out == {
        "conversation_id": out["conversation_id"],
        "reply": "B here.",
        "status": "done",
        "error": None,
        "error_code": None,
        "error_detail": None,
        "files": [],  # what the turn wrote (issue 28)
    }

    runtime.llm.health.succeeded(
        next(m.id for m in await runtime.llm.store.models() if m.model == "model-a")
    )
    fake_llm.script("model-a", [401])
    fake_llm.script("model-b", ["must not be asked"])
    out = await post_chat(ada, "again", out["conversation_id"])
    assert out["status"] == "failed" and out["error_code"] == "auth"
    # A member reads a plain sentence; the provider's own words are for administrators.
    assert "401" not in (out["error"] or "") and out["error_detail"] is None
    assert fake_llm.remaining("model-b") == 1


async def test_shared_memory_write_needs_approval(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    write = Call(
        "write_file",
        {"path": "shared-memory/wifi.md", "content": "# Wi-Fi\nThe password is on the fridge."},
    )
    fake_llm.script(
        "model-a", [[write], Text("I could not save it."), [write], Text("Saved for everyone.")]
    )
    ada = await signed_in(make_client, "ada")

    out = await post_chat(ada, "Tell the household where the wifi password is")
    assert out["status"] == "awaiting_approval"
    cid = out["conversation_id"]
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    call = items[1]["tool_calls"][0]
    assert call["status"] == "awaiting_approval"
    # Another member can neither see nor decide it.
    dad = await signed_in(make_client, "mum")
    assert (
        await dad.call("POST", f"/api/approvals/{call['id']}", json={"decision": "approve"})
    ).status_code == 404
    assert (await dad.call("GET", f"/api/conversations/{cid}/messages")).status_code == 404

    r = await ada.call("POST", f"/api/approvals/{call['id']}", json={"decision": "reject"})
    assert r.status_code == 204
    await wait_idle(ada, cid)
    assert [n.path for n in await runtime.shared_memory.note_list()] == []

    out = await post_chat(ada, "Please, save it after all", cid)
    assert out["status"] == "awaiting_approval"
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    call = next(c for i in items for c in i["tool_calls"] if c["status"] == "awaiting_approval")
    assert (
        await ada.call("POST", f"/api/approvals/{call['id']}", json={"decision": "approve"})
    ).status_code == 204
    await wait_idle(ada, cid)
    assert "fridge" in await runtime.shared_memory.note_get("wifi.md")
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    assert items[-1]["text"] == "Saved for everyone."


async def test_members_cannot_reach_each_others_chats(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", ["hi Ada"])
    ada = await signed_in(make_client, "ada")
    tim = await signed_in(make_client, "tim")
    cid = (await post_chat(ada, "hello"))["conversation_id"]
    r = await ada.http.post(
        f"/api/uploads?conversation_id={cid}",
        files={"file": ("note.txt", b"secret plans")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 201, r.text
    upload = r.json()
    assert upload["mime"] == "text/plain" and upload["path"] == f"uploads/{cid}/note.txt"
    for method, path, body in (
        ("GET", f"/api/conversations/{cid}/messages", None),
        ("PATCH", f"/api/conversations/{cid}", {"title": "mine now"}),
        (
            "POST",
            f"/api/conversations/{cid}/messages",
            {"text": "hi", "attachments": [upload["path"]]},
        ),
        ("POST", f"/api/conversations/{cid}/stop", None),
        ("POST", "/api/chat", {"text": "x", "conversation_id": cid}),
    ):
        r = await tim.call(method, path, json=body)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    assert (await tim.call("GET", "/api/conversations")).json() == []
    r = await tim.http.post(
        f"/api/uploads?conversation_id={cid}",
        files={"file": ("x.txt", b"x")},
        headers={"X-CSRF-Token": tim.csrf},
    )
    assert r.status_code == 404
    # Nor can Ada smuggle a path out of her own uploads.
    for bad in (
        "uploads/../../etc/passwd",
        f"uploads/{cid}/../x",
        "/etc/passwd",
        f"uploads/{cid}/missing.txt",
    ):
        r = await ada.call(
            "POST", f"/api/conversations/{cid}/messages", json={"text": "see", "attachments": [bad]}
        )
        assert r.status_code in (400, 404), (bad, r.text)


async def test_slash_commands(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai"), ("model-b", "openai")])
    fake_llm.script("model-b", ["from B"])
    ada = await signed_in(make_client, "ada")
    # The one list of commands, served to the web client (which keeps no copy).
    commands = (await ada.call("GET", "/api/chat/commands")).json()
    # ...with the features' ones the member may run (the schedule's /remind).
    assert [c["name"] for c in commands] == ["stop", "compact", "model", "cost", "new", "remind"]
    assert all(c["usage"].startswith("/") and c["description"] for c in commands)
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    r = await ada.call(
        "POST", f"/api/conversations/{cid}/messages", json={"text": "/model model-b"}
    )
    assert r.status_code == 200 and r.json()["result"] == "using model-b"
    out = await post_chat(ada, "hi", cid)
    assert out["reply"] == "from B"
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "/cost"})
    assert "tokens in" in r.json()["result"]
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "/new"})
    assert r.json()["conversation_id"] and r.json()["conversation_id"] != cid
    # Only known commands are commands: anything else starting with "/" is a message.
    fake_llm.script("model-b", ["It is a file of host names."])
    out = await post_chat(ada, "/etc/hosts: what is it?", cid)
    assert out["reply"] == "It is a file of host names."
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"model_id": None, "open": False})
    assert r.json()["model_id"] is None and r.json()["open"] is False


async def test_stop_reaches_a_sub_agent(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a",
        [
            [Call("execute_task", {"task": "research bread", "agent": "researcher"})],
            Hang(text_before="Looking into"),  # the sub-agent's model never finishes
            "Usable again.",
        ],
    )
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    r = await ada.call(
        "POST", f"/api/conversations/{cid}/messages", json={"text": "research bread"}
    )
    assert r.status_code == 202
    async with asyncio.timeout(10):
        while len(fake_llm.requests) < 2:  # noqa: ASYNC110 - the fake runs in another thread
            await asyncio.sleep(0.05)
    # The helper's request carries its own brief, not this conversation.
    child_request = fake_llm.requests[1].body
    assert "research bread" in str(child_request["messages"][-1])
    r = await ada.call("POST", f"/api/conversations/{cid}/messages", json={"text": "/stop"})
    assert r.status_code == 200
    await wait_idle(ada, cid)
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    assert items[1]["tool_calls"][0]["status"] in ("interrupted", "error")
    out = await post_chat(ada, "still there?", cid)
    assert out["reply"] == "Usable again."


async def test_no_model_configured_is_a_clear_failure(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "hello?")
    assert out["status"] == "failed" and out["error_code"] == "no_model"
    _ = PASSWORD


async def test_a_message_without_a_usable_model_is_kept_and_answered_with_the_reason(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    body = {"text": "Are you there?", "view_context": "Profile page"}
    assert (
        await ada.call("POST", f"/api/conversations/{cid}/messages", json=body)
    ).status_code == 202
    # The turn may not have started yet when the POST answers (the conversation is still
    # idle then): wait for the message, then for the turn to end.
    async with asyncio.timeout(10):
        while True:
            if (await ada.call("GET", f"/api/conversations/{cid}/messages")).json():
                break
            await asyncio.sleep(0.05)
    await wait_idle(ada, cid)
    items = (await ada.call("GET", f"/api/conversations/{cid}/messages")).json()
    # Shown as typed: what Skald added for the model stays out of the bubble and the title.
    assert [(i["role"], i["text"]) for i in items] == [
        ("user", "Are you there?"),
        ("assistant", ""),  # the failure, recorded
    ]
    assert items[1]["interrupted"] == "no_model"
    conv = (await ada.call("GET", "/api/conversations")).json()[0]
    assert conv["title"] == "Are you there?"
    ada_id = household["ada"]
    stored = await (
        await runtime.user_runtime(await runtime.core.users.get("ada"))
    ).hub.store.items(cid)
    assert stored[0].text == "Are you there?" and ada_id


async def test_uploads_above_the_old_10_mb_limit_are_accepted(
    household: dict[str, str], make_client: MakeClient
) -> None:
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    big = b"\x89PNG\r\n\x1a\n" + b"\0" * (12 * 1024 * 1024)
    r = await ada.http.post(
        f"/api/uploads?conversation_id={cid}",
        files={"file": ("../../photo.png", big)},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 201, r.text[:300]
    assert r.json()["name"] == "photo.png" and r.json()["mime"] == "image/png"


async def test_children_do_not_see_the_households_notes(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await runtime.shared_memory.note_put(
        "wifi.md", "the wifi password is on the fridge", household["mum"]
    )
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a", [[Call("read_file", {"path": "shared-memory/wifi.md"})], "I cannot see that."]
    )
    tim = await signed_in(make_client, "tim")
    out = await post_chat(tim, "what is the wifi password?")
    assert out["reply"] == "I cannot see that."
    second = fake_llm.requests[1].body
    tool_result = next(m for m in second["messages"] if m["role"] == "tool")
    assert "fridge" not in str(second) and "not available" in tool_result["content"]
    tools = {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]}
    assert "execute_task" not in tools


async def test_links_planted_in_the_home_do_not_reach_another_members_files(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    layout = runtime.core.layout
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    mum_home = layout.home(household["mum"])
    (mum_home / "uploads" / cid).mkdir(parents=True)
    (mum_home / "uploads" / cid / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\nmum's private photo")
    ada_home = layout.home(household["ada"])
    ada_home.mkdir(parents=True, exist_ok=True)
    # As if planted from inside Ada's sandbox: her uploads folder is a link into Mum's home.
    (ada_home / "uploads").symlink_to(mum_home / "uploads")
    r = await ada.call(
        "POST",
        f"/api/conversations/{cid}/messages",
        json={"text": "look", "attachments": [f"uploads/{cid}/photo.png"]},
    )
    assert r.status_code in (400, 403), r.text
    r = await ada.http.post(
        f"/api/uploads?conversation_id={cid}",
        files={"file": ("x.txt", b"overwrite?")},
        headers={"X-CSRF-Token": ada.csrf},
    )
    assert r.status_code == 403, r.text
    assert sorted(p.name for p in (mum_home / "uploads" / cid).iterdir()) == ["photo.png"]


async def test_the_assistant_works_on_files_in_the_members_home(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a",
        [
            [Call("write_file", {"path": "~/lists/shopping.txt", "content": "flour\nyeast\n"})],
            [Call("grep", {"pattern": "yeast", "path": "~"})],
            "Your list has yeast on it.",
        ],
    )
    ada = await signed_in(make_client, "ada")
    out = await post_chat(ada, "Start a shopping list with flour and yeast")
    # Own home: no approval needed, and the file is really there.
    assert out["status"] == "done" and out["reply"] == "Your list has yeast on it."
    home = runtime.core.layout.home(household["ada"])
    assert (home / "lists" / "shopping.txt").read_text() == "flour\nyeast\n"
    grep_result = next(
        m
        for m in fake_llm.requests[2].body["messages"]
        if m["role"] == "tool" and "yeast" in m["content"] and "shopping" in m["content"]
    )
    assert grep_result


async def test_the_chat_reply_names_only_the_files_this_turn_wrote(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    """`files` comes from the turn's own finished calls: an earlier turn's file and a
    write that failed are not in it; a file written before the turn stopped for an
    approval is."""
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script(
        "model-a",
        [
            [Call("write_file", {"path": "~/a.txt", "content": "a"})],
            "Wrote a.",
            [
                Call("write_file", {"path": "~/b.txt", "content": "b"}),
                Call("edit_file", {"path": "~/missing.txt", "old_text": "x", "new_text": "y"}),
            ],
            [Call("edit_file", {"path": "~/a.txt", "old_text": "a", "new_text": "A"})],
            [Call("write_file", {"path": "~/b.txt", "content": "b2"})],
            "Wrote b, edited a.",
            [Call("write_file", {"path": "~/c.txt", "content": "c"})],
            [Call("write_file", {"path": "shared-memory/c.md", "content": "c"})],
        ],
    )
    ada = await signed_in(make_client, "ada")
    first = await post_chat(ada, "write a")
    assert first["status"] == "done" and first["files"] == ["~/a.txt"]
    cid = first["conversation_id"]
    second = await post_chat(ada, "write b, edit a", cid)
    assert second["reply"] == "Wrote b, edited a."
    # In the order written, each once; the failed edit of a missing file is not there.
    assert second["files"] == ["~/b.txt", "~/a.txt"]
    third = await post_chat(ada, "write c and tell everyone", cid)
    assert third["status"] == "awaiting_approval" and third["files"] == ["~/c.txt"]


async def test_a_role_losing_a_group_moves_open_conversations_back_to_the_default(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    admin = await signed_in(make_client, "mum")
    ada = await signed_in(make_client, "ada")
    assert (
        await admin.call(
            "POST",
            "/api/approvals/groups",
            json={"name": "trusted", "display_name": "Trusted", "description": ""},
        )
    ).status_code == 201
    member = (await admin.call("GET", "/api/roles")).json()
    attrs = next(r for r in member if r["name"] == "member")["attributes"]
    attrs = {**attrs, "allowed_security_groups": ["default", "trusted"]}
    assert (
        await admin.call("PATCH", "/api/roles/member", json={"attributes": attrs})
    ).status_code == 200
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "trusted"})
    assert r.status_code == 200 and r.json()["security_group"] == "trusted"
    seen: list[Any] = []
    runtime.events.publish = lambda user_id, event, _orig=runtime.events.publish: (
        seen.append(event),
        _orig(user_id, event),
    )[1]  # type: ignore[method-assign]

    # The admin takes the group away: before the answer, the conversation is back on the
    # role's default and every open tab was told.
    attrs = {**attrs, "allowed_security_groups": ["default"]}
    assert (
        await admin.call("PATCH", "/api/roles/member", json={"attributes": attrs})
    ).status_code == 200
    conv = next(c for c in (await ada.call("GET", "/api/conversations")).json() if c["id"] == cid)
    assert conv["security_group"] is None
    assert any(
        getattr(e, "conversation", None) is not None and e.conversation.id == cid for e in seen
    )
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"security_group": "trusted"})
    assert r.status_code == 400


async def test_catalogue_changes_apply_to_the_very_next_turn(
    household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    # The model source keeps the catalogue and the unsealed keys between turns; every
    # change through the API must still reach the next turn.
    admin = await admin_adds_models(
        make_client, fake_llm, [("model-a", "openai"), ("model-b", "openai")]
    )
    provider = (await admin.call("GET", "/api/llm/providers")).json()[0]["id"]
    models = {m["model"]: m["id"] for m in (await admin.call("GET", "/api/llm/models")).json()}
    ada = await signed_in(make_client, "ada")

    def last_request() -> tuple[str, str]:
        posted = [r for r in fake_llm.requests if r.method == "POST"]
        return posted[-1].body["model"], posted[-1].headers.get("authorization", "")

    fake_llm.script("model-a", ["A."])
    out = await post_chat(ada, "one")
    cid = out["conversation_id"]
    assert out["reply"] == "A." and last_request() == ("model-a", "Bearer sk-test-123")

    # A new key is sent from the next turn on.
    r = await admin.call("PATCH", f"/api/llm/providers/{provider}", json={"api_key": "sk-new-9"})
    assert r.status_code == 200, r.text
    fake_llm.script("model-a", ["A again."])
    assert (await post_chat(ada, "two", cid))["reply"] == "A again."
    assert last_request() == ("model-a", "Bearer sk-new-9")

    # A model switched off is not asked any more; the next one is.
    r = await admin.call("PATCH", f"/api/llm/models/{models['model-a']}", json={"enabled": False})
    assert r.status_code == 200, r.text
    fake_llm.script("model-b", ["B."])
    assert (await post_chat(ada, "three", cid))["reply"] == "B."
    assert last_request() == ("model-b", "Bearer sk-new-9")

    # A deleted model is gone at once, and so is a deleted provider with its models.
    assert (await admin.call("DELETE", f"/api/llm/models/{models['model-b']}")).status_code == 204
    out = await post_chat(ada, "four", cid)
    assert out["status"] == "failed" and out["error_code"] == "no_model"
    r = await admin.call("PATCH", f"/api/llm/models/{models['model-a']}", json={"enabled": True})
    assert r.status_code == 200, r.text
    assert (await admin.call("DELETE", f"/api/llm/providers/{provider}")).status_code == 204
    asked = len([r for r in fake_llm.requests if r.method == "POST"])
    out = await post_chat(ada, "five", cid)
    assert out["status"] == "failed" and out["error_code"] == "no_model"
    assert len([r for r in fake_llm.requests if r.method == "POST"]) == asked


async def test_a_providers_key_never_reaches_a_new_address(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    admin = await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    provider = (await admin.call("GET", "/api/llm/providers")).json()[0]["id"]
    ada = await signed_in(make_client, "ada")
    fake_llm.script("model-a", ["first"])
    assert (await post_chat(ada, "one"))["reply"] == "first"
    assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-test-123"

    with FakeLLM() as elsewhere:
        path = f"/api/llm/providers/{provider}"
        # Moving the address alone is refused while a key is stored: nothing changes.
        r = await admin.call("PATCH", path, json={"base_url": elsewhere.base_url_openai})
        assert r.status_code == 400 and "API key again" in r.text, r.text
        r = await admin.call("PATCH", path, json={"base_url": elsewhere.base_url_openai + "/"})
        assert r.status_code == 400
        row = (await admin.call("GET", "/api/llm/providers")).json()[0]
        assert row["base_url"] == fake_llm.base_url_openai and row["has_api_key"] is True
        # The same address (a trailing slash aside) or a new name keeps the key.
        r = await admin.call(
            "PATCH", path, json={"name": "Renamed", "base_url": fake_llm.base_url_openai + "/"}
        )
        assert r.status_code == 200 and r.json()["has_api_key"] is True

        # Moved with the key cleared: the new address gets no key at all.
        r = await admin.call(
            "PATCH", path, json={"base_url": elsewhere.base_url_openai, "clear_api_key": True}
        )
        assert r.status_code == 200 and r.json()["has_api_key"] is False, r.text
        elsewhere.script("model-a", ["keyless"])
        assert (await post_chat(ada, "two"))["reply"] == "keyless"
        assert "authorization" not in elsewhere.requests[-1].headers

        # Moved back with a new key: that key, and only it, goes there.
        r = await admin.call(
            "PATCH", path, json={"base_url": fake_llm.base_url_openai, "api_key": "sk-other-7"}
        )
        assert r.status_code == 200 and r.json()["has_api_key"] is True
        fake_llm.script("model-a", ["back"])
        assert (await post_chat(ada, "three"))["reply"] == "back"
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-other-7"
        seen = [r.headers.get("authorization", "") for r in elsewhere.requests]
        assert not any("sk-" in h for h in seen), seen

    # A change of kind that moves the address to the new kind's default needs the key too.
    r = await admin.call(
        "POST", "/api/llm/providers", json={"name": "Cloud", "kind": "openai", "api_key": "sk-c"}
    )
    assert r.status_code == 201, r.text
    cloud = f"/api/llm/providers/{r.json()['id']}"
    r = await admin.call("PATCH", cloud, json={"kind": "openrouter"})
    assert r.status_code == 400 and "API key again" in r.text
    r = await admin.call("PATCH", cloud, json={"kind": "openrouter", "api_key": "sk-or"})
    assert r.status_code == 200 and r.json()["kind"] == "openrouter"

    # A rename that read the row just before another request moved the provider (with
    # that address's own key) must not write the old address back under the new key:
    # the update re-checks what it read, in its transaction.
    from skald.errors import ConflictError

    llm, store = runtime.llm, runtime.llm.store
    read = store.provider
    moved_meanwhile = False

    async def read_then_someone_moves_it(provider_id: str) -> Any:
        nonlocal moved_meanwhile
        row = await read(provider_id)
        if not moved_meanwhile:
            moved_meanwhile = True
            await llm.update_provider(
                provider_id, None, None, "http://127.0.0.1:9/v1", "sk-for-nine", False
            )
        return row

    store.provider = read_then_someone_moves_it  # type: ignore[method-assign]
    try:
        with pytest.raises(ConflictError):
            await llm.update_provider(provider, "Renamed again", None, None, None, False)
    finally:
        store.provider = read  # type: ignore[method-assign]
    row = await store.provider(provider)
    assert row.base_url == "http://127.0.0.1:9/v1" and row.name == "Renamed"


async def test_a_catalogue_read_racing_a_write_is_not_kept(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    llm = runtime.llm
    model = (await llm.store.models())[0]
    # A turn reads the catalogue (nothing cached since the admin's writes) while an
    # admin deletes the model: the read was queued first and sees it, once; it must
    # not be kept for the turns after the delete returned.
    racing = asyncio.create_task(llm.models())
    await asyncio.sleep(0)
    await llm.store.delete_model(model.id)
    assert [m.id for m in await racing] == [model.id]
    assert await llm.models() == []
    # A provider's client (its key unsealed) is kept until the provider changes.
    client = await llm.client_for(model.provider_id)
    assert await llm.client_for(model.provider_id) is client
    await llm.store.delete_provider(model.provider_id)
    with pytest.raises(NotFoundError):
        await llm.client_for(model.provider_id)


async def test_an_edited_agent_file_applies_to_the_next_turn(
    runtime: Runtime,
    household: dict[str, str],
    make_client: MakeClient,
    fake_llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The composed prompt is cached between turns; an edit must still apply at once.
    monkeypatch.setattr(prompts, "SETTLED_AFTER_S", 0.0)  # keep even freshly copied files
    root = tmp_path / "agents"
    shutil.copytree(asset_dir("agents"), root)
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    ada = await signed_in(make_client, "ada")
    (await runtime.user_runtime(await runtime.core.users.get("ada"))).agents_root = root

    def system() -> str:
        content: str = fake_llm.bodies("openai")[-1]["messages"][0]["content"]
        return content

    fake_llm.script("model-a", ["1.", "2.", "3."])
    cid = (await post_chat(ada, "one"))["conversation_id"]
    assert "Always answer in rhyme." not in system()
    with (root / "assistant" / "AGENT.md").open("a") as f:
        f.write("\nAlways answer in rhyme.\n")
    await post_chat(ada, "two", cid)
    assert "Always answer in rhyme." in system()
    fragment = root / "common" / "safety.md"
    fragment.write_text(fragment.read_text() + "\nNever juggle knives.\n")
    await post_chat(ada, "three", cid)
    assert "Always answer in rhyme." in system() and "Never juggle knives." in system()


async def test_owner_history_starts_a_turn_in_one_step_unless_a_call_is_open(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    await signed_in(make_client, "ada")  # her sign-in unlocks her data
    mine = await runtime.user_runtime(await runtime.core.users.get("ada"))
    conversation = await mine.hub.new_conversation()
    history = OwnerHistory(mine.handle.db, conversation.id)
    photo = Attachment(
        name="a.png", path=f"uploads/{conversation.id}/a.png", mime="image/png", size=3
    )
    history.pending_attachments = [photo]
    hello = Message(role="user", content=[TextPart("hello")])
    assert await history.start_turn(hello) == [hello] == await history.load()
    assert history.pending_attachments == []
    assert (await mine.hub.store.items(conversation.id))[0].attachments == [photo]

    call = ToolCall(id="call_1", name="read_file", arguments={"path": "user-memory/x.md"})
    await history.append(Message(role="assistant", tool_calls=[call]))
    history.pending_attachments = [photo]
    again = Message(role="user", content=[TextPart("again")])
    # The call is still open: nothing is written, the attachments wait for the append.
    assert await history.start_turn(again) is None
    assert len(await history.load()) == 2 and history.pending_attachments == [photo]
    await history.append_result(
        Message(role="tool", content=[TextPart("ok")], tool_call_id="call_1"), CallState.DONE
    )
    loaded = await history.start_turn(again)
    assert loaded is not None and loaded[-1] == again and len(loaded) == 4
    assert (await mine.hub.store.items(conversation.id))[-1].attachments == [photo]


async def test_a_model_chosen_after_the_message_was_claimed_answers_its_turn(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    """A message's claim marks the conversation running and reads it in one trip, and
    its runner sets the turn up from that copy only while no conversation row was
    written since; a model the member switched to in between (a second tab) answers,
    never the one the copy names."""
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai"), ("model-b", "openai")])
    models = {
        m["model"]: m["id"]
        for m in (await (await signed_in(make_client, "mum")).call("GET", "/api/llm/models")).json()
    }
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"model_id": models["model-a"]})
    assert r.status_code == 200, r.text
    mine = runtime.user_runtimes[household["ada"]]
    claim = await mine.hub.store.claim(cid, "hello")
    assert claim.marked_at is not None and claim.named
    assert (claim.conversation.status, claim.conversation.model_id) == (
        "running",
        models["model-a"],
    )
    assert mine.hub.store.unchanged_since(claim)
    r = await ada.call("PATCH", f"/api/conversations/{cid}", json={"model_id": models["model-b"]})
    assert r.status_code == 200, r.text
    assert not mine.hub.store.unchanged_since(claim)
    fake_llm.script("model-b", ["B."])
    job = TurnJob(
        kind="turn", message=Message(role="user", content=[TextPart("hello")]), claim=claim
    )
    mine.hub._runner(cid).join_or_queue(job)
    result = await asyncio.wait_for(job.done, 30)
    assert (result.status, result.text) == ("done", "B.")
    posted = [r for r in fake_llm.requests if r.method == "POST"]
    assert [r.body["model"] for r in posted] == ["model-b"]
    assert (await mine.hub.store.get(cid)).status == "idle"


async def test_a_claim_marks_only_an_idle_conversation_and_names_only_an_untitled_one(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient
) -> None:
    """A message queued behind a running turn, or while a call waits for an approval,
    must not take over the status (the runner marks it when its turn starts), and a
    conversation's title is given once, by its first message."""
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    store = runtime.user_runtimes[household["ada"]].hub.store
    first = await store.claim(cid, "first words")
    assert first.named and first.marked_at is not None
    again = await store.claim(cid, "second words")
    assert (again.named, again.marked_at) == (False, None)
    assert (again.conversation.title, again.conversation.status) == ("first words", "running")
    await store.update(cid, status="awaiting_approval")
    waiting = await store.claim(cid, "third words")
    assert waiting.marked_at is None and waiting.conversation.status == "awaiting_approval"
    with pytest.raises(NotFoundError):
        await store.claim("not-a-conversation", "x")


async def test_a_message_whose_request_is_cancelled_mid_claim_still_runs_and_ends_idle(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    """The claim marks the conversation running before the job is queued: a request
    cancelled while the claim is on its way (a client gone, a shutdown of the request's
    task) must not leave a conversation marked running with no turn to end it."""
    await admin_adds_models(make_client, fake_llm, [("m", "openai")])
    fake_llm.script("m", ["Done."])
    ada = await signed_in(make_client, "ada")
    cid = (await ada.call("POST", "/api/conversations", json={})).json()["id"]
    mine = runtime.user_runtimes[household["ada"]]
    hold = threading.Event()
    held = asyncio.ensure_future(mine.hub.db.call(lambda c: hold.wait(10)))
    sending = asyncio.ensure_future(mine.hub.send(cid, [TextPart("hello")], [], "hello"))
    for _ in range(5):
        await asyncio.sleep(0)  # the claim is queued behind the held work
    sending.cancel()
    hold.set()
    await held
    with pytest.raises(asyncio.CancelledError):
        await sending
    for _ in range(500):  # the shielded claim and its turn go on: up to 10 s
        history = await OwnerHistory(mine.hub.db, cid).load()
        if len(history) >= 2:
            break
        await asyncio.sleep(0.02)
    assert [m.role for m in history] == ["user", "assistant"]
    await wait_idle(ada, cid)


async def test_a_claim_on_another_members_conversation_writes_nothing_even_in_parallel(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, fake_llm: FakeLLM
) -> None:
    """The claim is the proof of ownership now (no read before it): Tim's messages to
    Ada's conversation, sent at once through both doors, are all 404, and Ada's
    conversation keeps its status and title (the claim ran on Tim's own database)."""
    await admin_adds_models(make_client, fake_llm, [("model-a", "openai")])
    fake_llm.script("model-a", ["hi Ada"])
    ada = await signed_in(make_client, "ada")
    tim = await signed_in(make_client, "tim")
    cid = (await post_chat(ada, "hello"))["conversation_id"]
    await wait_idle(ada, cid)
    before = await runtime.user_runtimes[household["ada"]].hub.store.get(cid)
    answers = await asyncio.gather(
        *(
            tim.call("POST", f"/api/conversations/{cid}/messages", json={"text": f"mine {i}"})
            for i in range(5)
        ),
        *(
            tim.call("POST", "/api/chat", json={"text": "x", "conversation_id": cid})
            for _ in range(3)
        ),
    )
    assert [r.status_code for r in answers] == [404] * 8, [r.text for r in answers]
    after = await runtime.user_runtimes[household["ada"]].hub.store.get(cid)
    assert (after.status, after.title, after.updated_at) == (
        before.status,
        before.title,
        before.updated_at,
    )
    assert (await tim.call("GET", "/api/conversations")).json() == []
