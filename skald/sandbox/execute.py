"""Running one shell command in a member's container, with streamed output, a time
limit, an output cap, and nothing of it left running when the call ends.

The exec's main process is `WRAPPER`, as root: it runs `setsid -w setpriv ... bash -c
SESSION`, which drops to the member's uid:gid with two marker groups (this boot's and
the command's own, `procs.py`), leads a new session and process group, writes its pid
to a file in the container's /tmp and becomes the command.

When the command ends, the wrapper kills every process still carrying the command's
marker group (no second exec: the round trip stays one exec; the member cannot kill a
root wrapper). When that may not have happened - timeout, runaway output, /stop, or a
wrapper that died by a signal - a second exec as root kills the session and group and
then every process carrying the marker group. That catches `env -i setsid cmd &` too: a new session and an
empty environment keep the groups, and only CAP_SETGID (which members never have)
could drop them. Long-lived work belongs to background tasks, where it is visible.

`as_root=True` (only `install_packages`, always approved by a person) runs the same way
but stays root; the home is then checked for what root left there (`HOME_SCRUB`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import posixpath
import secrets
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from skald.log import get_logger
from skald.paths import CONTAINER_HOME
from skald.sandbox.manager import SandboxManager
from skald.sandbox.procs import (
    KILL_LOOP,
    MARK_BASE,
    MARK_SPAN,
    drop_argv,
    kill_marked_here,
    new_mark,
    run_killer,
)

log = get_logger("skald.sandbox")

# The command's session: writes its pid (= sid = pgid), enters the directory (a missing
# one gives exit 126 with bash's message), takes the file-size limit (KiB; 0: none; set
# hard as the member, who has no CAP_SYS_RESOURCE to raise it again), becomes the
# command. $1 pidfile, $2 dir, $3 cmd, $4 the limit.
SESSION: Final = r"""printf '%s\n' "$$" > "$1" || exit 125
cd -- "$2" || exit 126
if [ "$4" -gt 0 ]; then ulimit -f "$4" || exit 125; fi
exec bash -c "$3" </dev/null
"""

# The exec's main process, as root and without marks: $1 pidfile, $2 dir, $3 command,
# $4 its marker group, $5 $6 the marker range, $7 SESSION, $8 the file-size limit, then
# the argv that drops to the member with the marks (setpriv ... --). It runs the command's session under `setsid -w`, then
# kills whatever the command left running and hands on its exit status. A member's
# command cannot signal it (another uid, no CAP_KILL), so the cleanup happens; a uid-0
# member can, and the exec then ends with a signal's status (Skald kills as root).
WRAPPER: Final = (
    r"""pidfile=$1 dir=$2 cmd=$3 want=$4 lo=$5 hi=$6 session=$7 fsize=$8
shift 8
setsid -w "$@" bash -c "$session" skald-session "$pidfile" "$dir" "$cmd" "$fsize"
rc=$?
mode=cmd self=$$ parent=
"""
    + KILL_LOOP
    + r"""rm -f -- "$pidfile"
exit "$rc"
"""
)

# $1 the home, $2 uid, $3 gid. Run as root after a root step: nothing root made may stay
# in the bind-mounted home as root's, setuid or setgid (on the host it would be a root
# setuid file in the service account's tree). Device nodes cannot be made (no MKNOD).
HOME_SCRUB: Final = r"""find "$1" -xdev \( ! -user "$2" -o ! -group "$3" \) -exec chown -h "$2:$3" {} +
find "$1" -xdev -perm /6000 ! -type l -exec chmod ug-s {} +
find "$1" -xdev \( -type b -o -type c \) -delete
exit 0
"""

# An exec status from here up may mean the wrapper died by a signal before cleaning up.
WRAPPER_KILLED: Final = 128
# If a command keeps printing far beyond the cap, it is stopped rather than drained.
RUNAWAY_FACTOR: Final = 16
STREAM_END_WAIT_S: Final = 3.0


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    runaway: bool = False
    stopped: str = ""  # why Skald stopped it (`stop_when`), e.g. the storage quota
    duration_s: float = 0.0


def container_workdir(path: str | None) -> str:
    """An agent path as a directory in the container: `~`, `~/x` and relative paths are
    under the member's home; absolute paths are taken as they are (it is all sandbox)."""
    text = (path or "").strip()
    if text in ("", "~"):
        return CONTAINER_HOME
    if text.startswith("~/"):
        text = text[2:]
    if not text.startswith("/"):
        text = posixpath.join(CONTAINER_HOME, text)
    return posixpath.normpath(text)


