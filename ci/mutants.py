#!/usr/bin/env python3
"""A small mutation check for Skald's security- and data-critical decisions.

Outside CI's time budget: run it by hand when you change one of these modules, and write
the score into docs/dev/security.md. Usage (from the repository root, with the venv):

    python ci/mutants.py            # every mutant that needs no Docker
    python ci/mutants.py --docker   # also the sandbox mutants (runs docker-marked tests)
    python ci/mutants.py --only P1,K2 --list --check
    python ci/mutants.py --docker --jobs 2   # two at a time, each in its own tree copy

Each mutant is one small deliberate bug: (id, area, file, original snippet, mutated
snippet, the test files that should notice). The script copies the working tree
(tracked and untracked files that git does not ignore) to a temporary folder once, never
touching the worktree; then, per mutant, it replaces the snippet in the copy, runs only
the matching tests there (`-x`, docker-marked tests deselected unless --docker), and puts
the file back. Tests failing (or hanging past --timeout) = killed; passing = survived.

Rules of the list, and the traps:
- A snippet must occur exactly once in its file; a missing or repeated snippet is an
  error (the list went stale after a refactor), never a silent "survived".
- Every test selection first runs once unmutated: a red baseline makes its mutants
  meaningless, so they are reported as errors.
- pytest's "no tests collected" (exit 5) and usage errors are errors, not kills.
- Keep each mutant's selection small (a file or two, `-k` where a file is large): the
  whole run should stay in the range of ten minutes on a laptop.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
_T = TypeVar("_T")


@dataclass(frozen=True)
class Mutant:
    id: str
    area: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    keyword: str | None = None  # pytest -k
    docker: bool = False
    why: str = field(default="", compare=False)


GATE = ("tests/test_default_gate.py",)
ROUTER = ("tests/test_files_router.py",)
SESSIONS = ("tests/test_runtime_parts.py", "tests/test_api_auth.py", "tests/test_accounts.py")
THROTTLE = ("tests/test_login_throttle.py", "tests/test_api_auth.py")
ORIGIN = ("tests/test_server.py",)
USERS = ("tests/test_users.py",)
MIGRATIONS = ("tests/test_migrations.py",)
NOTES = ("tests/test_shared_memory.py",)
HOME_LINKS = ("tests/test_home_links.py",)
KEPT = ("tests/test_kept_keys.py",)
PUSH = ("tests/test_push_endpoints.py", "tests/test_webpush.py")

MUTANTS: tuple[Mutant, ...] = (
    # -- approvals: rules, bypasses, helpers --------------------------------------------
    Mutant(
        "A1",
        "approval bypass vs deny",
        "skald/core/approvals.py",
        "if isinstance(decision, Require) and await self.bypassing(conversation_id, facts.tool):",
        "if await self.bypassing(conversation_id, facts.tool):",
        GATE,
        why="a member's bypass turns an administrator's deny into an allow",
    ),
    Mutant(
        "A2",
        "approval bypass expiry",
        "skald/core/approvals.py",
        "            if until > self._clock():",
        "            if until > 0:",
        GATE,
        why="a 15-minute bypass never expires",
    ),
    Mutant(
        "A3",
        "approval deny",
        "skald/core/approvals.py",
        'return Deny(reason or f"the rules refuse the tool {tool_name}")',
        'return Require(reason or f"the rules refuse the tool {tool_name}")',
        GATE,
        why="a deny rule only asks",
    ),
    Mutant(
        "A4",
        "approval unattended",
        "skald/core/approvals.py",
        "        if self.unattended:\n            return Rejected(UNATTENDED_REASON)",
        "        if False:\n            return Rejected(UNATTENDED_REASON)",
        GATE,
        why="background runs wait for nobody instead of refusing",
    ),
    Mutant(
        "A5",
        "approval helpers",
        "skald/core/approvals.py",
        "conversation_id, _ = root_of(ctx.conversation_id)",
        "conversation_id = ctx.conversation_id",
        GATE,
        why="a helper escapes the conversation's security group",
    ),
    Mutant(
        "A6",
        "approval rule order",
        "skald/approvals/rules.py",
        "key=lambda r: (r.priority, r.id))",
        "key=lambda r: (-r.priority, r.id))",
        ("tests/test_approval_rules.py", *GATE),
        why="the last rule instead of the first decides",
    ),
    Mutant(
        "A7",
        "inbox helpers",
        "skald/store/inbox.py",
        '"WHERE k.id=coalesce(i.parent_call, i.id) "',
        '"WHERE k.id=i.id "',
        ("tests/test_inbox.py",),
        keyword="helper",
        why="a helper's request is hidden from the Inbox",
    ),
    # -- path containment and names -------------------------------------------------------
    Mutant(
        "P1",
        "path containment",
        "skald/files/router.py",
        "return path == root or path.startswith(root.rstrip(os.sep) + os.sep)",
        "return path == root or path.startswith(root.rstrip(os.sep))",
        ROUTER,
        why="/home/abc counts as inside /home/ab",
    ),
    Mutant(
        "P2",
        "path containment",
        "skald/files/router.py",
        "        if not _inside(real, root):\n            raise _escape(raw, mount)",
        "        if False:\n            raise _escape(raw, mount)",
        ROUTER,
        why="a link leading out of the home is followed",
    ),
    Mutant(
        "P3",
        "path parsing",
        "skald/files/router.py",
        '        if ".." in segments:',
        "        if False:",
        ROUTER,
        why="'..' is accepted",
    ),
    Mutant(
        "P4",
        "path parsing",
        "skald/files/router.py",
        '            if text != "~" and not text.startswith("~/"):',
        "            if False:",
        ROUTER,
        why="~other is read as a name in the home",
    ),
    Mutant(
        "P5",
        "file names",
        "skald/files/router.py",
        '_BAD_CATEGORIES: Final = frozenset({"Cc", "Cf"})',
        '_BAD_CATEGORIES: Final = frozenset({"Cc"})',
        ROUTER,
        why="U+202E names are accepted",
    ),
    Mutant(
        "P6",
        "file names",
        "skald/files/router.py",
        '    name = unicodedata.normalize("NFC", raw)',
        "    name = raw",
        ROUTER,
        why="names are not normalised",
    ),
    Mutant(
        "P7",
        "special files",
        "skald/files/router.py",
        "    if not stat.S_ISREG(before.st_mode):\n        raise PathDeniedError(",
        "    if False:\n        raise PathDeniedError(",
        ROUTER,
        why="a FIFO or device planted in the home is opened",
    ),
    # -- sessions ---------------------------------------------------------------------------
    Mutant(
        "S1",
        "session expiry",
        "skald/core/sessions.py",
        "if row.expires_at <= now or row.last_seen_at <= now - self.idle_s:",
        "if row.last_seen_at <= now - self.idle_s:",
        SESSIONS,
        keyword="expire or session",
        why="the absolute session lifetime is ignored",
    ),
    Mutant(
        "S2",
        "session expiry",
        "skald/core/sessions.py",
        "if row.expires_at <= now or row.last_seen_at <= now - self.idle_s:",
        "if row.expires_at <= now:",
        SESSIONS,
        keyword="expire or session",
        why="idle sessions never end",
    ),
    Mutant(
        "S3",
        "session revocation",
        "skald/core/sessions.py",
        "            or not user.active\n",
        "",
        SESSIONS,
        why="a deactivated member's cookie still works",
    ),
    Mutant(
        "S5",
        "session revocation",
        "skald/store/registry.py",
        '                c.execute("DELETE FROM sessions WHERE user_id=?", (user_id,))\n',
        "                pass\n",
        SESSIONS,
        why="deactivation leaves the sessions to a lazy check (reactivated: the cookie works)",
    ),
    Mutant(
        "S4",
        "session revocation",
        "skald/core/sessions.py",
        "or (user.encrypted and not self.users.is_unlocked(user.id))",
        "or False",
        SESSIONS,
        why="a session outlives the locked data key",
    ),
    # -- same origin ------------------------------------------------------------------------
    Mutant(
        "O1",
        "same-origin check",
        "skald/api/security.py",
        "return host is not None and netloc == host",
        'return host is not None and netloc.split(":")[0].startswith(host.split(":")[0])',
        ORIGIN,
        keyword="origin or edge",
        why="http://skald.lan.evil.example and another port pass",
    ),
    Mutant(
        "O2",
        "same-origin check",
        "skald/api/security.py",
        'if scope["type"] == "websocket" and not same_origin(scope):',
        "if False:",
        ORIGIN,
        keyword="origin or edge",
        why="cross-site WebSockets are accepted",
    ),
    Mutant(
        "O3",
        "same-origin check",
        "skald/api/security.py",
        'if scope["method"] in UNSAFE_METHODS and not same_origin(scope):',
        "if False:",
        ORIGIN,
        keyword="origin or edge",
        why="cross-site POSTs are accepted",
    ),
    # -- login throttling -------------------------------------------------------------------
    Mutant(
        "T1",
        "throttle",
        "skald/core/throttle.py",
        '            if key.startswith("client:"):\n                continue  # the address keeps its record (see the module docstring)\n',
        "",
        THROTTLE,
        keyword="throttl",
        why="a successful sign-in clears the address's record",
    ),
    Mutant(
        "T2",
        "throttle",
        "skald/core/throttle.py",
        'return f"user:{username.strip().lower()}"',
        'return f"user:{username.strip()}"',
        THROTTLE,
        keyword="throttl",
        why="Ada and ada have separate counters",
    ),
    Mutant(
        "T3",
        "throttle",
        "skald/core/throttle.py",
        "            if over >= 0:",
        "            if over > 0:",
        THROTTLE,
        keyword="throttl",
        why="one more free attempt than configured",
    ),
    Mutant(
        "T4",
        "throttle",
        "skald/core/throttle.py",
        "        keys = self._keys(username, client, device)\n        free = ",
        "        keys = self._keys(username, client, device)[:1]\n        free = ",
        THROTTLE,
        keyword="throttl",
        why="a blocked address may go on guessing other accounts",
    ),
    # -- key wraps ---------------------------------------------------------------------------
    Mutant(
        "K1",
        "key wrap AAD",
        "skald/core/keys.py",
        'return f"skald:dek:v1:{user_id}:{purpose}".encode()',
        'return b"skald:dek:v1"',
        USERS,
        why="no associated data at all",
    ),
    Mutant(
        "K2",
        "key wrap AAD",
        "skald/core/keys.py",
        'return f"skald:dek:v1:{user_id}:{purpose}".encode()',
        'return f"skald:dek:v1:{purpose}".encode()',
        USERS,
        why="a wrap opens on another account",
    ),
    Mutant(
        "K3",
        "key wrap AAD",
        "skald/core/keys.py",
        'return f"skald:dek:v1:{user_id}:{purpose}".encode()',
        'return f"skald:dek:v1:{user_id}".encode()',
        USERS,
        why="a recovery wrap opens as a password wrap",
    ),
    # -- migrations --------------------------------------------------------------------------
    Mutant(
        "M1",
        "migrations",
        "skald/store/migrations/__init__.py",
        # migrate_features(), the path the server runs (the old migrate() is for tests
        # that build historic databases)
        "                if ledger(c).get(f.name, 0) >= m.version:\n                    return False\n",
        "",
        MIGRATIONS,
        why="a concurrent migrator runs a step twice",
    ),
    Mutant(
        "M2",
        "migrations",
        "skald/store/migrations/__init__.py",
        "    if found > plan.head:",
        "    if found > plan.head + 1:",
        MIGRATIONS,
        why="a database from a newer Skald is touched",
    ),
    Mutant(
        "M3",
        "migrations",
        "skald/store/database.py",
        "            conn.set_busy_timeout(busy_timeout_ms)\n            if key is not None:",
        "            if key is not None:",
        MIGRATIONS,
        keyword="processes",
        why="a second process opening the file fails at once",
    ),
    # -- full-text index triggers -------------------------------------------------------------
    Mutant(
        "F1",
        "FTS triggers",
        "skald/store/migrations/owner.py",
        "CREATE TRIGGER memory_notes_au AFTER UPDATE ON memory_notes BEGIN\n"
        "    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)\n"
        "        VALUES ('delete', old.id, old.path, old.content);\n",
        "CREATE TRIGGER memory_notes_au AFTER UPDATE ON memory_notes BEGIN\n",
        NOTES,
        why="private notes keep edited-out text in the index",
    ),
    Mutant(
        "F2",
        "FTS triggers",
        "skald/store/migrations/registry.py",
        "ON shared_memory_notes BEGIN\n"
        "    INSERT INTO shared_memory_notes_fts(shared_memory_notes_fts, rowid, path, content)\n"
        "        VALUES ('delete', old.id, old.path, old.content);\n"
        "    INSERT INTO shared_memory_notes_fts(rowid, path, content)",
        "ON shared_memory_notes BEGIN\n    INSERT INTO shared_memory_notes_fts(rowid, path, content)",
        NOTES,
        why="household notes keep edited-out text in the index",
    ),
    Mutant(
        "F3",
        "FTS triggers",
        "skald/store/migrations/owner.py",
        "CREATE TRIGGER memory_notes_ad AFTER DELETE ON memory_notes BEGIN\n"
        "    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)\n"
        "        VALUES ('delete', old.id, old.path, old.content);\n",
        "CREATE TRIGGER memory_notes_ad AFTER DELETE ON memory_notes BEGIN\n    SELECT 1;\n",
        NOTES,
        why="deleted private notes stay searchable",
    ),
    # -- provider keys -------------------------------------------------------------------------
    Mutant(
        "L1",
        "provider key and address",
        "skald/core/llm_service.py",
        "if keep and moved and current.has_api_key:",
        "if False:",
        ("tests/test_chat.py",),
        keyword="address",
        why="the stored key follows a new base_url",
    ),
    Mutant(
        "L2",
        "provider key and address",
        "skald/core/llm_service.py",
        "expect=current if keep else None,",
        "expect=None,",
        ("tests/test_chat.py",),
        keyword="address",
        why="a kept key survives a concurrent address change",
    ),
    # -- sandbox label sweep (Docker) ---------------------------------------------------------
    Mutant(
        "D1",
        "sandbox label sweep",
        "skald/sandbox/manager.py",
        'labels = [f"{LABEL_INSTANCE}={self.instance_id}"]',
        "labels: list[str] = []",
        ("tests/test_sandbox_containers.py",),
        docker=True,
        why="a sweep touches another installation's containers",
    ),
    Mutant(
        "D2",
        "sandbox label sweep",
        "skald/sandbox/manager.py",
        "            if labels.get(LABEL_INSTANCE) != self.instance_id:",
        "            if False:",
        ("tests/test_sandbox_containers.py",),
        docker=True,
        why="another installation's container is adopted",
    ),
    # -- sandbox isolation (issue 12 items 2, 5, 8) -------------------------------------
    Mutant(
        "X1",
        "sandbox",
        "skald/sandbox/manager.py",
        'cap_drop=["ALL"],',
        "cap_drop=[],",
        ("tests/test_sandbox_isolation.py",),
        keyword="sniff",
        docker=True,
        why="capabilities kept",
    ),
    Mutant(
        "X2",
        "sandbox",
        "skald/sandbox/manager.py",
        'SECURITY_OPT: Final = ("no-new-privileges:true",)',
        "SECURITY_OPT: Final = ()",
        ("tests/test_sandbox_isolation.py",),
        keyword="sniff",
        docker=True,
        why="no-new-privileges off",
    ),
    Mutant(
        "X3",
        "sandbox",
        "skald/sandbox/procs.py",
        '"--bounding-set=-all",',
        "",
        ("tests/test_sandbox_isolation.py",),
        keyword="sniff",
        docker=True,
        why="a member's command keeps the bounding set",
    ),
    Mutant(
        "X4",
        "sandbox",
        "skald/sandbox/manager.py",
        'return f"skald-{self.instance_id}-{user_id}-net"',
        'return f"skald-{self.instance_id}-net"',
        ("tests/test_sandbox_isolation.py",),
        keyword="sniff",
        docker=True,
        why="one shared network",
    ),
    Mutant(
        "X5",
        "sandbox",
        "skald/sandbox/execute.py",
        '    + KILL_LOOP\n    + r"""rm -f -- "$pidfile"',
        '    + r"""rm -f -- "$pidfile"',
        ("tests/test_sandbox_isolation.py",),
        keyword="detached",
        docker=True,
        why="the wrapper leaves the command's leftovers",
    ),
    Mutant(
        "X6",
        "sandbox",
        "skald/sandbox/execute.py",
        "if exit_code is None or exit_code >= WRAPPER_KILLED:",
        "if exit_code is None:",
        ("tests/test_sandbox_isolation.py",),
        keyword="detached",
        docker=True,
        why="no root kill after a wrapper died",
    ),
    Mutant(
        "X7",
        "sandbox",
        "skald/sandbox/manager.py",
        'run_killer, client, container_id, "stale", self.boot_mark',
        'run_killer, client, container_id, "cmd", self.boot_mark',
        ("tests/test_sandbox_recovery.py",),
        keyword="running",
        docker=True,
        why="no sweep of a crash's leftovers",
    ),
    Mutant(
        "X8",
        "sandbox",
        "skald/sandbox/procs.py",
        "hit=$((marked && !mine))",
        "hit=$((marked && mine))",
        ("tests/test_sandbox_recovery.py",),
        keyword="running",
        docker=True,
        why="the stale killer matches nothing",
    ),
    Mutant(
        "X9",
        "sandbox",
        "skald/sandbox/procs.py",
        '    *" $want "*) kill -KILL -- "-$pg"',
        '    *) kill -KILL -- "-$pg"',
        ("tests/test_sandbox_isolation.py",),
        keyword="forged",
        docker=True,
        why="the member's pidfile is trusted",
    ),
    Mutant(
        "X10",
        "sandbox",
        "skald/sandbox/execute.py",
        'find "$1" -xdev -perm /6000 ! -type l -exec chmod ug-s {} +\n',
        "",
        ("tests/test_sandbox_isolation.py",),
        keyword="root_in_a_sandbox",
        docker=True,
        why="setuid left in the home",
    ),
    Mutant(
        "X11",
        "sandbox",
        "skald/sandbox/manager.py",
        "        await self.call(self._remove_networks, self.client(), {user_id})\n",
        "",
        ("tests/test_sandbox_isolation.py",),
        keyword="networks_go",
        docker=True,
        why="networks outlive their member",
    ),
    Mutant(
        "X12",
        "sandbox",
        "skald/sandbox/manager.py",
        'labels = [f"{LABEL_INSTANCE}={self.instance_id}"]',
        'labels = [f"{LABEL_USER}"]',
        ("tests/test_sandbox_isolation.py",),
        keyword="networks_go",
        docker=True,
        why="sweep ignores the instance label",
    ),
    Mutant(
        "X13",
        "sandbox",
        "skald/sandbox/manager.py",
        "        for reason in self.failures.values():",
        "        for reason in []:",
        ("tests/test_sandbox_isolation.py",),
        keyword="cannot_be_made",
        docker=True,
        why="a failed sandbox is silent in health",
    ),
    Mutant(
        "X14",
        "sandbox",
        "skald/sandbox/network.py",
        "if route.net.overlaps(pool) and not route.net.subnet_of(pool):",
        "if route.net.overlaps(pool) and route.net.subnet_of(pool):",
        ("tests/test_sandbox_network.py",),
        keyword=None,
        docker=True,
        why="a route around the pool is ignored",
    ),
    Mutant(
        "X15",
        "sandbox",
        "skald/features/backups/restore.py",
        '            _keep_instance_id(layout, staging / DATABASE_DIR / "system.db")\n',
        "",
        ("tests/test_restore_instance.py",),
        keyword=None,
        docker=True,
        why="a restored copy keeps the archive's instance id",
    ),
    Mutant(
        "X16",
        "sandbox",
        "skald/core/approvals.py",
        "if tool.always_ask and not isinstance(decision, Deny):",
        "if False:",
        ("tests/test_default_gate.py",),
        keyword="root_step",
        docker=False,
        why="a bypass skips the root step's approval",
    ),
    # -- storage limits (issue 12 item 4) ----------------------------------------------
    Mutant(
        "Q1",
        "storage limits",
        "skald/files/tools.py",
        "        budget.fresh_check(delta)\n",
        "        pass\n",
        ("tests/test_storage_limits.py",),
        keyword="quota_and_say",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q2",
        "storage limits",
        "skald/tools/memory.py",
        "                    budget.check(delta)\n",
        "                    pass\n",
        ("tests/test_storage_limits.py",),
        keyword="quota_and_say",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q3",
        "storage limits",
        "skald/features/files/routes.py",
        "                budget.check(received)\n",
        "                pass\n",
        ("tests/test_storage_limits.py",),
        keyword="uploads_and_file_writes",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q4",
        "storage limits",
        "skald/features/files/routes.py",
        "    await asyncio.to_thread(rt.storage.scan, principal_of(request).user.id)\n",
        "",
        ("tests/test_storage_limits.py",),
        keyword="uploads_and_file_writes",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q5",
        "storage limits",
        "skald/sandbox/tool.py",
        "                await budget.recheck()\n",
        "                pass\n",
        ("tests/test_storage_limits.py",),
        keyword="no_command",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q6",
        "storage limits",
        "skald/core/user_runtime.py",
        "            await (await self.budget(role)).recheck()\n",
        "            pass\n",
        ("tests/test_storage_limits.py",),
        keyword="no_command",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q7",
        "storage limits",
        "skald/quota.py",
        "        if self.reserve > 0 and self.free - max(adding, 0) < self.reserve:",
        "        if False:",
        ("tests/test_storage_limits.py",),
        keyword="nearly_full",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q8",
        "storage limits",
        "skald/quota.py",
        "        if used + max(adding, 0) > quota or (adding == 0 and used >= quota):",
        "        if used + max(adding, 0) > quota:",
        ("tests/test_storage_limits.py",),
        keyword="exactly_at_quota",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q9",
        "storage limits",
        "skald/quota.py",
        "            self.accountant.scan(self.user_id)\n            self.check(adding)\n",
        "            raise\n",
        ("tests/test_storage_limits.py",),
        keyword="quota_and_say",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q10",
        "storage limits",
        "skald/walk.py",
        '            if st.st_nlink > 1 and entry.kind != "dir":',
        "            if False:",
        ("tests/test_storage_limits.py",),
        keyword="hard_links_once",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q11",
        "storage limits",
        "skald/walk.py",
        "            out.allocated += st.st_blocks * 512",
        "            out.allocated += st.st_size",
        ("tests/test_storage_limits.py",),
        keyword="hard_links_once",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q12",
        "storage limits",
        "skald/core/storage_guard.py",
        "            self.paused = await self._sandboxes(pause=True) or self.paused",
        "            pass",
        ("tests/test_storage_limits.py",),
        keyword="nearly_full or guard_pauses",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q13",
        "storage limits",
        "skald/core/storage_guard.py",
        "        elif self.paused and free >= reserve * RESUME_MARGIN:",
        "        elif False:",
        ("tests/test_storage_limits.py",),
        keyword="guard_pauses or nearly_full",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q14",
        "storage limits",
        "skald/sandbox/manager.py",
        '                "paused",  # by the storage guard: it stays so until the disk has room\n',
        "",
        ("tests/test_storage_limits.py",),
        keyword="guard_pauses",
        docker=True,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q15",
        "storage limits",
        "skald/agent/loop.py",
        "    max_argument_chars: int | None = 16_384",
        "    max_argument_chars: int | None = None",
        ("tests/test_storage_limits.py",),
        keyword="huge_tool_argument",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q16",
        "storage limits",
        "skald/agent/history.py",
        "        out.append(_clip_calls(m, max_argument_chars))",
        "        out.append(m)",
        ("tests/test_storage_limits.py",),
        keyword="projection_cuts or huge_tool_argument",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q17",
        "storage limits",
        "skald/store/conversations.py",
        "\"VALUES (?,?,?,?,?,'{}','pending',?)\"",
        "\"VALUES (?,?,?,?,?,json_object('n', name),'pending',?)\"",
        ("tests/test_storage_limits.py",),
        keyword="huge_tool_argument",
        docker=False,
        why="a storage-limit decision",
    ),
    Mutant(
        "Q18",
        "storage limits",
        "skald/store/database.py",
        '    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")\n',
        "",
        ("tests/test_storage_limits.py",),
        keyword="wal",
        docker=False,
        why="a storage-limit decision",
    ),
    # -- CL: server writes in a member's home go by descriptor (issue 20, item 1) -------
    Mutant(
        "CL1",
        "home writes by descriptor",
        "skald/walk.py",
        "            child = open_dir_at(here, part)\n            os.close(here)",
        "            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, "
        "dir_fd=here)\n            os.close(here)",
        HOME_LINKS,
        why="makedirs_at without O_NOFOLLOW: a folder the member made a link is followed",
    ),
    Mutant(
        "CL2",
        "home writes by descriptor",
        "skald/walk.py",
        "    tfd = os.open(temp, WRITE_FLAGS, mode, dir_fd=fd)\n",
        "    temp = name\n    tfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, "
        "dir_fd=fd)\n",
        HOME_LINKS,
        why="write_file_at writes in place: a link at the file's name is written through",
    ),
    Mutant(
        "CL3",
        "home writes by descriptor",
        "skald/features/connectors/home_files.py",
        "        fd = walk.makedirs_at(home, parts)\n",
        "        Path(homes_dir, user_id, *parts).mkdir(parents=True, exist_ok=True)\n"
        "        fd = os.open(Path(homes_dir, user_id, *parts), os.O_RDONLY)\n",
        HOME_LINKS,
        why="back to path strings: ~/.skald/connectors/<name> reached through links",
    ),
    Mutant(
        "CL4",
        "home writes by descriptor",
        "skald/features/connectors/home_files.py",
        'if walk.kind_of(there.st_mode) != "dir":',
        "if there.st_mode is None:",
        HOME_LINKS,
        why="a link at the version folder passes for the placed files",
    ),
    Mutant(
        "CL5",
        "home writes by descriptor",
        "skald/features/connectors/home_files.py",
        "        with walk.opened(homes_dir, (user_id, *parts)) as fd:\n"
        '            return walk.lstat_at(fd, ".ready") is not None',
        '        return (homes_dir / user_id / Path(*parts) / ".ready").exists()',
        HOME_LINKS,
        why="the dependency check follows links (another home's .ready is taken for hers)",
    ),
    Mutant(
        "CL6",
        "home writes by descriptor",
        "skald/sandbox/manager.py",
        '                        os.close(walk.makedirs_at(fd, inner.split("/")))',
        "                        Path(home.source, inner).mkdir(mode=0o755, parents=True, "
        "exist_ok=True)",
        HOME_LINKS,
        keyword="mount_point",
        why="the sandbox's mount point in the home made through a link",
    ),
    Mutant(
        "CL7",
        "home writes by descriptor",
        "skald/files/tools.py",
        "    try:\n        handle, st = open_read(found)\n    except NotFoundError:",
        '    try:\n        handle, st = open(found.path, "rb"), found.path.stat()\n'
        "    except FileNotFoundError:",
        HOME_LINKS,
        keyword="preview",
        why="the write preview reads by path string, through a folder swapped for a link",
    ),
    Mutant(
        "CL8",
        "home writes by descriptor",
        "skald/files/tools.py",
        "        with tree.opened(found.root, found.parts[:-1]) as parent:\n"
        "            st = tree.lstat_at(parent, found.parts[-1])",
        "        st = found.path.lstat()",
        HOME_LINKS,
        keyword="quota",
        why="another member's file passes for the one a write replaces (quota credit)",
    ),
    Mutant(
        "CL9",
        "home writes by descriptor",
        "skald/features/connectors/supervisor.py",
        '        return f"{CONTAINER_HOME}/{home_files.place_ca(homes_dir, user_id, Path(extra))}"',
        '        __import__("shutil").copyfile(extra, homes_dir / user_id / ".skald" / '
        '"extra-ca.pem")\n        return f"{CONTAINER_HOME}/.skald/extra-ca.pem"',
        ("tests/test_home_links_docker.py",),
        docker=True,
        why="the supervisor copies the CA by path string again",
    ),
    # -- schedules: limits, claims, runaway runs (issue 20 items 3-4, issue 32 items 6-8) --
    Mutant(
        "J1",
        "schedules",
        "skald/features/schedule/store.py",
        "        if activating:\n            where +=",
        "        if False:\n            where +=",
        ("tests/test_schedule_limits.py",),
        keyword="third_active",
        why="an update that makes a job active skips the active-jobs limit",
    ),
    Mutant(
        "J2",
        "schedules",
        "skald/features/schedule/store.py",
        "({_ACTIVE}) < ?)",
        "({_ACTIVE}) <= ?)",
        ("tests/test_schedule_limits.py",),
        keyword="third_active",
        why="the limit on update off by one (a third active job)",
    ),
    Mutant(
        "J3",
        "schedules",
        "skald/features/schedule/store.py",
        'if job.state == "active" and (active := _active(c)) >= active_limit:',
        'if job.state == "active" and (active := _active(c)) > active_limit:',
        ("tests/test_schedule_limits.py",),
        keyword="third_active",
        why="the limit on create off by one",
    ),
    Mutant(
        "J4",
        "schedules",
        "skald/features/schedule/store.py",
        'if job.state == "active" and (active := _active(c)) >= active_limit:',
        "if False:",
        ("tests/test_schedule_limits.py",),
        keyword="parallel",
        why="create counts outside its write (parallel creates both pass)",
    ),
    Mutant(
        "J5",
        "schedules",
        "skald/features/schedule/store.py",
        "AND version=? AND state='active' AND next_run=?",
        "AND version>=? AND state='active' AND next_run=?",
        ("tests/test_schedule_limits.py",),
        keyword="claim",
        why="a claim with an out-of-date copy of a job records a run",
    ),
    Mutant(
        "J6",
        "schedules",
        "skald/features/schedule/store.py",
        "SET {sets}, version=version+1 WHERE {where}",
        "SET {sets} WHERE {where}",
        ("tests/test_schedule_limits.py",),
        keyword="claim",
        why="a member's change leaves the job's version as it was",
    ),
    Mutant(
        "J7",
        "schedules",
        "skald/features/schedule/tool.py",
        'if mode == "run_now" and root_of(ctx.conversation_id)[0] in self.member.unattended:',
        "if False:",
        ("tests/test_schedule_runaway.py",),
        keyword="run_now",
        why="an unattended run may start jobs (a job restarts itself)",
    ),
    Mutant(
        "J8",
        "schedules",
        "skald/features/schedule/store.py",
        "reason = BUSY if _running(c, job.id) else SKIPPED if skipped else None",
        "reason = SKIPPED if skipped else None",
        ("tests/test_schedule_runaway.py",),
        keyword="two_runs",
        why="a due occurrence starts while the job's last run goes on",
    ),
    Mutant(
        "J9",
        "schedules",
        "skald/features/schedule/store.py",
        "            if _running(c, job.id):\n                raise RunRefusedError(",
        "            if False:\n                raise RunRefusedError(",
        ("tests/test_schedule_runaway.py",),
        keyword="two_runs or parallel",
        why="run now starts a second run while one goes on",
    ),
    Mutant(
        "J10",
        "schedules",
        "skald/features/schedule/store.py",
        "                if now < again:",
        "                if now <= again:",
        ("tests/test_schedule_runaway.py",),
        keyword="minimum_interval",
        why="run now's spacing off by one (60 s after the last start refused)",
    ),
    Mutant(
        "J11",
        "schedules",
        "skald/core/user_runtime.py",
        "return source if pacer is None else PacedClient(source, pacer)",
        "return source",
        ("tests/test_schedule_runaway.py",),
        keyword="paced",
        why="unattended model requests are not paced",
    ),
    Mutant(
        "J12",
        "schedules",
        "skald/core/unattended.py",
        "if len(self._times) >= self.per_minute:",
        "if len(self._times) > self.per_minute:",
        ("tests/test_schedule_runaway.py",),
        keyword="paced",
        why="the pace limit off by one",
    ),
    Mutant(
        "J13",
        "schedules",
        "skald/features/schedule/scheduler.py",
        "            self._pacers[member.user.id] = pacer\n",
        "",
        ("tests/test_schedule_runaway.py",),
        keyword="paced",
        why="a pacer per run instead of per member (ten jobs, ten budgets)",
    ),
    Mutant(
        "J14",
        "schedules",
        "skald/features/schedule/jobs.py",
        "            if gap < self.min_interval_s:",
        "            if gap <= self.min_interval_s:",
        ("tests/test_schedule_limits.py",),
        keyword="shortest_interval",
        why="the minimum interval off by one (every 60 s refused at a 60 s floor)",
    ),
    Mutant(
        "J15",
        "schedules",
        "skald/features/schedule/jobs.py",
        "            if gap < self.min_interval_s:",
        "            if gap < self.min_interval_s and len(schedule.cron.split()) == 5:",
        ("tests/test_schedule_limits.py",),
        keyword="shortest_interval",
        why="the minimum interval checked for 5-field expressions only",
    ),
    Mutant(
        "J16",
        "schedules",
        "skald/core/user_runtime.py",
        "            model=self.paced(root, source), config=config,",
        "            model=source, config=config,",
        ("tests/test_schedule_runaway.py",),
        keyword="helper",
        why="a helper inside an unattended run asks the model unpaced",
    ),
    # -- connector processes (issue 20 item 6): marked like commands, killed with them ---
    Mutant(
        "CP1",
        "connector processes",
        "skald/features/connectors/supervisor.py",
        "                await launch.group.kill()",
        "                pass",
        ("tests/test_connectors_procs.py",),
        keyword="switching or locking",
        docker=True,
        why="a connector's escaped children outlive the switch-off and the lock",
    ),
    Mutant(
        "CP2",
        "connector processes",
        "skald/sandbox/procgroup.py",
        "        marks = (self.manager.boot_mark, self.mark)",
        "        marks = (self.manager.boot_mark,)",
        ("tests/test_connectors_procs.py",),
        keyword="switching or locking",
        docker=True,
        why="the connector's processes carry no mark of their own: the kill finds none",
    ),
    Mutant(
        "CP3",
        "connector processes",
        "skald/sandbox/procgroup.py",
        '        argv = ["docker", "exec", "-i", "-u", "0:0", "-w", workdir, "-e", f"HOME={home}"]',
        '        argv = ["docker", "exec", "-i", "-w", workdir, "-e", f"HOME={home}"]\n'
        "        return [*argv, self.container, *command]",
        ("tests/test_connectors_procs.py",),
        docker=True,
        why="the connector runs unmarked (as before): neither the kill nor the crash sweep sees it",
    ),
    # -- household connectors in boxes (issue 20 item 8): not the service account ------
    Mutant(
        "CH1",
        "household connector box",
        "skald/features/connectors/supervisor.py",
        "        if not inst.owner and not self.connectors.config.household_on_host:",
        "        if False:",
        ("tests/test_connectors_household_box.py",),
        keyword="sees_neither",
        docker=True,
        why="a household connector runs on the host and reads instance.key and others' env",
    ),
    Mutant(
        "CH2",
        "household connector box",
        "skald/features/connectors/household_box.py",
        "        mounts = [Mount(source=folder, target=BOX_DIR, read_only=True)]",
        "        mounts = [Mount(source=folder, target=BOX_DIR, read_only=False)]",
        ("tests/test_connectors_household_box.py",),
        keyword="sees_neither",
        docker=True,
        why="a household connector may rewrite its own installed files",
    ),
    Mutant(
        "CH3",
        "household connector box",
        "skald/features/connectors/supervisor.py",
        "            await self.boxes.remove(self.name)",
        "            pass",
        ("tests/test_connectors_household_box.py",),
        keyword="stopping",
        docker=True,
        why="a stopped household connector's container keeps running",
    ),
    Mutant(
        "CH4",
        "household connector box",
        "skald/sandbox/manager.py",
        "                if (container.labels or {}).get(LABEL_BOOT) != str(self.boot_mark):",
        "                if False:",
        ("tests/test_connectors_household_box.py",),
        keyword="crash",
        docker=True,
        why="a box a crash left behind runs forever",
    ),
    Mutant(
        "CH5",
        "household connector box",
        "skald/sandbox/manager.py",
        '        labels.append(LABEL_USER if user_id is None else f"{LABEL_USER}={user_id}")',
        '        if user_id is not None:\n            labels.append(f"{LABEL_USER}={user_id}")',
        ("tests/test_connectors_household_box.py",),
        keyword="crash",
        docker=True,
        why="the members' sweep takes boxes for an unknown member's sandbox and removes them",
    ),
    Mutant(
        "CH6",
        "household connector box",
        "skald/features/connectors/household_box.py",
        '    if on_host:\n        return "host"',
        '    if on_host:\n        return "box_network"',
        ("tests/test_connectors_household_box.py",),
        keyword="marketplace",
        why="the Marketplace hides that a household connector runs as Skald itself",
    ),
    Mutant(
        "CH7",
        "household connector box",
        "skald/features/connectors/household_box.py",
        "            client, spec, owner, read_only=True, tmpfs=self._scratch()",
        "            client, spec, owner, tmpfs=self._scratch()",
        ("tests/test_connectors_household_box.py",),
        keyword="sees_neither",
        docker=True,
        why="a household connector fills the disk through its container's writable layer",
    ),
    # -- connector approvals and elicitation (issue 23 item 1, issue 20 item 2, issue 32
    # items 4-5): CA = approvals of connector calls, CE = elicitation and the HTTP session
    Mutant(
        "CA1",
        "connector approvals",
        "skald/features/connectors/tools.py",
        "            acts_as=None if inst is None else offered(inst).get(tool),",
        "            acts_as=None,",
        ("tests/test_connectors_approvals.py",),
        keyword="catalogue",
        why="connector_call is judged as itself: one approval covers every connector",
    ),
    Mutant(
        "CA2",
        "connector approvals",
        "skald/core/approvals.py",
        "    return CallFacts(judged_name(call.name, touches), categories, path)",
        "    return CallFacts(call.name, categories, path)",
        ("tests/test_connectors_approvals.py",),
        keyword="catalogue and rules_naming",
        why="rules naming mcp__<server>__<tool> never see the call behind connector_call",
    ),
    Mutant(
        "CA3",
        "connector approvals",
        "skald/agent/calls.py",
        "            tool=judged,",
        "            tool=call.name,",
        ("tests/test_connectors_approvals.py",),
        keyword="catalogue and for_the_conversation",
        why="the Inbox row and its bypass are keyed on connector_call",
    ),
    Mutant(
        "CA4",
        "connector approvals",
        "skald/features/connectors/tools.py",
        "            unclaimed.discard(name)",
        "            pass",
        ("tests/test_connectors_approvals.py",),
        keyword="sanitise",
        why="two tools whose names sanitise alike share one judged name",
    ),
    Mutant(
        "CE1",
        "connector elicitation",
        "skald/features/connectors/supervisor.py",
        "        return self.calls[-1] if len(members) == 1 else None",
        "        return self.calls[-1] if self.calls else None",
        ("tests/test_connectors_elicitation.py",),
        keyword="stdio",
        why="stdio: another member's latest call gets the question",
    ),
    Mutant(
        "CE2",
        "connector elicitation",
        "skald/mcp/session.py",
        "        if not origin.known:",
        "        if True:",
        ("tests/test_connectors_elicitation.py",),
        keyword="http",
        why="HTTP: the POST stream's request is ignored",
    ),
    Mutant(
        "CE3",
        "connector elicitation",
        "skald/features/connectors/tools.py",
        "session.call_tool(tool, args, on_progress=progress, context=site)",
        "session.call_tool(tool, args, on_progress=progress)",
        ("tests/test_connectors_elicitation.py",),
        keyword="http",
        why="HTTP: the call's member is not attached to its request",
    ),
    Mutant(
        "CE4",
        "connector elicitation",
        "skald/features/connectors/supervisor.py",
        "            return related.context if isinstance(related.context, CallSite) else None",
        "            return self.calls[-1] if self.calls else None",
        ("tests/test_connectors_elicitation.py",),
        keyword="http",
        why="HTTP: the transport's word is ignored for the latest call",
    ),
    Mutant(
        "CE5",
        "mcp http session",
        "skald/mcp/http.py",
        '            if initialize and response.headers.get("mcp-session-id"):',
        '            if response.headers.get("mcp-session-id"):',
        ("tests/test_mcp_http_session.py",),
        why="a later answer's session id replaces the initialize one",
    ),
    Mutant(
        "CE6",
        "mcp http session",
        "skald/mcp/http.py",
        "            if response.status_code == 404 and self.session_id is not None and not initialize:",
        "            if False:",
        ("tests/test_mcp_http_session.py",),
        why="a 404 on the session id fails one request and the dead session lives on",
    ),
    # -- connectors: caps, retained memory, access, secrets, stop (CM*; issue 20 #5, 32) --
    Mutant(
        "CM1",
        "connector list limits",
        "skald/mcp/session.py",
        "if count > limits.list_items:",
        "if count > limits.list_items + 1:",
        ("tests/test_mcp_limits.py",),
        why="a 513th tool is kept",
    ),
    Mutant(
        "CM2",
        "connector list limits",
        "skald/mcp/session.py",
        "if count > limits.list_items:",
        "if count >= limits.list_items:",
        ("tests/test_mcp_limits.py",),
        why="a connector with exactly 512 tools is refused",
    ),
    Mutant(
        "CM3",
        "connector list limits",
        "skald/mcp/session.py",
        "elif size > limits.list_bytes:",
        "elif size > limits.list_bytes * 4:",
        ("tests/test_mcp_limits.py",),
        why="a tool list over 4 MiB is kept",
    ),
    Mutant(
        "CM4",
        "connector list limits",
        "skald/mcp/tools.py",
        "if size > MAX_SCHEMA_BYTES:",
        "if size >= MAX_SCHEMA_BYTES:",
        ("tests/test_mcp_limits.py",),
        why="a schema of exactly 32 KiB is refused",
    ),
    Mutant(
        "CM5",
        "connector list limits",
        "skald/features/ops/system.py",
        "if principal is None or not principal.can(ADMIN_SYSTEM):",
        "if principal is None:",
        ("tests/test_connectors_limits.py",),
        keyword="513",
        why="a member reads the household's connector memory figures",
    ),
    Mutant(
        "CM6",
        "connector list limits",
        "skald/features/connectors/supervisor.py",
        "            if self.refusal is not None:\n"
        "                raise self.refusal  # the list grew past the limits (`_tools_changed`)\n",
        "",
        ("tests/test_connectors_limits.py",),
        keyword="growing",
        why="a connector whose list grew past the limits is restarted, not refused",
    ),
    Mutant(
        "CM7",
        "connector list limits",
        "skald/features/connectors/tools.py",
        '            state = f" (refused: {inst.refusal.problem})"\n',
        "            pass\n",
        ("tests/test_connectors_limits.py",),
        keyword="513",
        why="the model is not told a connector is refused",
    ),
    Mutant(
        "CM8",
        "connector access",
        "skald/features/connectors/service.py",
        "if not user.active or not can(role, CONNECTORS_USE):",
        "if not can(role, CONNECTORS_USE):",
        ("tests/test_connectors_stop.py",),
        keyword="deactivated",
        why="a deactivated member's connectors stay usable (role and grants still say yes)",
    ),
    Mutant(
        "CM9",
        "connector stop",
        "skald/mcp/transport.py",
        "                cancelled = True\n",
        "                raise\n",
        ("tests/test_connectors_stop.py",),
        keyword="polite",
        why="a stop during a polite close leaves the process running with its pipes open",
    ),
    Mutant(
        "CM10",
        "connector stop",
        "skald/mcp/transport.py",
        "            os.killpg(proc.pid, signal.SIGKILL)",
        "            os.kill(proc.pid, signal.SIGKILL)",
        ("tests/test_connectors_stop.py",),
        keyword="household_stdio",
        why="a household connector's own children outlive it",
    ),
    Mutant(
        "CM12",
        "connector secrets",
        "skald/features/connectors/redact.py",
        "        for form in sorted(spellings(value), key=len, reverse=True):",
        "        for form in [value]:",
        ("tests/test_connectors_secrets.py",),
        why="a JSON- or repr-escaped secret (a password with a quote) is shown",
    ),
    Mutant(
        "CM13",
        "connector secrets",
        "skald/features/connectors/redact.py",
        "    head = form[:PIECE]",
        "    head = form",
        ("tests/test_connectors_secrets.py",),
        why="the head of a secret left by a cut (an 80-character excerpt) is shown",
    ),
    Mutant(
        "CM14",
        "connector secrets",
        "skald/features/connectors/supervisor.py",
        "        return redact(text, self.secrets)",
        "        return text",
        ("tests/test_connectors_secrets.py",),
        docker=True,
        why="a connector's secret reaches stderr, errors, events and the log",
    ),
    Mutant(
        "CM15",
        "connector list limits",
        "skald/features/connectors/tools.py",
        "    if inst.refusal is not None:\n        return ToolResult.error(",
        "    if False:\n        return ToolResult.error(",
        ("tests/test_connectors_limits.py",),
        keyword="growing",
        why="a call to a refused connector waits and answers 'not running' instead of why",
    ),
    # -- misc (issues 20 and 32): unknown names at sign-in (LS) ---------------------------------
    Mutant(
        "LS1",
        "login storm",
        "skald/core/users.py",
        "await self.kdf_pool.imitate(self.checks, functools.partial(keys.burn_time, self.kdf))",
        "await self.kdf_pool.run(keys.burn_time, self.kdf)",
        ("tests/test_users.py",),
        keyword="unknown_name",
        why="an unknown name derives a real 256 MiB Argon2 again",
    ),
    Mutant(
        "LS2",
        "login storm",
        "skald/core/kdf_pool.py",
        "            return\n        await self._admit()\n",
        "            return\n",
        ("tests/test_login_throttle.py",),
        keyword="imitat or unknown_name",
        why="an imitation skips the pool's admission: the 503 tells unknown names apart",
    ),
    Mutant(
        "LS3",
        "login storm",
        "skald/core/kdf_pool.py",
        "return self._random.choice(self._values) if self._values else None",
        "return self._values[-1] if self._values else None",
        ("tests/test_login_throttle.py",),
        keyword="imitat or unknown_name",
        why="the wait is one fixed figure, not drawn from the measured checks",
    ),
    Mutant(
        "LS4",
        "login storm",
        "skald/core/users.py",
        "password, sample=checks)",
        "password)",
        ("tests/test_users.py",),
        keyword="unknown_name",
        why="plain accounts' checks are not sampled",
    ),
    Mutant(
        "LS5",
        "login storm",
        "skald/core/kdf_pool.py",
        "            loop.call_later(max(0.0, end - loop.time()), self._done, None)",
        "            self._done(None)",
        ("tests/test_login_throttle.py",),
        keyword="imitat or unknown_name",
        why="a cancelled imitation frees its slot at once, unlike a derivation",
    ),
    # -- misc (issues 20 and 32): look-alike names (NM) -----------------------------------------
    Mutant(
        "NM1",
        "look-alike names",
        "skald/files/lookalike.py",
        r"{_BLANK}\\u2028\\u2029]",
        "{_BLANK}]",
        ROUTER,
        keyword="look_alike or one_script",
        why="line and paragraph separators pass",
    ),
    Mutant(
        "NM2",
        "look-alike names",
        "skald/files/lookalike.py",
        "(0x00AD, 0x00AD), (0x034F, 0x034F), ",
        "(0x00AD, 0x00AD), ",
        ROUTER,
        keyword="look_alike or one_script",
        why="the combining grapheme joiner passes",
    ),
    Mutant(
        "NM3",
        "look-alike names",
        "skald/files/lookalike.py",
        'frozenset({"LATIN", "HAN", "HANGUL"}),',
        'frozenset({"LATIN", "HAN", "HANGUL", "CYRILLIC"}),',
        ROUTER,
        keyword="look_alike or one_script",
        why="Latin with Cyrillic counts as an allowed mix",
    ),
    Mutant(
        "NM4",
        "look-alike names",
        "skald/files/lookalike.py",
        "    if len({_script(ch) for ch in name} - _NO_SCRIPT) < 2:",
        "    if len({_script(ch) for ch in name} - _NO_SCRIPT) < 3:",
        ROUTER,
        keyword="look_alike or one_script",
        why="a word mixing two scripts skips the check",
    ),
    Mutant(
        "NM5",
        "look-alike names",
        "skald/files/lookalike.py",
        'unicodedata.category(ch)[0] not in "PSZ"',
        'unicodedata.category(ch)[0] not in "P"',
        ROUTER,
        keyword="look_alike or one_script",
        why="a math slash (U+2215) passes as a look-alike of /",
    ),
    # -- misc (issues 20 and 32): kept keys (KK) ------------------------------------------------
    Mutant(
        "KK1",
        "kept keys",
        "skald/core/kept_keys.py",
        "            if old is not None:\n                _wipe(old)\n        finally:",
        "        finally:",
        KEPT,
        why="keeping again leaves the replaced sealed copy's bytes on the disk",
    ),
    Mutant(
        "KK2",
        "kept keys",
        "skald/core/kept_keys.py",
        "        for path in leftovers:\n            _wipe_path(path)\n",
        "",
        KEPT,
        why="a temporary copy a crashed keep left survives the revoke",
    ),
    Mutant(
        "KK3",
        "kept keys",
        "skald/core/kept_keys.py",
        '    os.pwrite(fd, b"\\0" * os.fstat(fd).st_size, 0)',
        "    os.ftruncate(fd, 0)",
        KEPT,
        why="truncating instead of overwriting leaves the bytes in free blocks",
    ),
    Mutant(
        "KK4",
        "kept keys",
        "skald/core/kept_keys.py",
        "    try:\n        _wipe(fd)\n    finally:",
        "    try:\n        pass\n    finally:",
        KEPT,
        why="revoking only unlinks the sealed file",
    ),
    # -- misc (issues 20 and 32): Web Push endpoints (W) ----------------------------------------
    Mutant(
        "W1",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        '_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")',
        '_NUMERIC_LABEL = re.compile(r"[0-9]+")',
        PUSH,
        why="a hex spelling (0x7f.1, 0xa9fea9fe) of a private address passes",
    ),
    Mutant(
        "W2",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        "    if not address.is_global or address.is_multicast:",
        "    if not address.is_global:",
        PUSH,
        why="multicast counts as public (is_global says so on 3.11)",
    ),
    Mutant(
        "W3",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        "        return all(is_public(inner) for inner in _embedded(address))",
        "        return True",
        PUSH,
        why="loopback carried in a 6to4 / NAT64 / mapped IPv6 address passes",
    ),
    Mutant(
        "W4",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        "        if not addresses or not all(self._permit(a) for a in addresses):",
        "        if not addresses or not self._permit(addresses[0]):",
        PUSH,
        why="only the first resolved address is checked",
    ),
    Mutant(
        "W5",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        "                    str(address), port, timeout, local_address, socket_options",
        "                    host, port, timeout, local_address, socket_options",
        PUSH,
        why="the connection looks the name up again (DNS rebinding)",
    ),
    Mutant(
        "W6",
        "push endpoints",
        "skald/features/notifications/service.py",
        "(lambda _a: True) if allow else is_public",
        "(lambda _a: True)",
        PUSH,
        why="the service's client connects wherever a name resolves",
    ),
    Mutant(
        "W7",
        "push endpoints",
        "skald/features/notifications/webpush.py",
        "    except (EndpointRefusedError, httpx.InvalidURL):\n",
        "    except EndpointRefusedError:\n",
        PUSH,
        why="one device's invalid URL stops the member's other devices",
    ),
    Mutant(
        "W8",
        "push endpoints",
        "skald/features/notifications/pinned.py",
        "        if canonical != host:\n",
        "        if False:\n",
        PUSH,
        why="a numeric spelling (2130706433, 127.1, 0) is resolved instead of refused",
    ),
    # -- sandbox writes against the storage quota (issue 20 item 7), the host listener
    # against sandbox subnets (item 13), foreign containers (issue 32 item 12) --------
    Mutant(
        "SQ1",
        "sandbox quota",
        "skald/quota.py",
        "            if used > quota:\n",
        "            if used > quota * 1000:\n",
        ("tests/test_sandbox_quota.py",),
        keyword="stopped",
        docker=True,
        why="the command watch never finds the member over quota",
    ),
    Mutant(
        "SQ2",
        "sandbox quota",
        "skald/sandbox/execute.py",
        "            if isinstance(item, _Stop):\n                stopped = item.reason\n",
        "            if isinstance(item, _Stop) and False:\n                stopped = item.reason\n",
        ("tests/test_sandbox_quota.py",),
        keyword="stopped",
        docker=True,
        why="the watch's verdict does not stop the command",
    ),
    Mutant(
        "SQ3",
        "sandbox quota",
        "skald/sandbox/execute.py",
        'if [ "$4" -gt 0 ]; then ulimit -f "$4" || exit 125; fi\n',
        "",
        ("tests/test_sandbox_quota.py",),
        keyword="single_file",
        docker=True,
        why="no file-size limit on a command's files",
    ),
    Mutant(
        "SQ4",
        "sandbox quota",
        "skald/quota.py",
        "            if lost < quota - self.budget.used and since < max(self.walk_s, 4 * cost):\n",
        "            if since < max(self.walk_s, 4 * cost) * 50:\n",
        ("tests/test_sandbox_quota.py",),
        keyword="stopped and fallocate",
        docker=True,
        why="the disk's lost space does not trigger a walk (only the slow periodic one)",
    ),
    Mutant(
        "SQ5",
        "sandbox quota",
        "skald/sandbox/tool.py",
        "        if watch is not None:\n            await watch.settle()\n",
        "",
        ("tests/test_sandbox_quota.py",),
        keyword="stopped",
        docker=True,
        why="the usage figure is left stale after a command",
    ),
    Mutant(
        "SQ6",
        "sandbox quota",
        "skald/sandbox/manager.py",
        "            if labels.get(LABEL_INSTANCE) != self.instance_id:\n",
        "            if not labels.get(LABEL_INSTANCE):\n",
        ("tests/test_sandbox_containers.py",),
        keyword="never_adopted",
        docker=True,
        why="a container of another installation with our name is adopted",
    ),
    Mutant(
        "SQ7",
        "sandbox host access",
        "skald/api/app.py",
        "    refused = None if sandbox.allow_skald_access else ipaddress.IPv4Network(sandbox.subnet_pool)\n",
        "    refused = None\n",
        ("tests/test_sandbox_host_access.py",),
        why="Skald's own listener serves the sandboxes",
    ),
    Mutant(
        "SQ8",
        "sandbox host access",
        "skald/sandbox/network.py",
        "    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:\n",
        "    if False:\n",
        ("tests/test_sandbox_host_access.py",),
        why="a sandbox's address in IPv4-mapped IPv6 spelling (a dual-stack listener) passes",
    ),
    Mutant(
        "SQ9",
        "sandbox host access",
        "skald/sandbox/network.py",
        "            if address.upper() in _ANY:\n",
        "            if address.upper() not in _ANY:\n",
        ("tests/test_sandbox_host_access.py",),
        why="the doctor lists loopback listeners and misses the ones on all addresses",
    ),
    Mutant(
        "SQ10",
        "sandbox host access",
        "skald/api/security.py",
        '        if scope["type"] == "websocket" and self._from_sandbox(scope):\n',
        '        if scope["type"] == "websocket" and False:\n',
        ("tests/test_sandbox_host_access.py",),
        why="a sandbox opens the WebSocket",
    ),
    Mutant(
        "SQ11",
        "sandbox host access",
        "skald/api/app.py",
        "    refused = None if sandbox.allow_skald_access else ipaddress.IPv4Network(sandbox.subnet_pool)\n",
        "    refused = ipaddress.IPv4Network(sandbox.subnet_pool)\n",
        ("tests/test_sandbox_host_access.py",),
        why="the administrator's allow_skald_access is ignored",
    ),
    # -- speed: turn round trips and a lean start (issue 22) ---------------------------
    Mutant(
        "SP1",
        "speed",
        "skald/core/user_runtime.py",
        "await (await self.budget(role)).recheck()",
        "await (await self.budget()).recheck()",
        ("tests/test_turn_round_trips.py",),
        why="the turn's budget reads the member again (two more trips)",
    ),
    Mutant(
        "SP2",
        "speed",
        "skald/core/runtime.py",
        "        if role is None:\n            _, role = await self.member(user_id)",
        "        if True:\n            _, role = await self.member(user_id)",
        ("tests/test_turn_round_trips.py",),
        why="the role a caller passes is ignored",
    ),
    Mutant(
        "SP3",
        "speed",
        "skald/lean.py",
        'EXTRAS = ("click", "rich", "pygments")',
        'EXTRAS = ("click", "pygments")',
        ("tests/test_cold_start.py",),
        why="structlog loads rich again",
    ),
    Mutant(
        "SP4",
        "speed",
        "skald/lean.py",
        'if sys.modules.get(name, "") is None:',
        "if False:",
        ("tests/test_cold_start.py",),
        why="the hidden extras stay hidden for everyone after the start",
    ),
    Mutant(
        "SP5",
        "speed",
        "skald/agent/prompts.py",
        'if "<!--" not in line:',
        'if "<!-- " not in line:',
        ("tests/test_agents_data.py", "tests/test_agent_prompt_cache.py"),
        why="the fast path skips a placeholder written without a space",
    ),
    Mutant(
        "SP6",
        "speed",
        "skald/features/sandbox/hooks.py",
        "sandbox.watch_forever(runtime.app_built)",
        "sandbox.watch_forever()",
        ("tests/test_cold_start.py",),
        why="Docker is probed while the app is being built again",
    ),
    Mutant(
        "SP7",
        "speed",
        "skald/sandbox/manager.py",
        "        await self.first_look()\n        client = self.client()",
        "        client = self.client()",
        ("tests/test_cold_start.py",),
        why="a sandbox use right after a start is refused with 'connecting to Docker'",
    ),
    Mutant(
        "SP8",
        "speed",
        "skald/sandbox/manager.py",
        "        finally:\n            self._looked.set()",
        "        finally:\n            pass",
        ("tests/test_cold_start.py",),
        why="callers waiting for the first look wait out the whole bound",
    ),
    # -- household round 2 (issue 24): what a turn offers its model (HH) --------------
    Mutant(
        "HH1",
        "model profile",
        "skald/core/model_profile.py",
        '    if "tools" not in model.capabilities:\n        return "no_tools"\n',
        "",
        ("tests/test_model_profile.py",),
        why="a model without the tools capability is sent every tool again",
    ),
    Mutant(
        "HH2",
        "model profile",
        "skald/core/model_select.py",
        'tools=request.tools if "tools" in model.capabilities else [],',
        "tools=request.tools,",
        ("tests/test_model_profile.py",),
        keyword="fallback",
        why="a fallback model without tools gets the turn's tools on the wire",
    ),
    Mutant(
        "HH3",
        "model profile",
        "skald/core/model_profile.py",
        "model.context_window <= COMPACT_WINDOW",
        "model.context_window < COMPACT_WINDOW",
        ("tests/test_model_profile.py",),
        keyword="small_context",
        why="a model of exactly 8192 tokens is no longer compact",
    ),
    Mutant(
        "HH4",
        "model profile",
        "skald/agent/loop.py",
        "if offered is None or t.name in offered]",
        "]",
        ("tests/test_model_profile.py",),
        keyword="small_context",
        why="the compact turn sends every schema anyway",
    ),
    Mutant(
        "HH5",
        "model profile",
        "skald/core/model_profile.py",
        "    return {k: v for k, v in values.items() if k not in TOOL_BLOCKS}",
        "    return values",
        ("tests/test_model_profile.py",),
        why="a tool-less prompt still describes helpers and connectors",
    ),
    Mutant(
        "HH6",
        "form errors in words",
        "skald/llm/provider_types.py",
        "    return ip.is_private or ip.is_loopback or ip.is_link_local",
        "    return ip.is_loopback",
        ("tests/test_invalid_input.py",),
        keyword="scheme",
        why="a provider on the home network is sent to https:// it does not serve",
    ),
    Mutant(
        "HH7",
        "form errors in words",
        "skald/api/errors.py",
        '        sentence(str(item.get("key") or ""), str(item.get("message") or ""))',
        '        str(item.get("message") or "")',
        ("tests/test_invalid_input.py",),
        keyword="sentence",
        why="validation errors reach the page as msgspec wrote them",
    ),
    Mutant(
        "HH8",
        "form errors in words",
        "skald/api/invalid_input.py",
        '    (re.compile(r"^Expected `[^`]*` matching regex"), _pattern),\n',
        "",
        ("tests/test_invalid_input.py",),
        keyword="another_scheme",
        why="a bad address no longer says what an address looks like",
    ),
    # -- Tasks page and /remind (issue 24 items 1 and 3): reminders without a model,
    # the preview's checks, the job's own model, the notice's own text.
    Mutant(
        "TK1",
        "tasks-ui",
        "skald/features/schedule/scheduler.py",
        "        if conversation.model_id != job.model_id:",
        "        if False:",
        ("tests/test_schedule_form.py",),
        keyword="own_model or conversations_model",
        why="a scheduled run ignores the job's model and runs with AUTO",
    ),
    Mutant(
        "TK2",
        "tasks-ui",
        "skald/features/schedule/tool.py",
        "                    model_id=origin.model_id,",
        "                    model_id=None,",
        ("tests/test_schedule_form.py",),
        keyword="conversations_model",
        why="a job asked for in a conversation forgets that conversation's model",
    ),
    Mutant(
        "TK3",
        "tasks-ui",
        "skald/features/schedule/scheduler.py",
        '        if job.kind == "reminder":',
        "        if False:",
        ("tests/test_schedule_form.py",),
        keyword="remind_in_the_chat",
        why="a reminder's run asks the model instead of notifying its text",
    ),
    Mutant(
        "TK4",
        "tasks-ui",
        "skald/features/schedule/jobs.py",
        "        if count_limit and active >= self.config.max_active_jobs:",
        "        if count_limit and active > self.config.max_active_jobs:",
        ("tests/test_schedule_form.py",),
        keyword="preview_says",
        why="the preview passes a job the active-jobs limit will refuse",
    ),
    Mutant(
        "TK5",
        "tasks-ui",
        "skald/features/schedule/remind.py",
        "            at += timedelta(days=1)  # already past today: the next one",
        "            at += timedelta(days=0)",
        ("tests/test_schedule_form.py",),
        keyword="remind_reads",
        why="'/remind at 8:30' after 8:30 is set in the past instead of tomorrow",
    ),
    Mutant(
        "TK6",
        "tasks-ui",
        "skald/core/conversations.py",
        "            if feature.capability is not None and not can(mine.role, feature.capability):",
        "            if False:",
        ("tests/test_schedule_form.py",),
        keyword="may_not_schedule",
        why="/remind runs for a member without schedule.use",
    ),
    Mutant(
        "TK7",
        "tasks-ui",
        "skald/core/conversations.py",
        "if c.name not in _COMMAND_NAMES and (c.capability is None or can(role, c.capability))",
        "if c.name not in _COMMAND_NAMES",
        ("tests/test_schedule_form.py",),
        keyword="may_not_schedule",
        why="the composer offers /remind to a member who may not schedule",
    ),
    Mutant(
        "TK8",
        "tasks-ui",
        "skald/features/schedule/scheduler.py",
        "            body = answer.strip() or job.prompt",
        '            body = "done"',
        ("tests/test_schedule_form.py",),
        keyword="own_model",
        why="a job's notice says 'done' instead of its answer",
    ),
    Mutant(
        "TK9",
        "tasks-ui",
        "skald/features/schedule/jobs.py",
        'if not any(m.id == model_id and m.enabled and m.kind == "chat" for m in models):',
        "if not models:",
        ("tests/test_schedule_form.py",),
        keyword="preview_says or own_model",
        why="a job is given a model that does not exist (it would fail at its time)",
    ),
    Mutant(
        "TK10",
        "tasks-ui",
        "skald/features/schedule/words.py",
        "        days.append((int(part) - 1) % 7)",
        "        days.append(int(part) % 7)",
        ("tests/test_schedule_form.py",),
        keyword="words_read",
        why="a weekly job is described on the wrong day",
    ),
    # -- household UI polish (UP*; issue 24 items 4, 5, 10, 11) -------------------------
    Mutant(
        "UP1",
        "phone layout",
        "web/css/app.css",
        "    position: fixed;\n    top: calc(var(--header-h) + 6px);\n    left: 8px;",
        "    top: calc(var(--header-h) + 6px);\n    left: 8px;",
        ("tests/test_ui_narrow_e2e.py",),
        why="the notification panel hangs off the left edge of a phone's screen",
    ),
    Mutant(
        "UP2",
        "tool card titles",
        "web/js/components/tool-text.js",
        "  if (BUILT_IN.has(name)) return t(`tool.title.${name}`);",
        "  if (BUILT_IN.has(name)) return name;",
        ("tests/test_ui_tool_cards_e2e.py",),
        why="tool cards show raw tool ids again",
    ),
    Mutant(
        "UP3",
        "tool card sentences",
        "web/js/components/tool-text.js",
        "  ['Not run: your answer reached the output limit', 'tool.said_cut'],",
        "  ['Not run: the answer reached the output limit', 'tool.said_cut'],",
        ("tests/test_tool_text.py",),
        why="a cut call's card falls back to the general sentence (prefix out of date)",
    ),
    Mutant(
        "UP4",
        "marketplace audience",
        "skald/features/connectors/web/connectors.js",
        "  const forDev = (i) => i.audience === 'developers' && i.installed_version === null;",
        "  const forDev = (i) => i.installed_version === 0;",
        ("tests/test_ui_marketplace_e2e.py",),
        why="the MCP test server leads a household's Marketplace again",
    ),
    Mutant(
        "UP5",
        "feed translations",
        "skald/features/connectors/feed.py",
        '    display_name: str = ""\n    description: str = ""\n\n\n# A language code',
        '    display_name: str = ""\n    description: str = ""\n    command: list[str] = []\n\n\n# A language code',
        ("tests/test_connectors_feed_i18n.py",),
        why="a feed's translation may carry more than text",
    ),
    Mutant(
        "UP6",
        "microphone over http",
        "web/js/components/voice.js",
        "  if (!supported && !window.isSecureContext) {",
        "  if (!supported && window.isSecureContext) {",
        ("tests/test_ui_mic_https_e2e.py",),
        why="the microphone button vanishes over plain http on the home network",
    ),
    # -- connector recovery (issue 23 items 2, 7, 8): prefix CR -------------------------
    Mutant(
        "CR1",
        "connector recovery",
        "skald/features/connectors/supervisor.py",
        '        why = f": {self.last_error}" if self.last_error else ""',
        '        why = ""',
        ("tests/test_connectors_recovery.py",),
        keyword="at_once",
        why="a call to a failed connector answers without the reason",
    ),
    Mutant(
        "CR2",
        "connector recovery",
        "skald/features/connectors/supervisor.py",
        "            await self.start_household()\n",
        "            pass\n",
        ("tests/test_connectors_recovery.py",),
        keyword="starts_with_the_server",
        why="household connectors wait for a member's sign-in to start",
    ),
    Mutant(
        "CR3",
        "connector recovery",
        "skald/features/connectors/routes.py",
        "        await c.supervisor.retry(p.user.id, row)\n",
        "        pass\n",
        ("tests/test_connectors_recovery.py",),
        keyword="at_once",
        why="switching a failed household connector off and on leaves it failed",
    ),
    Mutant(
        "CR4",
        "connector recovery",
        "skald/features/connectors/supervisor.py",
        '        if inst is None or inst.state != "failed":\n            return False',
        "        if inst is None:\n            return False",
        ("tests/test_connectors_recovery.py",),
        keyword="at_once",
        why="Retry restarts a running connector (and its calls in flight)",
    ),
    Mutant(
        "CR5",
        "connector recovery",
        "skald/mcp/http.py",
        "            except httpx.ConnectError as exc:",
        "            except httpx.UnsupportedProtocol as exc:",
        ("tests/test_connectors_recovery.py",),
        keyword="idle",
        why="an HTTP server that died while idle stays 'running' until the next call",
    ),
    Mutant(
        "CR6",
        "connector recovery",
        "skald/mcp/http.py",
        '"the server ended the session (HTTP 404)", not_run=request_id)',
        '"the server ended the session (HTTP 404)")',
        ("tests/test_mcp_http_session.py", "tests/test_connectors_recovery.py"),
        keyword="404 or forgotten",
        why="a call the server refused for a forgotten session is not sent again",
    ),
    Mutant(
        "CR7",
        "connector recovery",
        "skald/features/connectors/tools.py",
        "            fresh = await inst.next_session(session, RESESSION_WAIT_S)",
        "            fresh = session",
        ("tests/test_connectors_recovery.py",),
        keyword="forgotten",
        why="the retry goes to the dead session instead of a new one",
    ),
    Mutant(
        "CR8",
        "connector recovery",
        "skald/mcp/session.py",
        "            if request_id == not_run and isinstance(error, Disconnected):",
        "            if isinstance(error, Disconnected):",
        ("tests/test_mcp_http_session.py",),
        keyword="in_flight",
        why="a call in flight that may have run is marked not run (and would run twice)",
    ),
    Mutant(
        "CR9",
        "connector recovery",
        "skald/features/connectors/supervisor.py",
        'script = f"mkdir -p {parent} && exec flock {deps}.lock sh -c {shlex.quote(locked)}"',
        'script = f"mkdir -p {parent} && exec sh -c {shlex.quote(locked)}"',
        ("tests/test_connectors_procs.py",),
        keyword="take_turns",
        docker=True,
        why="two installs of one dependency folder write into one staging folder at once",
    ),
    Mutant(
        "CR10",
        "connector recovery",
        "skald/sandbox/procgroup.py",
        "        await asyncio.shield(group.kill())",
        "        pass",
        ("tests/test_connectors_procs.py",),
        keyword="cut_by_a_lock",
        docker=True,
        why="an install cut by a lock or a stop runs on in the member's container",
    ),
    Mutant(
        "CR11",
        "connector recovery",
        "skald/features/connectors/supervisor.py",
        '        if inst.state == "failed":\n            raise ConflictError(inst.unavailable())',
        "        if False:\n            raise ConflictError(inst.unavailable())",
        ("tests/test_connectors_recovery.py",),
        keyword="sign_in_status",
        why="the page's sign-in status of a failed connector waits 30 s and says nothing",
    ),
    # -- MCP protocol (issue 23 items 3, 4): legacy SSE, resources, pictures (MP) --------
    Mutant(
        "MP1",
        "mcp legacy sse",
        "skald/mcp/sse.py",
        "                if not same_origin(endpoint, self.url):",
        "                if False:",
        ("tests/test_mcp_legacy_sse.py",),
        why="a legacy server's endpoint on another host gets the connector's credentials",
    ),
    Mutant(
        "MP2",
        "mcp legacy sse",
        "skald/mcp/sse.py",
        "    return 400 <= status < 500 and status not in (401, 403)",
        "    return 400 <= status < 500",
        ("tests/test_mcp_legacy_sse.py",),
        why="a refused sign-in (401) is taken for a legacy server",
    ),
    Mutant(
        "MP3",
        "connector resources",
        "skald/features/connectors/resources.py",
        "            acts_as=read_name(server) if server in self.instances else None,",
        "            acts_as=None,",
        ("tests/test_connectors_rich.py",),
        keyword="judged_per_connector",
        why="one grant for connector_read_resource reads every connector's resources",
    ),
    Mutant(
        "MP4",
        "tool pictures",
        "skald/core/model_select.py",
        'messages=request.messages if "vision" in model.capabilities else _unseen(request.messages),',
        "messages=request.messages,",
        ("tests/test_connectors_rich.py",),
        keyword="cannot_see",
        why="a tool's picture goes to a model that cannot see pictures",
    ),
    Mutant(
        "MP5",
        "tool pictures",
        "skald/llm/openai_compat.py",
        '        if m.role != "tool" and pictures:',
        "        if pictures:",
        ("tests/test_connectors_rich.py",),
        keyword="batch",
        why="a user message between two tool results of one batch (OpenAI refuses it)",
    ),
    Mutant(
        "MP6",
        "tool pictures",
        "skald/features/connectors/content.py",
        "        if len(data) > SAVE_ABOVE:",
        "        if False:",
        ("tests/test_connectors_rich.py",),
        keyword="cannot_see",
        why="a large picture a tool returned is not saved in the member's uploads",
    ),
    # -- oneof: one file-tool family over files and note mounts ---------------------------
    Mutant(
        "OO1",
        "note mount rules",
        "skald/files/mounts.py",
        "            indexed=True,",
        "            indexed=False,",
        ("tests/test_memory_tools.py", "tests/test_file_tools.py"),
        why="a new note gets no line in its store's index.md",
    ),
    Mutant(
        "OO2",
        "note mount rules",
        "skald/files/mounts.py",
        "            approval=store == SHARED_MEMORY,",
        "            approval=False,",
        ("tests/test_mounts.py",),
        keyword="approval",
        why="the shared-memory mount no longer says its writes wait for a yes",
    ),
    Mutant(
        "OO3",
        "file tools on notes",
        "skald/files/tools.py",
        '        return await self._on_note({**args, "path": note.agent_path})',
        "        return await self._on_note(args)",
        ("tests/test_file_tools.py",),
        why="a note path reaches the note stores as written, not in its canonical form",
    ),
    Mutant(
        "OO4",
        "file tools on notes",
        "skald/tools/memory.py",
        "        more = self.last < total",
        "        more = False",
        ("tests/test_memory_tools.py", "tests/test_file_tools.py"),
        why="a read cut at its limit does not say where to read on",
    ),
    Mutant(
        "OO5",
        "one models-list reader",
        "skald/llm/discovery.py",
        '    entries = body.get("data") if isinstance(body, dict) else body',
        '    entries = body.get("data")',
        ("tests/test_setup.py",),
        keyword="same_way",
        why="a provider whose models list is a bare array breaks Test connection (500)",
    ),
    # -- one OAuth client, remote MCP servers with MCP's own OAuth (issue 21, issue 23
    # item 5): prefix OA ------------------------------------------------------------------
    Mutant(
        "OA1",
        "oauth client",
        "skald/mcp/oauth.py",
        "                response.status_code == 401\n",
        "                response.status_code == 999\n",
        ("tests/test_connectors_oauth.py",),
        keyword="signed_in_from_the_page",
        why="a token the server refuses is not refreshed on the 401",
    ),
    Mutant(
        "OA2",
        "oauth client",
        "skald/mcp/oauth.py",
        '        query["resource"] = resource\n',
        "        pass\n",
        ("tests/test_connectors_oauth.py",),
        keyword="signed_in_from_the_page",
        why="the sign-in does not name the server the token is for (RFC 8707)",
    ),
    Mutant(
        "OA3",
        "oauth client",
        "skald/mcp/oauth.py",
        "    return tokens.expires_at is not None and tokens.expires_at - EXPIRY_MARGIN_SECONDS",
        "    return False and tokens.expires_at - EXPIRY_MARGIN_SECONDS",
        ("tests/test_connectors_oauth.py",),
        keyword="about_to_expire",
        why="a token about to expire is sent as it is instead of refreshed first",
    ),
    Mutant(
        "OA4",
        "oauth client",
        "skald/mcp/oauth.py",
        "        await self.store.save_tokens(fresh)\n",
        "        pass\n",
        ("tests/test_connectors_oauth.py",),
        keyword="signed_in_from_the_page",
        why="a refreshed token is not written to the member's database",
    ),
    Mutant(
        "OA5",
        "oauth client",
        "skald/features/connectors/routes.py",
        '    popup = "&popup=1" if pending.popup else ""',
        '    popup = ""',
        ("tests/test_ui_connectors_e2e.py",),
        keyword="popup and 375",
        why="the sign-in popup stays open on Skald's page at the end",
    ),
    Mutant(
        "OA6",
        "tls inspection",
        "skald/sandbox/trust.py",
        "    if not cert_failure(tail):\n",
        "    if True:\n",
        ("tests/test_sandbox_trust.py",),
        keyword="names_extra_ca_file",
        why="a certificate failure of an in-sandbox install shows only npm's last lines",
    ),
    Mutant(
        "OA7",
        "tls inspection",
        "skald/sandbox/trust.py",
        "    return len(certificates(host) - certificates(image) - certificates(extra))",
        "    return len(certificates(host) - certificates(image))",
        ("tests/test_sandbox_trust.py",),
        keyword="by_certificate",
        why="doctor ignores the authorities extra_ca_file already hands to the sandboxes",
    ),
    Mutant(
        "OA8",
        "connector services",
        "skald/features/connectors/supervisor.py",
        "            self.failures = 0\n",
        "            pass\n",
        ("tests/test_connectors_services.py",),
        why="deaths of a server that ran each time add up to 'failed'",
    ),
    Mutant(
        "OA9",
        "connector services",
        "skald/features/connectors/supervisor.py",
        "            raise GiveUp(self.last_error)\n",
        "            raise Restart(self.last_error)\n",
        ("tests/test_connectors_services.py",),
        keyword="gives_up",
        why="a connector that keeps failing is restarted forever, never marked failed",
    ),
    Mutant(
        "OA10",
        "connector services",
        "skald/features/connectors/supervisor.py",
        "            await self.runner().remove(self.service_name)\n",
        "            pass\n",
        ("tests/test_connectors_services.py",),
        why="stopping an instance leaves its service running",
    ),
    Mutant(
        "OA11",
        "connector services",
        "skald/features/connectors/supervisor.py",
        "            self.runner().ready(self.service_name)\n",
        "            pass\n",
        ("tests/test_connectors_services.py",),
        why="a connector running again stays degraded in the health for the settle time",
    ),
    # -- pages, web files and translations per feature (issue 21): prefix WP -------------
    Mutant(
        "WP1",
        "web parts",
        "skald/plugins/web.py",
        "            if key in where:",
        "            if key in where and where[key] == str(path):",
        ("tests/test_web_parts.py",),
        why="a plugin silently replaces a built-in sentence (or a feature another's)",
    ),
    Mutant(
        "WP2",
        "web parts",
        "skald/features/ops/pages.py",
        "        if p.say_not_allowed and not _shown(principal, simple, p)",
        "        if not _shown(principal, simple, p)",
        ("tests/test_web_parts.py",),
        why="a hidden plugin page answers 'not allowed' instead of 'not found'",
    ),
    Mutant(
        "WP3",
        "web parts",
        "skald/plugins/specs.py",
        "    return here if here.name == name else here / name",
        "    return here / name",
        ("tests/test_web_parts.py",),
        why="after the move into packages, no feature finds its pages or translations",
    ),
    Mutant(
        "WP4",
        "web parts",
        "skald/plugins/web.py",
        "        if part.name in seen:",
        "        if part.name in seen and part.folder in seen:",
        ("tests/test_web_parts.py",),
        why="two plugins share /plugins/<name>/ and one's files hide the other's",
    ),
    Mutant(
        "WP5",
        "web parts",
        "web/js/nav.js",
        "    if (simple && refused.full_only) return { redirect: '/' };",
        "    if (refused.full_only && !simple) return { redirect: '/' };",
        ("tests/test_ui_e2e.py",),
        why="a child typing #/overview is refused instead of sent back to the chat",
    ),
    Mutant(
        "WP6",
        "web parts",
        "web/js/nav.js",
        "  if (icon && Icon[icon]) return Icon[icon];",
        "  if (icon) return Icon[icon] || Icon.sparkle;",
        ("tests/test_ui_plugin_web_e2e.py",),
        why="a plugin's own icon is never shown (the generic one instead)",
    ),
    # -- repeated code folded into shared helpers (issue 21 section 3): prefix DD ---------
    Mutant(
        "DD1",
        "store helpers",
        "skald/store/database.py",
        "    if conn.changes() == 0:\n        raise NotFoundError(missing)",
        "    if conn.changes() < 0:\n        raise NotFoundError(missing)",
        ("tests/test_approvals_admin.py",),
        why="editing or deleting a rule or group that does not exist answers 200, not 404",
    ),
)


def _copy_tree(dest: Path) -> None:
    """The worktree's files as they are now (tracked + untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],  # noqa: S607
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        src = ROOT / rel
        if not src.is_file() or src.is_symlink():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _check(mutants: list[Mutant], base: Path) -> list[str]:
    problems = []
    for m in mutants:
        path = base / m.file
        if not path.is_file():
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            problems.append(f"{m.id}: the original snippet occurs {count} times in {m.file}")
    return problems


def _put(path: Path, text: str) -> None:
    """Write a source file and drop its cached bytecode: a pyc is checked by the
    source's mtime in whole seconds and its size, which a quick same-length edit can
    leave unchanged (the copy keeps bytecode, so the other files compile once)."""
    path.write_text(text, encoding="utf-8")
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()


def _pytest(copy: Path, m: Mutant, docker: bool, timeout: float) -> tuple[str, float]:
    """'pass', 'fail', 'timeout' or 'error:<code>' for one run of the mutant's tests."""
    args = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests]
    if not docker:
        args += ["-m", "not docker"]
    if m.keyword:
        args += ["-k", m.keyword]
    env = {**os.environ, "PYTHONPATH": str(copy)}
    started = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603 (this interpreter, our own test files)
            args, cwd=copy, env=env, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started
    took = time.monotonic() - started
    if done.returncode == 0:
        return "pass", took
    if done.returncode == 1:
        return "fail", took
    return f"error:{done.returncode}", took


