"""Driving a program that talks to its terminal (prompts on /dev/tty), as a person would."""

from __future__ import annotations

import os
import pty
import select
import time

SETUP_PASSWORD = "correct horse battery staple"
# What a person answers at `skald setup`'s prompts: the administrator mum, her password twice.
SETUP_ANSWERS = [
    ("Administrator username", "mum"),
    ("password for mum:", SETUP_PASSWORD),
    ("password for mum (again):", SETUP_PASSWORD),
]


def converse(
    argv: list[str],
    script: list[tuple[str, str]],
    timeout: float,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run argv on a pseudo-terminal, answering each prompt of `script` (in order) when it
    appears; returns the exit status and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes argv with the pty as its terminal
        os.execvpe(argv[0], argv, os.environ if env is None else env)  # noqa: S606 - the test's own command
    seen = ""
    pending = list(script)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(fd, 4096).decode(errors="replace")
                except OSError:  # the child closed the terminal: it is done
                    break
                if not chunk:
                    break
                seen += chunk
            while pending and pending[0][0] in seen:
                prompt, answer = pending.pop(0)
                seen = seen.replace(prompt, f"<{prompt}>", 1)
                os.write(fd, answer.encode() + b"\r")
        else:
            os.kill(pid, 9)
            raise AssertionError(f"no end within {timeout} s; the terminal showed:\n{seen}")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen
