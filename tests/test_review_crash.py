"""kill -9 of a real `skald serve` in the middle of a review pass: after the restart the
interrupted run is `failed`, the same window is reviewed again (its coverage never
moved), exactly once, and one report is written. The runner ticks every second or two;
the first pass is started with the admin's "Run now"."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, Hang
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, household, wait_until
from review_support import REPORT, WORRY

PW = "tim's long password"
MARK = "Reviewing one person's conversations"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    config = "[system_agents]\nmin_tick_s = 1\nmax_tick_s = 2\n"
    with household(tmp_path, ("tim", PW), role="children", config=config) as srv:
        yield srv
    print(srv.own_log(60))


def _reviews(fake: FakeLLM) -> list[dict[str, Any]]:
    return [b for b in fake.bodies() if MARK in str(b["messages"][0]["content"])]


def _transcript(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"]).split("\n---\n", 1)[1]


def test_kill_9_mid_pass_reviews_the_same_window_again_once(
    server: ServerProcess, fake: FakeLLM
) -> None:
    mum = Api(server.url)
    mum.login(ADMIN, ADMIN_PW)
    mum.add_model(fake.base_url_openai, "model-a")
    ids = {u["username"]: u["id"] for u in mum.get("/api/users").json()}
    assert mum.request("PUT", f"/api/people/links/{ids[ADMIN]}/{ids['tim']}").status_code == 200
    fake.script("model-a", ["That sounds hard.", Hang(), REPORT])
    tim = Api(server.url)
    tim.login("tim", PW)
    r = tim.post("/api/chat", json={"text": WORRY})
    assert r.status_code == 200, r.text
    time.sleep(1.1)  # past the second the message was stored in

    assert mum.post("/api/system-agents/conversation-review/run").status_code == 202
    wait_until(lambda: _reviews(fake))
    running = mum.get("/api/system-agents/runs").json()
    assert [r["status"] for r in running] == ["running"]
    server.stop(signal.SIGKILL)

    server.start()
    mum = Api(server.url)
    mum.login(ADMIN, ADMIN_PW)  # her data opens again: the next tick serves her

    def reported() -> list[Any]:
        return list(mum.get("/api/reports").json())

    (report,) = wait_until(reported)
    assert report["title"] == "Tim felt nobody would notice him"
    first, second = _reviews(fake)
    assert _transcript(first) == _transcript(second)  # the same window, again

    def closed() -> list[Any]:  # the report is stored inside the run, before it closes
        runs = list(mum.get("/api/system-agents/runs").json())
        return runs if all(r["status"] != "running" for r in runs) else []

    runs = wait_until(closed)
    assert sorted(r["status"] for r in runs) == ["completed", "failed"]
    failed = next(r for r in runs if r["status"] == "failed")
    assert failed["error"] == "the server stopped during this run"

    # Once: a further pass finds nothing new and asks the model nothing.
    assert mum.post("/api/system-agents/conversation-review/run").status_code == 202
    time.sleep(2.5)
    assert len(_reviews(fake)) == 2
    assert len(mum.get("/api/system-agents/runs").json()) == 2
    assert len(reported()) == 1
