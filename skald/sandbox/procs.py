"""Finding every process of one command, whatever it did to hide: supplementary groups.

Each command runs with two supplementary groups from a range no account uses: the
manager's *boot* group (new at every server start) and a group of its own. Every
descendant inherits them; dropping them needs CAP_SETGID, which a member's processes
never have (no root, no sudo, no-new-privileges). So `env -i setsid cmd &` (a new
session, a scrubbed environment, reparented to PID 1) still carries them, and

- at the end of a call, every process with the command's group is killed: by the
  command's own wrapper (no extra exec, so no extra round trip), and by a root exec
  from Skald when the wrapper may not have done it (killed, stopped, timed out, /stop);
- at the first `ensure` of a container after a server start, every process with a
  group from the range but not this boot's is killed (a crash left it behind).

Trap: a zombie still shows its groups until PID 1 reaps it; the killer skips zombies, or
it would loop on them. Root steps Skald runs itself (`install_packages`) carry the groups
too, but root may drop them (apt's download helpers do): those steps are also killed by
process group and session.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path
from typing import Any, Final

from skald.log import get_logger

log = get_logger("skald.sandbox")

# Supplementary group ids for markers: far above any real account's gid, below 2^32-1.
MARK_BASE: Final = 3_000_000_000
MARK_SPAN: Final = 1_000_000_000

# Kills, round after round until none is left, every live process that matches:
# mode=cmd: has group $want; mode=stale: has a marker group (lo <= g < hi) but not $want.
# Never $self nor $parent (the wrapper running it, and `setsid -w` waiting for the
# wrapper: it has the marks too, and its death would end the exec). Builtins only (read, kill, arithmetic): nothing
# it forks between rounds carries the marks but `sleep`, which has ended by then.
KILL_LOOP: Final = r"""killed=0
for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  found=0
  for d in /proc/[0-9]*; do
    case "${d#/proc/}" in "$self"|"$parent") continue ;; esac
    groups='' state=''
    while read -r key value; do
      case "$key" in
        State:) state=${value%% *} ;;
        Groups:) groups=$value ;;
      esac
    done 2>/dev/null < "$d/status"
    [ "$state" = Z ] && continue
    [ -n "$groups" ] || continue
    mine=0 marked=0
    for g in $groups; do
      [ "$g" = "$want" ] && mine=1
      if [ "$g" -ge "$lo" ] && [ "$g" -lt "$hi" ]; then marked=1; fi
    done
    if [ "$mode" = cmd ]; then hit=$mine; else hit=$((marked && !mine)); fi
    if [ "$hit" = 1 ] && kill -KILL "${d#/proc/}" 2>/dev/null; then
      found=1
      killed=$((killed + 1))
    fi
  done
  [ "$found" = 0 ] && break
  sleep 0.05
done
"""

# As root, from Skald: $1 mode, $2 the group, $3 pidfile or "" (cmd: kill the pidfile's
# process group and session first, waiting briefly for a command not started yet).
KILLER: Final = (
    r"""mode=$1 want=$2 pidfile=$3 lo=$4 hi=$5 self=$$ parent=
if [ -n "$pidfile" ]; then
  for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    [ -s "$pidfile" ] && break
    sleep 0.05
  done
  pg=$(cat -- "$pidfile" 2>/dev/null)
  case "$pg" in
    ''|*[!0-9]*) pg='' ;;
  esac
  # The member wrote the pidfile: its pid counts only if it carries the command's mark
  # (`1` would make `kill -- -1` kill the whole container).
  pgroups=''
  if [ -n "$pg" ]; then
    while read -r key value; do
      [ "$key" = Groups: ] && pgroups=$value
    done 2>/dev/null < "/proc/$pg/status"
  fi
  case " $pgroups " in
    *" $want "*) kill -KILL -- "-$pg" 2>/dev/null; pkill -KILL -s "$pg" 2>/dev/null ;;
  esac
  rm -f -- "$pidfile"
fi
"""
    + KILL_LOOP
    + 'echo "$killed"\n'
)


def _groups(pid: str) -> tuple[set[int], str]:
    """The supplementary groups and the state letter of a host process (empty if gone)."""
    groups: set[int] = set()
    state = ""
    try:
        with Path("/proc", pid, "status").open(encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "State":
                    state = value.strip()[:1]
                elif key == "Groups":
                    groups = {int(g) for g in value.split() if g.isdigit()}
    except OSError:
        pass
    return groups, state


def kill_marked_here(mark: int, rounds: int = 20) -> int:
    """SIGKILL, from the server's own machine, every process carrying the marker group
    `mark`; returns how many. Blocking (reads /proc): call from a thread.

    A head start for the root killer, not a replacement: it needs no exec (so it lands
    within milliseconds), but it sees the command only when Docker runs on this machine
    and the server is not in a container of its own, and it may signal only processes
    of its own uid (a member's commands run as the service account's uid; root steps
    do not). The marker groups are random numbers no account has, so a match is one of
    this command's processes."""
    killed = 0
    me = str(os.getpid())
    for _ in range(rounds):
        found = False
        for entry in Path("/proc").iterdir():
            pid = entry.name
            if not pid.isdigit() or pid == me:
                continue
            groups, state = _groups(pid)
            if mark not in groups or state == "Z":
                continue
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                continue
            found = True
            killed += 1
        if not found:
            break
    return killed


def new_mark(*avoid: int) -> int:
    """A fresh marker group id, different from the ones given."""
    while True:
        mark = MARK_BASE + secrets.randbelow(MARK_SPAN)
        if mark not in avoid:
            return mark


def drop_argv(marks: tuple[int, ...], uid: int | None = None, gid: int | None = None) -> list[str]:
    """`setpriv` with the marker groups, to uid:gid (None: stays root) with no capability
    left: an empty bounding set leaves nothing for execve to grant, even when the service
    account (and so the member's uid) is 0. The argv continues with `--` and the command."""
    argv = ["setpriv", "--groups=" + ",".join(str(m) for m in marks)]
    if uid is not None and gid is not None:
        argv += [
            f"--reuid={uid}",
            f"--regid={gid}",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--ambient-caps=-all",
        ]
    return argv


def killer_argv(mode: str, group: int, pidfile: str = "") -> list[str]:
    return [
        "bash",
        "-c",
        KILLER,
        "skald-kill",
        mode,
        str(group),
        pidfile,
        str(MARK_BASE),
        str(MARK_BASE + MARK_SPAN),
    ]


def run_killer(client: Any, container_id: str, mode: str, group: int, pidfile: str = "") -> int:
    """Run the killer as root in the container (blocking); returns how many it killed."""
    api = client.api
    exec_id = api.exec_create(container_id, killer_argv(mode, group, pidfile), user="0:0")["Id"]
    out = api.exec_start(exec_id)
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
    try:
        return int(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        log.warning("the process killer said something unexpected", output=text[:300])
        return 0