async def run_command(
    manager: SandboxManager,
    container_id: str,
    command: str,
    *,
    workdir: str,
    timeout_s: float,
    max_bytes: int,
    on_output: Callable[[str], Awaitable[None]] | None = None,
    as_root: bool = False,
    max_file_bytes: int = 0,
    stop_when: Callable[[], Awaitable[str]] | None = None,
) -> CommandResult:
    """Run `command`; cancelling the caller kills the command's processes, then re-raises.
    Whatever the command left running is killed before this returns.

    `max_file_bytes` (> 0) is the largest file the command's processes may write
    (RLIMIT_FSIZE; a write past it fails, `SIGXFSZ` ends the writer). `stop_when`
    returns a reason when the command must be stopped (the member's storage quota):
    the command is then killed like a timed-out one and the reason is its result."""
    client = manager.client()
    api = client.api
    token = secrets.token_hex(12)
    pidfile = f"/tmp/.skald-cmd-{token}.pid"  # noqa: S108 - inside the container
    mark = new_mark(manager.boot_mark)
    who = (None, None) if as_root else (manager.uid, manager.gid)
    drop = drop_argv((manager.boot_mark, mark), *who)
    marks = [str(mark), str(MARK_BASE), str(MARK_BASE + MARK_SPAN)]
    fsize = str(-(-max_file_bytes // 1024) if max_file_bytes > 0 else 0)  # KiB, rounded up
    argv = ["bash", "-c", WRAPPER, "skald-cmd", pidfile, workdir, command, *marks, SESSION]
    argv += [fsize]
    argv += [*drop, "--"]
    exec_id = (
        await manager.call(
            api.exec_create,
            container_id,
            argv,
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            user="0:0",
            environment={"HOME": "/root" if as_root else CONTAINER_HOME},
        )
    )["Id"]

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | _Stop | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for chunk in api.exec_start(exec_id, stream=True, demux=False):
                if chunk:
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
        except BaseException as exc:
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    async def watch(when: Callable[[], Awaitable[str]]) -> None:
        try:
            queue.put_nowait(_Stop(await when()))
        except Exception as exc:  # a watch that fails stops the command: never unwatched
            queue.put_nowait(exc)

    started = loop.time()
    reader = loop.run_in_executor(manager.stream_pool, pump)
    watcher = None if stop_when is None else asyncio.ensure_future(watch(stop_when))
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept: list[str] = []
    kept_bytes = 0
    seen_bytes = 0
    truncated = timed_out = runaway = False
    stopped = ""
    deadline = started + timeout_s

    async def kill() -> None:
        await _kill_marked(manager, container_id, mark, pidfile)
        with contextlib.suppress(TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(reader), STREAM_END_WAIT_S)

    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                timed_out = True
                await kill()
                break
            try:
                item = await asyncio.wait_for(queue.get(), remaining)
            except TimeoutError:
                continue
            if item is None:
                break
            if isinstance(item, _Stop):
                stopped = item.reason
                # Every moment counts (the command may be writing the disk full): the
                # marked processes die from here first, then by the root killer as always.
                await asyncio.to_thread(kill_marked_here, mark)
                await kill()
                break
            if isinstance(item, BaseException):
                raise item
            seen_bytes += len(item)
            if kept_bytes < max_bytes:
                piece = item[: max_bytes - kept_bytes]
                kept_bytes += len(piece)
                text = decoder.decode(piece)
                kept.append(text)
                if on_output is not None and text:
                    await on_output(text)
                if len(piece) < len(item):
                    truncated = True
            else:
                truncated = True
            if seen_bytes > max_bytes * RUNAWAY_FACTOR:
                runaway = True
                await kill()
                break
    except BaseException:
        # /stop (cancellation) or a failure: nothing of the command may live on.
        await asyncio.shield(kill())
        if as_root:
            await asyncio.shield(_scrub_home(manager, container_id))
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
    kept.append(decoder.decode(b"", final=True))
    exit_code: int | None = None
    if not (timed_out or runaway or stopped):
        info = await manager.call(api.exec_inspect, exec_id)
        exit_code = info.get("ExitCode")
        # Detached leftovers (`cmd &`, `setsid`, `env -i`) end with the call: the
        # wrapper killed them, unless it was killed itself (a signal's exit status) or
        # gave none; then Skald does it as root. No extra exec in the common case.
        if exit_code is None or exit_code >= WRAPPER_KILLED:
            await _kill_marked(manager, container_id, mark)
    if as_root:
        await _scrub_home(manager, container_id)
    return CommandResult(
        exit_code=exit_code,
        output="".join(kept),
        truncated=truncated,
        timed_out=timed_out,
        runaway=runaway,
        stopped=stopped,
        duration_s=round(loop.time() - started, 3),
    )


class _Stop(msgspec.Struct, frozen=True):
    reason: str


async def _kill_marked(
    manager: SandboxManager, container_id: str, mark: int, pidfile: str = ""
) -> None:
    try:
        killed = await manager.call(
            run_killer, manager.client(), container_id, "cmd", mark, pidfile
        )
    except Exception as exc:
        log.warning("could not kill a command's processes", error=str(exc)[:300])
        return
    if killed:
        log.info("killed what a command left running", n=killed)


async def _scrub_home(manager: SandboxManager, container_id: str) -> None:
    api = manager.client().api

    def run() -> None:
        argv = ["bash", "-c", HOME_SCRUB, "skald-scrub", CONTAINER_HOME]
        exec_id = api.exec_create(
            container_id, [*argv, str(manager.uid), str(manager.gid)], user="0:0"
        )["Id"]
        api.exec_start(exec_id)

    await manager.call(run)


PROBE_COMMANDS: Final = (
    # runtimes
    "python3",
    "pip3",
    "node",
    "npm",
    # media
    "ffmpeg",
    "ffprobe",
    "convert",
    # documents and OCR
    "pdftotext",
    "pdftoppm",
    "tesseract",
    # text and data
    "jq",
    "rg",
    "sqlite3",
    "file",
    # archives
    "unzip",
    "tar",
    "xz",
    # network and version control
    "curl",
    "git",
    "ssh",
)
PROBE_TIMEOUT_S: Final = 5.0


def probe_script(commands: tuple[str, ...] = PROBE_COMMANDS) -> str:
    # The names are constants checked to be shell-safe (tests), so they are interpolated.
    names = " ".join(commands)
    return f'for c in {names}; do command -v "$c" >/dev/null 2>&1 && echo "$c"; done; exit 0'


def parse_probe(output: str) -> list[str]:
    """One name per line; blanks and duplicates dropped, order kept."""
    return list(dict.fromkeys(line.strip() for line in output.splitlines() if line.strip()))


async def probe(manager: SandboxManager, container_id: str) -> list[str]:
    """Which of the usual commands the sandbox has ([] when the probe fails)."""
    try:
        result = await run_command(
            manager,
            container_id,
            probe_script(),
            workdir=CONTAINER_HOME,
            timeout_s=PROBE_TIMEOUT_S,
            max_bytes=16_384,
        )
    except Exception as exc:
        log.warning("sandbox probe failed", error=str(exc)[:300])
        return []
    if result.exit_code != 0:
        return []
    allowed = set(PROBE_COMMANDS)
    return [c for c in parse_probe(result.output) if c in allowed]


def commands_block(found: list[str]) -> str:
    """SANDBOX_COMMANDS: the commands found in the member's sandbox, for the prompt."""
    if not found:
        return ""
    listed = ", ".join(f"`{c}`" for c in found)
    # The tool descriptions already say what the container is; this adds only what it holds.
    return (
        "## Your sandbox\n"
        f"`execute_cmd` runs in a Debian container; found there (a partial list): {listed}."
    )


def describe(result: CommandResult, timeout_s: float, max_bytes: int) -> str:
    """The tool result text for the model."""
    lines: list[str] = []
    if result.stopped:
        lines.append(f"[stopped: {result.stopped}]")
    elif result.timed_out:
        lines.append(f"[stopped: the command ran longer than {timeout_s:g} s]")
    elif result.runaway:
        lines.append("[stopped: the command printed far more than the output limit]")
    else:
        lines.append(f"[exit code {result.exit_code}]")
    output = result.output.rstrip("\n")
    lines.append(output if output else "(no output)")
    if result.truncated:
        lines.append(f"[output cut at {max_bytes // 1024} KiB]")
    return "\n".join(lines)


def safe_probe_name(name: str) -> bool:
    return bool(name) and all(ch.isalnum() or ch in "+._-" for ch in name)
