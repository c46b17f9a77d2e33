"""One progress line for a long image build (the installer's sandbox image).

The rule: every line Docker writes goes to the log file; the person sees one line that
says which step of how many is running, how long it has taken and about how long is
left. On a terminal the line is rewritten in place (`\\r`); elsewhere (a pipe, a log)
a line is printed only when the step changes, so a build is a dozen lines, not 3,800.

The trap: the estimate. Steps are far from equal (the apt step is most of the build),
so "time per step so far" is only used once two steps have finished; before that the
line gives the usual total for a first build on a small machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TextIO

# The legacy builder's "Step 3/9 : RUN apt-get ..." (what the Docker API's build streams).
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
FIRST_BUILD = "usually 5 to 15 minutes"
WIDTH = 79  # the line fits an 80-column terminal


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


class ProgressLine:
    def __init__(
        self,
        out: TextIO,
        log: TextIO,
        *,
        tty: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out, self.log, self.tty, self.clock = out, log, tty, clock
        self.started = clock()
        self.step = 0
        self.steps = 0
        self.what = ""
        self._shown = ""

    def feed(self, line: str) -> None:
        """One line of the build's output: logged, and the progress line follows it."""
        self.log.write(line if line.endswith("\n") else line + "\n")
        m = _STEP.match(line.strip())
        if m is None:
            if self.tty:  # the clock moves on the same line
                self._show()
            return
        self.step, self.steps, self.what = int(m[1]), int(m[2]), m[3].strip()
        self._show(new_step=True)

    def text(self) -> str:
        elapsed = self.clock() - self.started
        if not self.steps:
            return f"Building the sandbox image ({_clock(elapsed)}, {FIRST_BUILD})"
        done = self.step - 1
        if done >= 2:
            left = elapsed / done * (self.steps - done)
            guess = f"about {max(1, round(left / 60))} min left"
        else:
            guess = FIRST_BUILD
        head = f"Building the sandbox image: step {self.step}/{self.steps}"
        tail = f" ({_clock(elapsed)}, {guess})"
        room = WIDTH - len(head) - len(tail) - 2
        what = self.what if len(self.what) <= room else self.what[: max(0, room - 1)] + "…"
        return f"{head}, {what}{tail}" if room > 8 else head + tail

    def _show(self, new_step: bool = False) -> None:
        text = self.text()
        if self.tty:
            if text != self._shown:
                self.out.write("\r" + text.ljust(len(self._shown)))
                self.out.flush()
        elif new_step:
            self.out.write(text + "\n")
            self.out.flush()
        self._shown = text

    def close(self, ok: bool) -> None:
        """The last word: the line ends, and says how long the build took."""
        took = _clock(self.clock() - self.started)
        end = f"Built the sandbox image in {took}" if ok else "The sandbox image build failed"
        if self.tty:
            self.out.write("\r" + end.ljust(len(self._shown)) + "\n")
        else:
            self.out.write(end + "\n")
        self.out.flush()
        self.log.flush()
