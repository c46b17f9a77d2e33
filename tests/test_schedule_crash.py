"""kill -9 of a real `skald serve` during a job's run and during a background task: after
the restart the cut run is interrupted, the job's next occurrence still runs, the task
is finished, and nothing runs twice (each occurrence's prompt is in the history once, no
due time has two runs, the task's prompt was given once and its end relayed once).

The member is encrypted and has opted in ("work while I'm signed out"), so the server
opens her data at start without a sign-in; the scheduler ticks every second."""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household, wait_until

PW = "ada's long password"
PROMPT = "Say ping to the user"
TASK = "Find the tide tables for Genoa"
# The answer the killed server waits for: still "thinking" when the kill comes.
SLOW = Text("too late", delay=60.0)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with household(
        tmp_path, ("ada", PW), config="[schedule]\ntick_s = 1\nmin_interval_s = 1\n"
    ) as srv:
        yield srv
    # Shown only when the test fails: the server's own lines, not the request log.
    print(srv.own_log(80))


_until = functools.partial(wait_until, seconds=120.0)


def _setup(server: ServerProcess, fake: FakeLLM) -> tuple[Api, str]:
    """Models (AUTO picks fake-a: background tasks; the chat, and so the jobs it asks
    for, are pinned to fake-b), ada
    signed in with the opt-in on, and her chat conversation."""
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    admin.add_model(fake.base_url_openai, "fake-a")
    admin.add_model(fake.base_url_openai, "fake-b")
    ada = Api(server.url)
    ada.login("ada", PW)
    r = ada.request("PUT", "/api/schedule/keep-key", json={"enabled": True})
    assert r.status_code == 200 and r.json() == {"enabled": True}, r.text
    r = ada.post("/api/chat", json={"text": "/model fake-b"})
    assert r.status_code == 200, r.text
    return ada, r.json()["conversation_id"]


def _asked(fake: FakeLLM, prompt: str) -> bool:
    """Whether a model request ends with `prompt` as the user's message: the run's own
    turn has begun, so its prompt is written. Not just any body naming it: the chat's
    requests after the schedule (or background_task) call carry the prompt in the call's
    arguments while the run may be claimed and not yet started."""
    last = [b["messages"][-1] for b in fake.bodies() if b.get("messages")]
    return any(m["role"] == "user" and prompt in str(m["content"]) for m in last)


def _chat(ada: Api, conversation_id: str, text: str) -> str:
    r = ada.post("/api/chat", json={"text": text, "conversation_id": conversation_id})
    assert r.status_code == 200 and r.json()["status"] == "done", r.text
    return str(r.json()["reply"])


def _restart(server: ServerProcess) -> Api:
    code, _ = server.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL
    server.start()
    ada = Api(server.url)
    ada.login("ada", PW)  # only to read the API: the kept key opened her data at boot
    return ada


@pytest.mark.timeout(300)
def test_kill_9_during_a_job_run_interrupts_it_and_the_next_occurrence_runs_once(
    server: ServerProcess, fake: FakeLLM
) -> None:
    ada, conversation = _setup(server, fake)
    create = {"mode": "create", "title": "ping", "prompt": PROMPT, "cron": "*/10 * * * * *"}
    # The job keeps the model of the conversation that asked for it (fake-b).
    fake.script("fake-b", [[Call("schedule", create)], "Created.", SLOW])
    fake.script("fake-a", [SLOW])
    assert _chat(ada, conversation, "say ping every ten seconds") == "Created."
    (job,) = ada.get("/api/schedule/jobs").json()

    def running_run() -> list[dict[str, Any]]:
        runs = ada.get("/api/schedule/runs").json()
        return [r for r in runs if r["outcome"] == "running"] if _asked(fake, PROMPT) else []

    (cut,) = _until(running_run)
    fake.script("fake-a", ["pong"] * 30)
    fake.script("fake-b", ["pong"] * 30)
    ada = _restart(server)

    def settled() -> list[dict[str, Any]]:
        runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
        later = [r for r in runs if r["outcome"] == "succeeded" and r["due_at"] > cut["due_at"]]
        return runs if later else []

    _until(settled, show=lambda: ada.get(f"/api/schedule/jobs/{job['id']}/runs").json())
    r = ada.patch(f"/api/schedule/jobs/{job['id']}", json={"state": "paused"})
    assert r.status_code == 200, r.text
    time.sleep(0.5)  # a run claimed just before the pause ends
    runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
    by_id = {r["id"]: r for r in runs}
    assert by_id[cut["id"]]["outcome"] == "interrupted"
    assert by_id[cut["id"]]["ended_at"] is not None
    dues = [r["due_at"] for r in runs]
    assert len(dues) == len(set(dues)), runs  # no occurrence ran twice
    # Each occurrence's prompt went into the job's conversation exactly once.
    items = ada.get(f"/api/conversations/{job['conversation_id']}/messages").json()
    prompts = [i for i in items if i["role"] == "user" and PROMPT in i["text"]]
    started = [r for r in runs if r["outcome"] != "skipped"]
    assert len(prompts) == len(started), (prompts, runs)


@pytest.mark.timeout(300)
def test_kill_9_during_a_background_task_finishes_it_after_the_restart_once(
    server: ServerProcess, fake: FakeLLM
) -> None:
    ada, conversation = _setup(server, fake)
    start = {"mode": "start", "title": "tides", "task": TASK}
    fake.script("fake-b", [[Call("background_task", start)], "Started.", "The tides are in."])
    fake.script("fake-a", [SLOW])
    assert _chat(ada, conversation, "look up the tides in the background") == "Started."

    def running_task() -> list[dict[str, Any]]:
        tasks = ada.get("/api/schedule/tasks").json()
        return [t for t in tasks if t["state"] == "running"] if _asked(fake, TASK) else []

    (task,) = _until(running_task)
    fake.script("fake-a", ["High tide at 14:02."])
    ada = _restart(server)

    def ended() -> dict[str, Any] | None:
        (now,) = ada.get("/api/schedule/tasks").json()
        return now if now["relayed"] else None

    done = _until(ended)
    assert (done["state"], done["result"]) == ("completed", "High tide at 14:02.")
    runs = [r for r in ada.get("/api/schedule/runs").json() if r["task_id"] == task["id"]]
    assert sorted(r["outcome"] for r in runs) == ["interrupted", "succeeded"]
    helper = ada.get(f"/api/conversations/{task['conversation_id']}/messages").json()
    assert [i["text"] for i in helper if i["role"] == "user"] == [TASK]

    def relayed_answer() -> list[dict[str, Any]]:
        items = ada.get(f"/api/conversations/{conversation}/messages").json()
        return items if items and items[-1]["text"] == "The tides are in." else []

    items = _until(relayed_answer)
    ends = [i for i in items if i["role"] == "user" and "is done." in i["text"]]
    assert len(ends) == 1 and "High tide at 14:02." in ends[0]["text"]


@pytest.mark.timeout(300)
def test_kill_9_while_a_jobs_request_waits_keeps_it_answerable_and_the_run_ends_once(
    server: ServerProcess, fake: FakeLLM
) -> None:
    """The run waits in ada's Inbox for a write to the household's notes; the server is
    killed; after the restart the same request is in her Inbox, the run still waits (not
    interrupted), her approval resumes the turn from its stored history: the write runs
    once, the run succeeds once, the prompt was given once."""
    ada, _ = _setup(server, fake)
    write = Call("write_file", {"path": "shared-memory/bins.md", "content": "Monday"})
    fake.script("fake-a", [[write], "Noted the bins day."])
    job_in = {
        "kind": "prompt", "title": "Bins day", "prompt": "Note the bins day",
        "cron": "*/10 * * * * *", "approval_window_s": 600,
    }  # fmt: skip
    r = ada.post("/api/schedule/jobs", json=job_in)
    assert r.status_code == 201, r.text
    job = r.json()

    def waiting() -> list[dict[str, Any]]:
        runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
        return [r for r in runs if r["outcome"] == "running" and r["waiting_call"]]

    (run,) = _until(waiting)
    # No more occurrences: only this run is under test.
    r = ada.patch(f"/api/schedule/jobs/{job['id']}", json={"state": "paused"})
    assert r.status_code == 200, r.text
    (item,) = ada.get("/api/inbox").json()
    assert (item["id"], item["origin"], item["origin_title"]) == (
        run["waiting_call"], "scheduled", "Bins day"
    )  # fmt: skip

    ada = _restart(server)
    # Still there, still answerable, with its label; the run was not interrupted.
    (again,) = _until(lambda: ada.get("/api/inbox").json())
    assert (again["id"], again["origin_title"], again["expires_at"]) == (
        item["id"], "Bins day", item["expires_at"]
    )  # fmt: skip
    runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
    assert [(r["id"], r["outcome"]) for r in runs if r["outcome"] != "skipped"] == [
        (run["id"], "running")
    ]
    r = ada.post(f"/api/inbox/{item['id']}/approve")
    assert r.status_code == 204, r.text

    def ended() -> list[dict[str, Any]]:
        runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
        return [r for r in runs if r["id"] == run["id"] and r["outcome"] != "running"]

    (done,) = _until(ended, show=lambda: ada.get(f"/api/schedule/jobs/{job['id']}/runs").json())
    assert (done["outcome"], done["error"], done["waiting_call"]) == ("succeeded", None, None)
    runs = ada.get(f"/api/schedule/jobs/{job['id']}/runs").json()
    assert [r["id"] for r in runs if r["outcome"] != "skipped"] == [run["id"]]  # one run
    items = ada.get(f"/api/conversations/{job['conversation_id']}/messages").json()
    writes = [c for i in items for c in i["tool_calls"] if c["name"] == "write_file"]
    assert len(writes) == 1, items  # asked once, run once
    assert [i["role"] for i in items if i["role"] == "tool"] == ["tool"]
    prompts = [i for i in items if i["role"] == "user" and "Note the bins day" in i["text"]]
    assert len(prompts) == 1
    assert items[-1]["role"] == "assistant" and items[-1]["text"] == "Noted the bins day."
    assert ada.get("/api/inbox").json() == []
