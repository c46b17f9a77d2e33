"""`kill -9` in the middle of a tool round: after a restart the turn resumes and
completes, and nothing is lost or duplicated."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, household, wait_until

PW = "ada's long password"


def _items(api: Api, cid: str) -> list[dict[str, Any]]:
    r = api.get(f"/api/conversations/{cid}/messages")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()
    return items


def test_kill_9_mid_tool_round_then_resume(tmp_path: Path) -> None:
    with FakeLLM() as fake, household(tmp_path, ("ada", PW)) as srv:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_openai, "m")
        fake.script(
            "m",
            [
                [
                    Call(
                        "write_file",
                        {"path": "user-memory/plans.md", "content": "# Plans\nBake bread."},
                    ),
                    Call(
                        "write_file",
                        {
                            "path": "shared-memory/plans.md",
                            "content": "# Plans\nBread on Sunday.",
                        },
                    ),
                ],
                Text("Both notes are saved."),
            ],
        )
        ada = Api(srv.url)
        ada.login("ada", PW)
        cid = ada.post("/api/conversations", json={}).json()["id"]
        assert (
            ada.post(
                f"/api/conversations/{cid}/messages", json={"text": "Save our plans"}
            ).status_code
            == 202
        )

        # One call of the round has finished, the other waits for a person: kill now.
        def half_done() -> bool:
            calls = {
                c["name"] + c["arguments"]["path"]: c["status"]
                for i in _items(ada, cid)
                for c in i["tool_calls"]
            }
            return (
                calls.get("write_fileuser-memory/plans.md") == "done"
                and "awaiting_approval" in calls.values()
            )

        wait_until(half_done)
        srv.stop(signal.SIGKILL)

        srv.start()
        ada = Api(srv.url)
        ada.login("ada", PW)  # unlocking resumes the interrupted turn
        pending = wait_until(
            lambda: [
                c
                for i in _items(ada, cid)
                for c in i["tool_calls"]
                if c["status"] == "awaiting_approval"
            ]
        )
        assert len(pending) == 1
        assert (
            ada.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "approve"}).status_code
            == 204
        )
        wait_until(lambda: _items(ada, cid)[-1]["text"] == "Both notes are saved.")

        items = _items(ada, cid)
        assert [i["role"] for i in items].count("user") == 1
        calls = [c for i in items for c in i["tool_calls"]]
        results = Counter(i["tool_call_id"] for i in items if i["role"] == "tool")
        assert len(calls) == 2 and all(results[c["id"]] == 1 for c in calls), items
        assert all(c["status"] == "done" for c in calls)
        assert sum(1 for i in items if i["text"] == "Both notes are saved.") == 1
        # The model was asked exactly twice: once for the calls, once for the answer.
        assert len(fake.bodies("openai")) == 2
        tool_msgs = [m for m in fake.bodies("openai")[1]["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == 2


def test_skald_chat_cli_talks_to_the_running_server(tmp_path: Path) -> None:
    with FakeLLM() as fake, household(tmp_path) as srv:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_anthropic, "claude-x", kind="anthropic", api_key="k")
        fake.script("claude-x", ["Hello from the assistant."])

        def chat(password: str) -> subprocess.CompletedProcess[str]:
            argv = ("chat", "Hello?", "--user", ADMIN, "--password-stdin", "--url", srv.url)
            return srv.cli(*argv, stdin=password + "\n")

        r = chat(ADMIN_PW)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "Hello from the assistant." and ": done" in r.stderr
        r = chat("wrong password")
        assert r.returncode == 1 and r.stderr.strip() == "skald: wrong username or password"
        srv.stop()
        r = chat(ADMIN_PW)
        assert r.returncode == 1 and "cannot reach" in r.stderr


def test_kill_9_with_an_approval_pending_then_approve_from_the_inbox(tmp_path: Path) -> None:
    with FakeLLM() as fake, household(tmp_path, ("ada", PW)) as srv:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_openai, "m")
        write = Call("write_file", {"path": "shared-memory/bins.md", "content": "# Bins\nTue."})
        fake.script("m", [[write], Text("Saved for everyone.")])
        ada = Api(srv.url)
        ada.login("ada", PW)
        cid = ada.post("/api/conversations", json={"title": "Bins"}).json()["id"]
        ada.post(f"/api/conversations/{cid}/messages", json={"text": "Note the bin day"})
        [before] = wait_until(lambda: ada.get("/api/inbox").json())
        assert before["tool"] == "write_file" and before["conversation_title"] == "Bins"
        srv.stop(signal.SIGKILL)

        srv.start()
        ada = Api(srv.url)
        ada.login("ada", PW)
        [after] = wait_until(lambda: ada.get("/api/inbox").json())
        assert after["id"] == before["id"] and after["created_at"] == before["created_at"]
        assert ada.post(f"/api/inbox/{after['id']}/approve", json={}).status_code == 204
        wait_until(lambda: _items(ada, cid)[-1]["text"] == "Saved for everyone.")
        assert ada.get("/api/inbox").json() == []
        calls = [c for i in _items(ada, cid) for c in i["tool_calls"]]
        assert [c["status"] for c in calls] == ["done"]
        assert len(fake.bodies("openai")) == 2
