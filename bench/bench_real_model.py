"""Prompt size per agent (before/after a revision) and time to first token against a real
llama.cpp server, first request and second (prompt cache hit), in one run.

Run from the repository root, after `python tests/real_model/prepare.py` (ci/test.sh does
it):

    .venv/bin/python bench/bench_real_model.py                 # before = 9efb662
    .venv/bin/python bench/bench_real_model.py --before REV    # another "before" revision
    .venv/bin/python bench/bench_real_model.py --no-server     # only the prompt table

1. Prompt tokens per role and agent (characters / 4, as compaction estimates them) for the
   working tree and for `--before` (its tree from `git archive`, measured in a
   subprocess): the system prompt Skald composes for a member with empty notes and the
   schemas of the tools it offers, the fixed part of every model request.
2. The real count for the member's assistant: its first request (system prompt, tool
   schemas, one user message, in Skald's own OpenAI wire format) through the Hermes
   template of tests/real_model/, tokenised by the server (/apply-template, /tokenize).
3. Time to first token: the same request streamed to a fresh llama.cpp server (xllamacpp,
   gemma-3-270m, two threads), from sending to the first chunk that carries text or a
   tool call; then a second request with another user message, whose prefix (system
   prompt and tools) the server's prompt cache already holds. Printed with the ratio
   second / first: how much of the first wait was reading the fixed prompt. Both
   requests are ended after their first token.
4. The same for the compact profile (skald/core/model_profile.py: short fragments, core
   tools and `more_tools`), on a fresh server of its own, side by side with the full
   prompt, and the ratio of the two first requests (`--quick`: first requests only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from harness import free_port  # noqa: E402
from prompt_size import PromptSize, measure, table  # noqa: E402
from real_model_support import LlamaServer, prepared  # noqa: E402

from skald.llm.openai_compat import wire_body  # noqa: E402
from skald.llm.types import Message, Request, TextPart  # noqa: E402

BEFORE = "9efb662"  # the last commit before issue 16's fault 5


def sizes_at(rev: str) -> list[dict[str, object]]:
    """Per role and agent prompt sizes of revision `rev`, measured in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(  # noqa: S603
            ["git", "-C", str(ROOT), "archive", rev, "skald", "agents", "installer", "web"],  # noqa: S607
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        code = (
            "import asyncio, json, sys, msgspec; from pathlib import Path;"
            "from prompt_size import measure;"
            "sizes = asyncio.run(measure(Path(sys.argv[1])));"
            "print('SIZES', json.dumps([{'role': s.role, 'agent': s.agent, 'system_tokens': "
            "s.system_tokens, 'tool_tokens': s.tool_tokens, 'tools': len(s.tools)} "
            "for s in sizes]))"
        )
        out = subprocess.run(  # noqa: S603
            [sys.executable, "-c", code, str(Path(tmp) / "data")],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,  # `python -c` puts the working directory first on sys.path
            env={
                "PYTHONPATH": f"{tmp}:{ROOT / 'tests'}",
                "PATH": "/usr/bin:/bin",
                "SKALD_LOG_LEVEL": "error",
            },
        ).stdout
        line = next(x for x in out.splitlines() if x.startswith("SIZES "))
        rows: list[dict[str, object]] = json.loads(line.removeprefix("SIZES "))
        return rows


def compare(before: list[dict[str, object]], after: list[PromptSize]) -> str:
    old = {(str(r["role"]), str(r["agent"])): r for r in before}
    lines = [f"{'role':9} {'agent':20} {'before':>7} {'after':>7} {'after/before':>13}"]
    for s in after:
        r = old.get((s.role, s.agent))
        if r is None:
            lines.append(f"{s.role:9} {s.agent:20} {'-':>7} {s.total:7}")
            continue
        total = int(str(r["system_tokens"])) + int(str(r["tool_tokens"]))
        lines.append(f"{s.role:9} {s.agent:20} {total:7} {s.total:7} {s.total / total:13.2f}")
    return "\n".join(lines)


def request_body(size: PromptSize, text: str) -> dict[str, object]:
    request = Request(
        model="gemma-3-270m",
        messages=[
            Message(role="system", content=[TextPart(size.prompt)]),
            Message(role="user", content=[TextPart(text)]),
        ],
        tools=list(size.specs),
        max_tokens=16,
    )
    return wire_body(request, "max_tokens")


def first_token_s(server: LlamaServer, body: dict[str, object]) -> float:
    """Seconds from sending to the first chunk with text or a tool call; then hangs up."""
    start = time.perf_counter()
    with (
        httpx.Client(timeout=httpx.Timeout(10, read=900)) as client,
        client.stream("POST", f"{server.base_url}/chat/completions", json=body) as r,
    ):
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:]).get("choices", []):
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("tool_calls"):
                    return time.perf_counter() - start
    raise RuntimeError("the stream ended without a token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with")
    parser.add_argument("--no-server", action="store_true", help="only the prompt sizes")
    parser.add_argument(
        "--quick", action="store_true", help="first requests only (no cache-hit request)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        after = asyncio.run(measure(Path(tmp) / "data"))
    print("Prompt tokens (characters / 4), system prompt + tool schemas, empty notes:")
    print(table(after))
    print(f"\nBefore ({args.before}) and after (working tree):")
    print(compare(sizes_at(args.before), after))
    if args.no_server:
        return

    root = prepared()
    if root is None:
        sys.exit("the real model is not prepared: run tests/real_model/prepare.py first")
    with tempfile.TemporaryDirectory() as tmp:
        compact = asyncio.run(measure(Path(tmp) / "data", profile="compact"))
    figures = {}
    for name, sizes in (("full", after), ("compact", compact)):
        assistant = next(s for s in sizes if s.role == "member" and s.agent == "assistant")
        figures[name] = (assistant, *time_first_tokens(root, assistant, warm=not args.quick))
    for name, (assistant, tokens, cold, warm) in figures.items():
        print(
            f"\nMember's assistant, {name} profile, first request: {tokens} real tokens "
            f"({assistant.total} estimated; chars/4 vs tokenizer: {tokens / assistant.total:.2f})"
        )
        print("Time to first token (llama.cpp, gemma-3-270m Q4_K_M, 2 threads):")
        print(f"  first request (cold)        {cold:8.2f} s")
        if warm is not None:
            print(f"  second request (cache hit)  {warm:8.2f} s")
            print(f"  second / first              {warm / cold:8.2f}")
    full_cold, compact_cold = figures["full"][2], figures["compact"][2]
    print(f"\nFirst request, compact / full: {compact_cold / full_cold:.2f}")


def time_first_tokens(
    root: Path, assistant: PromptSize, *, warm: bool
) -> tuple[int, float, float | None]:
    """Real prompt tokens and the time to first token of a first request on a fresh
    server (and of a second one, whose prefix the server's cache holds, with `warm`)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = LlamaServer(root, Path(tmp) / "llama.log", port=free_port())
        server.start("hermes-tools")
        try:
            first = request_body(assistant, "Hello! What can you do for me?")
            second = request_body(assistant, "Thanks. And what is the weather like?")
            tokens = server.prompt_tokens(first)
            cold = first_token_s(server, first)
            again = first_token_s(server, second) if warm else None
        finally:
            server.close()
    return tokens, cold, again


if __name__ == "__main__":
    main()
