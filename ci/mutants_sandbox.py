#!/usr/bin/env python3
"""A curated mutation check of the sandbox's security decisions (outside CI's budget).

Each mutant plants one small bug in one decision, runs the tests meant to catch it, and
counts it killed when they fail. The source is restored after every mutant, whatever
happens. Needs Docker and the runtime image (like the sandbox tests); takes a few
minutes. Usage, from the repository root:

    PYTHONPATH=$PWD .venv/bin/python ci/mutants_sandbox.py [NAME-SUBSTRING]

Prints one line per mutant and the score; exits 1 when a mutant survives.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ISOLATION = "tests/test_sandbox_isolation.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant(
        "capabilities kept",
        "skald/sandbox/manager.py",
        'cap_drop=["ALL"],',
        "cap_drop=[],",
        (ISOLATION, "-k", "sniff"),
    ),
    Mutant(
        "no-new-privileges off",
        "skald/sandbox/manager.py",
        'SECURITY_OPT: Final = ("no-new-privileges:true",)',
        "SECURITY_OPT: Final = ()",
        (ISOLATION, "-k", "sniff"),
    ),
    Mutant(
        "a member's command keeps the bounding set",
        "skald/sandbox/execute.py",
        '"--bounding-set=-all",',
        "",
        (ISOLATION, "-k", "sniff"),
    ),
    Mutant(
        "one shared network",
        "skald/sandbox/manager.py",
        'return f"skald-{self.instance_id}-{user_id}-net"',
        'return f"skald-{self.instance_id}-net"',
        (ISOLATION, "-k", "sniff"),
    ),
    Mutant(
        "the wrapper leaves the command's leftovers",
        "skald/sandbox/execute.py",
        '    + KILL_LOOP\n    + r"""rm -f -- "$pidfile"',
        '    + r"""rm -f -- "$pidfile"',
        (ISOLATION, "-k", "detached"),
    ),
    Mutant(
        "no root kill after a wrapper died",
        "skald/sandbox/execute.py",
        "if exit_code is None or exit_code >= WRAPPER_KILLED:",
        "if exit_code is None:",
        (ISOLATION, "-k", "detached"),
    ),
    Mutant(
        "no sweep of a crash's leftovers",
        "skald/sandbox/manager.py",
        'run_killer, client, container_id, "stale", self.boot_mark',
        'run_killer, client, container_id, "cmd", self.boot_mark',
        ("tests/test_sandbox_recovery.py", "-k", "running"),
    ),
    Mutant(
        "the stale killer matches nothing",
        "skald/sandbox/procs.py",
        "hit=$((marked && !mine))",
        "hit=$((marked && mine))",
        ("tests/test_sandbox_recovery.py", "-k", "running"),
    ),
    Mutant(
        "the member's pidfile is trusted",
        "skald/sandbox/procs.py",
        '''    *" $want "*) kill -KILL -- "-$pg"''',
        '''    *) kill -KILL -- "-$pg"''',
        (ISOLATION, "-k", "forged"),
    ),
    Mutant(
        "setuid left in the home",
        "skald/sandbox/execute.py",
        'find "$1" -xdev -perm /6000 ! -type l -exec chmod ug-s {} +\n',
        "",
        (ISOLATION, "-k", "root_in_a_sandbox"),
    ),
    Mutant(
        "networks outlive their member",
        "skald/sandbox/manager.py",
        "        await self.call(self._remove_networks, self.client(), {user_id})\n",
        "",
        (ISOLATION, "-k", "networks_go"),
    ),
    Mutant(
        "sweep ignores the instance label",
        "skald/sandbox/manager.py",
        'labels = [f"{LABEL_INSTANCE}={self.instance_id}"]',
        'labels = [f"{LABEL_USER}"]',
        (ISOLATION, "-k", "networks_go"),
    ),
    Mutant(
        "a failed sandbox is silent in health",
        "skald/sandbox/manager.py",
        "        for reason in self.failures.values():",
        "        for reason in []:",
        (ISOLATION, "-k", "cannot_be_made"),
    ),
    Mutant(
        "a route around the pool is ignored",
        "skald/sandbox/network.py",
        "if route.net.overlaps(pool) and not route.net.subnet_of(pool):",
        "if route.net.overlaps(pool) and route.net.subnet_of(pool):",
        ("tests/test_sandbox_network.py",),
    ),
    Mutant(
        "a restored copy keeps the archive's instance id",
        "skald/ops/restore.py",
        '            _keep_instance_id(layout, staging / DATABASE_DIR / "system.db")\n',
        "",
        ("tests/test_restore_instance.py",),
    ),
    Mutant(
        "a bypass skips the root step's approval",
        "skald/core/approvals.py",
        "if tool.always_ask and not isinstance(decision, Deny):",
        "if False:",
        ("tests/test_default_gate.py", "-k", "root_step"),
    ),
)


def run(mutant: Mutant) -> bool:
    """True when the tests caught (killed) the mutant."""
    path = ROOT / mutant.path
    original = path.read_text()
    if original.count(mutant.old) != 1:
        raise SystemExit(f"{mutant.name}: the text to mutate is not in {mutant.path} once")
    try:
        path.write_text(original.replace(mutant.old, mutant.new))
        argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
        done = subprocess.run(  # noqa: S603 - fixed argv
            [*argv, *mutant.tests], cwd=ROOT, capture_output=True, text=True, check=False
        )
    finally:
        path.write_text(original)
    return done.returncode != 0


def main() -> int:
    chosen = [m for m in MUTANTS if len(sys.argv) < 2 or sys.argv[1] in m.name]
    killed = 0
    for mutant in chosen:
        caught = run(mutant)
        killed += caught
        print(f"{'killed  ' if caught else 'SURVIVED'} {mutant.name}", flush=True)
    print(f"score: {killed}/{len(chosen)}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
