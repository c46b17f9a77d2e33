"""A curated mutation check of the storage limits (issue 12 item 4), outside CI.

Each mutant breaks one decision (a quota check, the disk guard, the cut of long tool
texts, the single copy of arguments, the WAL limit...) and names the tests that must
fail because of it. The script applies one mutant at a time, runs those tests, restores
the file and prints the score; a surviving mutant is a decision no test pins.

    PYTHONPATH=$PWD .venv/bin/python ci/mutants_storage_limits.py

Needs what `tests/test_storage_limits.py` needs (root for the tmpfs, Docker with the
runtime image for the guard's sandbox test). It restores every file even when stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = "tests/test_storage_limits.py"

# (file, original text, mutated text, -k expression of the tests that must fail)
MUTANTS: list[tuple[str, str, str, str]] = [
    (
        "skald/files/tools.py",
        "        budget.fresh_check(delta)\n",
        "        pass\n",
        "quota_and_say",
    ),
    (
        "skald/tools/memory.py",
        "                    budget.check(delta)\n",
        "                    pass\n",
        "quota_and_say",
    ),
    (
        "skald/api/routes/files.py",
        "                budget.check(received)\n",
        "                pass\n",
        "uploads_and_file_writes",
    ),
    (
        "skald/api/routes/files.py",
        "    await asyncio.to_thread(rt.storage.scan, principal_of(request).user.id)\n",
        "",
        "uploads_and_file_writes",
    ),
    (
        "skald/sandbox/tool.py",
        "                await (await self._budget()).recheck()\n",
        "                pass\n",
        "no_command",
    ),
    (
        "skald/core/user_runtime.py",
        "            await (await self.budget()).recheck()\n",
        "            pass\n",
        "no_command",
    ),
    (
        "skald/quota.py",
        "        if self.reserve > 0 and self.free - max(adding, 0) < self.reserve:",
        "        if False:",
        "nearly_full",
    ),
    (
        "skald/quota.py",
        "        if used + max(adding, 0) > quota or (adding == 0 and used >= quota):",
        "        if used + max(adding, 0) > quota:",
        "exactly_at_quota",
    ),
    (
        "skald/quota.py",
        "            self.accountant.scan(self.user_id)\n            self.check(adding)\n",
        "            raise\n",
        "quota_and_say",
    ),
    (
        "skald/quota.py",
        "            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):",
        "            if False:",
        "hard_links_once",
    ),
    (
        "skald/quota.py",
        "    return st.st_blocks * _BLOCK",
        "    return st.st_size",
        "hard_links_once",
    ),
    (
        "skald/core/storage_guard.py",
        "            self.paused = await self._sandboxes(pause=True) or self.paused",
        "            pass",
        "nearly_full or guard_pauses",
    ),
    (
        "skald/core/storage_guard.py",
        "        elif self.paused and free >= reserve * RESUME_MARGIN:",
        "        elif False:",
        "guard_pauses or nearly_full",
    ),
    (
        "skald/sandbox/manager.py",
        '                "paused",  # by the storage guard: it stays so until the disk has room\n',
        "",
        "guard_pauses",
    ),
    (
        "skald/agent/loop.py",
        "    max_argument_chars: int | None = 16_384",
        "    max_argument_chars: int | None = None",
        "huge_tool_argument",
    ),
    (
        "skald/agent/history.py",
        "        out.append(_clip_calls(m, max_argument_chars))",
        "        out.append(m)",
        "projection_cuts or huge_tool_argument",
    ),
    (
        "skald/store/conversations.py",
        "\"VALUES (?,?,?,?,?,'{}','pending',?)\"",
        "\"VALUES (?,?,?,?,?,json_object('n', name),'pending',?)\"",
        "huge_tool_argument",
    ),
    (
        "skald/store/database.py",
        '    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")\n',
        "",
        "wal",
    ),
]


def main() -> int:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'tests'}")
    pytest = str(Path(sys.executable).with_name("pytest"))
    caught = 0
    for rel, old, new, tests in MUTANTS:
        path = ROOT / rel
        source = path.read_text(encoding="utf-8")
        if source.count(old) != 1:
            print(f"STALE  {rel}: {old.strip()[:70]!r} is not in the file exactly once")
            continue
        path.write_text(source.replace(old, new), encoding="utf-8")
        try:
            run = subprocess.run(  # noqa: S603 - our pytest, our arguments
                [pytest, "-q", "-x", "-p", "no:cacheprovider", TESTS, "-k", tests],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            path.write_text(source, encoding="utf-8")
        killed = run.returncode not in (0, 5)  # 5: no test selected, which is a miss
        caught += killed
        print(f"{'caught' if killed else 'MISSED'} {rel}: {old.strip()[:70]}", flush=True)
    print(f"score: {caught}/{len(MUTANTS)} mutants caught")
    return 0 if caught == len(MUTANTS) else 1


if __name__ == "__main__":
    sys.exit(main())
