"""API tokens and `/v1`: the streamed completion's overhead against the web path, and
another member's web latency while 20 token clients stream answers.

Run from the repository root:

    .venv/bin/python bench/bench_tokens.py            # 10 s of load per phase
    .venv/bin/python bench/bench_tokens.py --quick    # 4 s per phase

It starts a real `skald serve` (tests/harness.py) with the fake model of the tests
(tests/fake_llm.py: a real HTTP server streaming its answer in 8-character deltas),
the administrator, `ada` (the token clients' member) and `bo` (the web member), both
signed in, and `[tokens] per_minute` raised so the rate limit does not shape the load.

1. **Overhead.** The same one-turn exchange, one request at a time, through
   `POST /v1/chat/completions` streamed with a Bearer token (reading every `data:` line
   to `[DONE]`), and through the web path: `POST /api/chat` with `bo`'s session and
   CSRF token (what `skald chat` and the browser's synchronous path use). Medians of
   the round trips, and their ratio (v1 / web).
2. **Latency under token load.** `bo` reads his conversation list
   (`GET /api/conversations`) every 20 ms; p50/p99 idle, then while 20 token clients
   (20 tokens of `ada`, each its own conversation name) loop on streamed completions
   whose answer takes about 0.4 s to stream (the fake's delay between deltas). The p99
   ratio to idle is the figure to keep within 2x.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fake_llm import FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess

PW = "a member's long password"
CLIENTS = 20
ANSWER = "A short answer from the fake model, streamed in small deltas."


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _v1(http: httpx.AsyncClient, token: str, name: str) -> float:
    started = time.perf_counter()
    body = {"model": "skald", "messages": [{"role": "user", "content": "hello"}], "stream": True}
    headers = {"Authorization": f"Bearer {token}", "X-Skald-Conversation": name}
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line == "data: [DONE]":
                break
    return time.perf_counter() - started


async def _web(http: httpx.AsyncClient, csrf: str, cid: str) -> float:
    started = time.perf_counter()
    r = await http.post(
        "/api/chat", json={"text": "hello", "conversation_id": cid}, headers={"X-CSRF-Token": csrf}
    )
    assert r.status_code == 200, r.text
    return time.perf_counter() - started


async def overhead(srv: ServerProcess, fake: FakeLLM, token: str, bo: Api, rounds: int) -> None:
    fake.script("m", [Text(ANSWER, chunk_size=8)] * (2 * rounds + 4))
    cid = bo.post("/api/conversations", json={}).json()["id"]
    cookies = {"skald_session": bo.session_cookie}
    v1, web = [], []
    async with httpx.AsyncClient(base_url=srv.url, timeout=60, cookies=cookies) as http:
        for _ in range(2):  # warm-up
            await _v1(http, token, "bench")
            await _web(http, bo.csrf, cid)
        for i in range(rounds):  # alternate, so drift hits both alike
            if i % 2:
                v1.append(await _v1(http, token, "bench"))
                web.append(await _web(http, bo.csrf, cid))
            else:
                web.append(await _web(http, bo.csrf, cid))
                v1.append(await _v1(http, token, "bench"))
    a, b = statistics.median(v1), statistics.median(web)
    print(f"  /v1 streamed     median {a * 1000:7.1f} ms  ({rounds} turns)")
    print(f"  /api/chat (web)  median {b * 1000:7.1f} ms  ({rounds} turns)")
    print(f"  ratio v1/web     {a / b:.2f}")


async def _watch(srv: ServerProcess, bo: Api, seconds: float) -> list[float]:
    out: list[float] = []
    cookies = {"skald_session": bo.session_cookie}
    async with httpx.AsyncClient(base_url=srv.url, timeout=30, cookies=cookies) as http:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            r = await http.get("/api/conversations")
            assert r.status_code == 200
            out.append(time.perf_counter() - started)
            await asyncio.sleep(0.02)
    return out


async def _clients(url: str, tokens: list[str], seconds: float) -> int:
    done = [0]
    end = time.perf_counter() + seconds

    async def one(n: int, token: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while time.perf_counter() < end:
                await _v1(http, token, f"client-{n}")
                done[0] += 1

    await asyncio.gather(*(one(n, t) for n, t in enumerate(tokens)))
    return done[0]


def _load_process(url: str, tokens: list[str], seconds: float, out: Queue[int]) -> None:
    # Its own process: the token clients' parsing must not delay the watcher's loop.
    out.put(asyncio.run(_clients(url, tokens, seconds)))


async def under_load(
    srv: ServerProcess, fake: FakeLLM, tokens: list[str], bo: Api, seconds: float
) -> None:
    idle = await _watch(srv, bo, seconds)
    fake.script("m", [Text(ANSWER, chunk_size=8, chunk_delay=0.05)] * 20_000)
    context = multiprocessing.get_context("spawn")
    done: Queue[int] = context.Queue()
    load = context.Process(target=_load_process, args=(srv.url, tokens, seconds + 3.0, done))
    load.start()
    await asyncio.sleep(2.0)  # started, and every client has a turn running
    busy = await _watch(srv, bo, seconds)
    turns = await asyncio.to_thread(done.get)
    load.join()
    print(
        f"  bo idle          p50 {_ms(idle, 0.5):6.1f} ms  p99 {_ms(idle, 0.99):6.1f} ms  ({len(idle)} reads)"
    )
    print(
        f"  bo, {CLIENTS} clients  p50 {_ms(busy, 0.5):6.1f} ms  p99 {_ms(busy, 0.99):6.1f} ms  ({len(busy)} reads)"
    )
    print(f"  p99 ratio        {_ms(busy, 0.99) / _ms(idle, 0.99):.2f}x   ({turns} token turns)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 s per phase, 20 turns")
    args = parser.parse_args(argv)
    seconds, rounds = (4.0, 20) if args.quick else (10.0, 60)
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as fake:
        srv = ServerProcess(Path(tmp))
        srv.create_admin()
        for name in ("ada", "bo"):
            srv.add_user(name, PW)
        (srv.data / "config.toml").write_text("[tokens]\nper_minute = 100000\n")
        srv.start()
        try:
            admin = Api(srv.url)
            admin.login(ADMIN, ADMIN_PW)
            admin.add_model(fake.base_url_openai, "m")
            ada, bo = Api(srv.url), Api(srv.url)
            ada.login("ada", PW)
            bo.login("bo", PW)
            tokens = [
                ada.post("/api/tokens", json={"name": f"c{i}", "scopes": ["openai"]}).json()[
                    "token"
                ]
                for i in range(CLIENTS)
            ]
            print("Overhead of /v1 (streamed, token) against the web path (session):")
            asyncio.run(overhead(srv, fake, tokens[0], bo, rounds))
            print(f"Another member's web latency while {CLIENTS} token clients stream:")
            asyncio.run(under_load(srv, fake, tokens, bo, seconds))
        finally:
            srv.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
