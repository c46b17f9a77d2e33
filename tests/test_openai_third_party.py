"""A third-party OpenAI client holds a two-turn conversation with Skald's `/v1`:
Vercel's AI SDK (npm `ai` 7.0.173 with `@ai-sdk/openai-compatible` 3.0.92, on Node),
sending the whole history each time, the second answer streamed. Skald's conversation
has each user message once and the second request carried the first turn's context.

The packages are installed with npm into a cache folder named after their versions
(SKALD_CI_CACHE, as ci/test.sh's npm caches); without node or npm the test fails under
SKALD_CI and is skipped elsewhere (`prerequisites.unavailable`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from fake_llm import FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, household
from prerequisites import unavailable

PACKAGES = ("ai@7.0.173", "@ai-sdk/openai-compatible@3.0.92")
SCRIPT = Path(__file__).resolve().parent / "ai_sdk_client.mjs"
PW = "ada's long password"


def ai_sdk() -> Path:
    """The folder with the AI SDK installed (made once per version pair)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        unavailable("node and npm are needed (Debian: nodejs npm)")
    cache = Path(os.environ.get("SKALD_CI_CACHE", "/var/cache/skald-ci"))
    folder = cache / ("ai-sdk-" + "-".join(p.replace("/", "_").replace("@", "") for p in PACKAGES))
    if not (folder / "node_modules" / "ai").exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        (partial / "package.json").write_text('{"name": "skald-ai-sdk-test", "private": true}')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts",
             "--loglevel=error", *PACKAGES],
            cwd=partial, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return folder


def test_vercels_ai_sdk_holds_a_two_turn_conversation_with_skald(tmp_path: Path) -> None:
    folder = ai_sdk()
    with FakeLLM() as fake, household(tmp_path, ("ada", PW)) as srv:
        admin = Api(srv.url)
        admin.login(ADMIN, ADMIN_PW)
        admin.add_model(fake.base_url_openai, "m")
        ada = Api(srv.url)
        ada.login("ada", PW)
        r = ada.post("/api/tokens", json={"name": "app", "scopes": ["openai"]})
        fake.script("m", [Text("Nice to meet you, Ada."), Text("Your name is Ada.")])
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "SKALD_V1": srv.url + "/v1",
            "SKALD_TOKEN": r.json()["token"],
        }
        run = subprocess.run(
            ["node", SCRIPT.name], cwd=folder, env=env, capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr
        answers = json.loads(run.stdout)
        assert answers == {"first": "Nice to meet you, Ada.", "second": "Your name is Ada."}
        [conv] = ada.get("/api/conversations").json()
        items = ada.get(f"/api/conversations/{conv['id']}/messages").json()
        assert [i["text"] for i in items if i["role"] == "user"] == [
            "My name is Ada",
            "What is my name?",
        ]
        second = fake.bodies("openai")[-1]["messages"]
        assert any("My name is Ada" in str(m.get("content")) for m in second)
