"""Run llama.cpp's own OpenAI-compatible server (xllamacpp, in-process) until killed.

Started as a subprocess by tests/real_model_support.py with the cached xllamacpp on its
path, so a test can kill it mid-stream and start it again on the same port. Listens on
127.0.0.1 only, temperature 0 (answers repeat from run to run), Jinja templates on.

Usage: serve.py MODEL.gguf TEMPLATE.jinja PORT [--ctx N] [--threads N] [--max-tokens N]
       [--stop TEXT]...
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path)
    parser.add_argument("template", type=Path)
    parser.add_argument("port", type=int)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stop", action="append", default=[])
    parser.add_argument("--max-tokens", type=int, default=-1)
    args = parser.parse_args()

    import xllamacpp as xlc  # the cached target dir is on PYTHONPATH, not in the venv

    params = xlc.CommonParams()
    params.model.path = str(args.model)
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: its prompt cache serves the next turn
    # Gemma 3 uses sliding-window attention: without a full-size cache llama.cpp cannot
    # reuse a cached prefix longer than the window and reads the whole prompt every time.
    params.swa_full = True
    params.use_jinja = True
    params.chat_template = args.template.read_text()
    params.sampling.temp = 0.0
    params.sampling.seed = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.warmup = False
    # Defaults for every request: stop strings, and the most tokens of an answer when the
    # request names none (a request's max_tokens wins: Skald sends the model's limit).
    params.antiprompt = args.stop
    params.n_predict = args.max_tokens
    params.endpoint_props = True
    server = xlc.Server(params)
    print(f"listening {server.listening_address}", flush=True)
    # The server runs on its own threads; SIGTERM or SIGKILL ends the process.
    threading.Event().wait()


if __name__ == "__main__":
    main()
