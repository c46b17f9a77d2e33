"""The installer's image build shows one progress line (step n/N, time, an estimate) and
keeps Docker's whole output in a log file: on a terminal the line is rewritten in place,
elsewhere it is one line per step, never the build's thousands of lines."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from skald.ops.build_progress import FIRST_BUILD, ProgressLine

BUILD = [
    "Step 1/4 : ARG BASE",
    "Step 2/4 : FROM debian:trixie-slim",
    " ---> 1234abcd",
    "Step 3/4 : RUN apt-get update && apt-get install -y --no-install-recommends python3 git curl",
    *[f"Get:{i} http://deb.example/debian trixie/main amd64 pkg{i}" for i in range(500)],
    "Step 4/4 : LABEL skald.runtime=1",
    "Successfully built 5678ef",
]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(tty: bool) -> tuple[str, str]:
    out, log, clock = io.StringIO(), io.StringIO(), Clock()
    line = ProgressLine(out, log, tty=tty, clock=clock)
    for text in BUILD:
        clock.now += 60 if text.startswith("Step") else 0.5
        line.feed(text)
    line.close(ok=True)
    return out.getvalue(), log.getvalue()


def test_without_a_terminal_the_build_is_one_line_per_step_and_the_log_has_everything() -> None:
    shown, logged = _run(tty=False)
    lines = shown.splitlines()
    assert len(lines) == 5, lines  # four steps and the end
    assert lines[0].startswith("Building the sandbox image: step 1/4, ARG BASE")
    assert FIRST_BUILD in lines[1]  # no estimate from fewer than two finished steps
    assert "step 4/4" in lines[3] and "min left" in lines[3]
    assert lines[-1].startswith("Built the sandbox image in ")
    assert all(len(x) <= 79 for x in lines), lines
    assert logged.splitlines() == BUILD


def test_on_a_terminal_the_line_is_rewritten_in_place() -> None:
    shown, _ = _run(tty=True)
    assert shown.count("\n") == 1 and shown.endswith("\n")  # one line, ended once
    frames = shown.split("\r")[1:]
    assert any("step 3/4, RUN apt-get" in f for f in frames)
    assert "Get:" not in shown
    assert all(len(f.rstrip("\n").rstrip()) <= 79 for f in frames)


class _Image:
    """What `cli._build_logged` calls: `build_image(client, base, tag, progress)` (the
    real one streams Docker's build lines into `progress`)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def build_image(self, client: object, *, base: str, tag: str, progress: object) -> None:
        assert callable(progress)
        for text in BUILD:
            progress(text)
        if self.fail:
            from skald.errors import SkaldError

            raise SkaldError("the build failed at step 3")


def test_the_image_build_command_keeps_dockers_lines_in_the_log_and_shows_steps(
    tmp_path: Path,
) -> None:
    from skald.cli import _build_logged

    out, log_path = io.StringIO(), tmp_path / "image-build.log"
    asyncio.run(_build_logged(_Image(), None, "base", "tag", log_path, out))
    assert log_path.read_text(encoding="utf-8").splitlines() == BUILD
    shown = out.getvalue().splitlines()
    assert len(shown) == 5 and shown[-1].startswith("Built the sandbox image in "), shown
    assert not any("Get:" in x for x in shown)


def test_a_failed_image_build_names_the_log_that_holds_the_whole_output(
    tmp_path: Path,
) -> None:
    from skald.cli import _build_logged
    from skald.errors import SkaldError

    out, log_path = io.StringIO(), tmp_path / "image-build.log"
    with pytest.raises(SkaldError) as caught:
        asyncio.run(_build_logged(_Image(fail=True), None, "base", "tag", log_path, out))
    assert str(log_path) in str(caught.value) and "step 3" in str(caught.value)
    assert log_path.read_text(encoding="utf-8").splitlines() == BUILD