def _in_a_copy(copies: queue.Queue[Path], work: Callable[[Path], _T]) -> _T:
    """Run `work` in a tree copy no other worker is using, then give the copy back."""
    copy = copies.get()
    try:
        return work(copy)
    finally:
        copies.put(copy)


def _run_all(
    chosen: list[Mutant], copies: queue.Queue[Path], opts: argparse.Namespace
) -> list[tuple[Mutant, str, float]]:
    """Baselines first (one per test selection), then every mutant, `--jobs` at a time,
    each in a copy of its own: a mutant edits its copy's file, so two never share one."""
    keys = list(dict.fromkeys((m.tests, m.keyword) for m in chosen))
    by_key = {(m.tests, m.keyword): m for m in chosen}
    jobs = max(1, opts.jobs)

    def baseline_of(key: tuple[tuple[str, ...], str | None]) -> str:
        m = by_key[key]
        outcome, took = _in_a_copy(copies, lambda c: _pytest(c, m, opts.docker, opts.timeout))
        print(f"baseline {' '.join(m.tests)} -k {m.keyword}: {outcome} ({took:.0f} s)", flush=True)
        return outcome

    with ThreadPoolExecutor(jobs) as pool:
        baseline = dict(zip(keys, pool.map(baseline_of, keys), strict=True))

    def one(m: Mutant) -> tuple[Mutant, str, float]:
        base = baseline[(m.tests, m.keyword)]
        if base != "pass":
            return m, f"error: baseline {base}", 0.0

        def mutated(copy: Path) -> tuple[str, float]:
            path = copy / m.file
            original = path.read_text(encoding="utf-8")
            _put(path, original.replace(m.original, m.mutated, 1))
            try:
                return _pytest(copy, m, opts.docker, opts.timeout)
            finally:
                _put(path, original)

        outcome, took = _in_a_copy(copies, mutated)
        verdict = {"fail": "killed", "timeout": "killed (timeout)", "pass": "SURVIVED"}.get(
            outcome, f"error: {outcome}"
        )
        print(f"{m.id:4} {verdict:17} {took:5.0f} s  {m.area}: {m.why}", flush=True)
        return m, verdict, took

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, chosen))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated mutant ids")
    parser.add_argument("--docker", action="store_true", help="also the Docker mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--check", action="store_true", help="only check the snippets")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run")
    parser.add_argument(
        "--jobs", type=int, default=1, help="mutants run at once, each in its own tree copy"
    )
    opts = parser.parse_args()

    chosen = [m for m in MUTANTS if opts.docker or not m.docker]
    if opts.only:
        wanted = set(opts.only.split(","))
        chosen = [m for m in MUTANTS if m.id in wanted]
    if opts.list:
        for m in chosen:
            print(f"{m.id:3} {m.area:26} {m.file}: {m.why}")
        return 0
    problems = _check(chosen, ROOT)
    if problems:
        print("The mutant list is stale:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if opts.check:
        print(f"{len(chosen)} mutants, every snippet found once")
        return 0

    # A plain `kill` still removes the copy (the context manager runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="skald-mutants-") as tmp:
        copies: queue.Queue[Path] = queue.Queue()
        for n in range(max(1, opts.jobs)):
            copy = Path(tmp) / f"tree{n}"
            _copy_tree(copy)
            copies.put(copy)
        results = _run_all(chosen, copies, opts)

    killed = sum(1 for _, v, _ in results if v.startswith("killed"))
    errors = sum(1 for _, v, _ in results if v.startswith("error"))
    survived = [m.id for m, v, _ in results if v == "SURVIVED"]
    print(
        f"\nscore: {killed}/{len(results)} killed"
        + (f", {errors} errors" if errors else "")
        + (f"; survived: {', '.join(survived)}" if survived else "")
    )
    return 0 if not survived and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
