"""Running one shell command in a member's container, with streamed output, a time
limit, an output cap and a stop that kills every process the command started.

The command runs as `setsid bash -c WRAPPER`: the wrapper is the leader of a new process
group (and session) and writes its pid to a file in the container's /tmp; the command is
its child. To stop it, a second exec (as root, so processes raised with sudo die too)
kills the group with `kill -KILL -- -<pgid>`, everything left in the session with
`pkill -s`, and then every process whose environment carries the command's random
SKALD_CMD_ID (inherited by all descendants, so a child that made a session of its own
dies too; only one that also scrubbed its environment escapes).
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

log = get_logger("skald.sandbox")

# $1 pidfile, $2 working directory, $3 the command. Not `exec`: the wrapper stays the
# group leader, removes its pidfile and hands on the command's exit status.
WRAPPER: Final = r"""printf '%s\n' "$$" > "$1" || exit 125
cd -- "$2" || { rm -f -- "$1"; exit 126; }
bash -c "$3" </dev/null
rc=$?
rm -f -- "$1"
exit "$rc"
"""

# $1 pidfile, $2 the command's id. Waits briefly for a command stopped before it wrote
# its pid.
KILLER: Final = r"""for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  [ -s "$1" ] && break
  sleep 0.05
done
pg=$(cat -- "$1" 2>/dev/null) || exit 0
case "$pg" in ''|*[!0-9]*) exit 0 ;; esac
kill -KILL -- "-$pg" 2>/dev/null
pkill -KILL -s "$pg" 2>/dev/null
for p in /proc/[0-9]*; do
  if grep -qzx -- "SKALD_CMD_ID=$2" "$p/environ" 2>/dev/null; then
    kill -KILL "${p#/proc/}" 2>/dev/null
  fi
done
rm -f -- "$1"
exit 0
"""

# If a command keeps printing far beyond the cap, it is stopped rather than drained.
RUNAWAY_FACTOR: Final = 16
STREAM_END_WAIT_S: Final = 3.0


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    runaway: bool = False
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
) -> CommandResult:
    """Run `command`; cancelling the caller kills the command's processes, then re-raises."""
    client = manager.client()
    api = client.api
    token = secrets.token_hex(12)
    pidfile = f"/tmp/.skald-cmd-{token}.pid"  # noqa: S108 - inside the container
    exec_id = (
        await manager.call(
            api.exec_create,
            container_id,
            ["setsid", "-w", "bash", "-c", WRAPPER, "skald-cmd", pidfile, workdir, command],
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            user=manager.exec_user,
            environment={"HOME": CONTAINER_HOME, "SKALD_CMD_ID": token},
        )
    )["Id"]

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for chunk in api.exec_start(exec_id, stream=True, demux=False):
                if chunk:
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
        except BaseException as exc:
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    started = loop.time()
    reader = loop.run_in_executor(manager.stream_pool, pump)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept: list[str] = []
    kept_bytes = 0
    seen_bytes = 0
    truncated = timed_out = runaway = False
    deadline = started + timeout_s

    async def kill() -> None:
        await _kill_group(manager, container_id, pidfile, token)
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
        raise
    kept.append(decoder.decode(b"", final=True))
    exit_code: int | None = None
    if not (timed_out or runaway):
        info = await manager.call(api.exec_inspect, exec_id)
        exit_code = info.get("ExitCode")
    return CommandResult(
        exit_code=exit_code,
        output="".join(kept),
        truncated=truncated,
        timed_out=timed_out,
        runaway=runaway,
        duration_s=round(loop.time() - started, 3),
    )


async def _kill_group(manager: SandboxManager, container_id: str, pidfile: str, token: str) -> None:
    api = manager.client().api

    def run() -> None:
        exec_id = api.exec_create(
            container_id, ["bash", "-c", KILLER, "skald-kill", pidfile, token], user="0:0"
        )["Id"]
        api.exec_start(exec_id)

    try:
        await manager.call(run)
    except Exception as exc:
        log.warning("could not kill a stopped command", error=str(exc)[:300])


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
    return (
        "## Your sandbox\n"
        "`execute_cmd` runs shell commands in your own Linux container (Debian), as the "
        f"member, with their home at `{CONTAINER_HOME}` (`~`). Found there: {listed}. "
        "The list is partial: other tools may be present, and `sudo apt-get install` adds "
        "more (they last until the container is recreated). Files you want to keep belong "
        "in the home."
    )


def describe(result: CommandResult, timeout_s: float, max_bytes: int) -> str:
    """The tool result text for the model."""
    lines: list[str] = []
    if result.timed_out:
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
