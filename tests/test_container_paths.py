"""The file tools on paths only the member's sandbox has (`/tmp/…`), against real
containers: made by one tool, read by another; odd names without shell injection; only
the member's own container; a paused or absent one answers in a sentence; mounted paths
keep the host path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from sandbox_support import docker_fixture, run_in_sandbox, sandbox_runtime_fixture  # noqa: F401
from tool_support import RunsTools

from skald.agent import Tool, ToolResult
from skald.core.runtime import Runtime
from skald.files.router import PathRouter
from skald.files.tools import MAX_EDIT_BYTES, file_tools
from skald.sandbox.execute import CommandResult
from skald.sandbox.files import ContainerFiles

pytestmark = pytest.mark.docker

# Quotes, a command substitution, backticks, a newline and spaces in one name.
ODD = '/tmp/odd dir/we\'ird "$(touch /tmp/pwned)" `touch /tmp/pwned2`\nname.txt'


class Box(RunsTools):
    def __init__(self, rt: Runtime, user_id: str) -> None:
        self.rt = rt
        self.user_id = user_id
        assert rt.sandbox is not None
        router = PathRouter.for_member(rt.core.layout, user_id)
        files = ContainerFiles(rt.sandbox, lambda: rt.member(user_id))
        self.tools: dict[str, Tool] = {t.name: t for t in file_tools(router, container=files)}

    async def run(self, name: str, *, check_schema: bool = False, **args: Any) -> ToolResult:
        """Without the loop's check of the arguments against the tool's schema."""
        return await super().run(name, check_schema=check_schema, **args)

    async def sh(self, command: str) -> CommandResult:
        return await run_in_sandbox(self.rt, self.user_id, command)


async def _member(rt: Runtime, name: str, role: str = "member") -> Box:
    user = (await rt.core.users.create(name, PASSWORD, role)).user
    rt.core.layout.home(user.id).mkdir(parents=True, exist_ok=True)
    return Box(rt, user.id)


async def test_a_file_made_in_tmp_by_a_command_is_read_written_and_listed_by_the_file_tools(
    sandbox_runtime: Runtime,
) -> None:
    ada = await _member(sandbox_runtime, "ada")
    made = await ada.sh("mkdir -p /tmp/build && printf 'a,b\\n1,2\\n' > /tmp/build/out.csv")
    assert made.exit_code == 0, made.output
    assert await ada.ok("read_file", path="/tmp/build/out.csv") == "     1\ta,b\n     2\t1,2"
    said = await ada.ok("write_file", path="/tmp/build/new/report.md", content="# R\nok\n")
    assert said.startswith("Created /tmp/build/new/report.md (2 lines")
    await ada.ok("append_file", path="/tmp/build/out.csv", content="3,4\n")
    await ada.ok("edit_file", path="/tmp/build/out.csv", old_text="1,2", new_text="one,two")
    await ada.ok(
        "replace_lines", path="/tmp/build/out.csv", start_line=1, end_line=1, old_text="a,b",
        new_text="x,y",
    )  # fmt: skip
    seen = await ada.sh("cat /tmp/build/out.csv; stat -c '%u %a' /tmp/build/new/report.md")
    uid = (await ada.sh("id -u")).output.strip()
    assert seen.output == f"x,y\none,two\n3,4\n{uid} 644\n", seen.output
    listing = await ada.ok("list_files", path="/tmp/build")
    assert "- /tmp/build/new/" in listing and "- /tmp/build/out.csv  " in listing
    assert "1-2 # R" in await ada.ok("get_outline", path="/tmp/build/new/report.md")
    assert ">    2\tone,two" in await ada.ok(
        "search_file", path="/tmp/build/out.csv", pattern="one"
    )
    # The same limits as on the host, and plain refusals.
    await ada.sh(f"head -c {MAX_EDIT_BYTES + 1} /dev/zero | tr '\\0' a > /tmp/big.txt")
    assert "too large" in await ada.fails("read_file", path="/tmp/big.txt")
    assert "Nothing is at /tmp/nope.txt" in await ada.fails("read_file", path="/tmp/nope.txt")
    assert "folder" in await ada.fails("read_file", path="/tmp/build")
    # Written as the member, without capabilities (uid 0 in tests: /sys is still read-only).
    assert "/sys/x.txt" in await ada.fails("write_file", path="/sys/x.txt", content="x")
    await ada.sh("mkfifo /tmp/fifo")
    assert "not a regular file" in await ada.fails("read_file", path="/tmp/fifo")
    assert "execute_cmd" in await ada.fails("grep", pattern="x", path="/tmp")


async def test_odd_names_are_arguments_never_shell_text(sandbox_runtime: Runtime) -> None:
    ada = await _member(sandbox_runtime, "ada")
    await ada.sh("true")  # the container exists (a server's start makes every member's)
    await ada.ok("write_file", path=ODD, content="odd\n")
    assert await ada.ok("read_file", path=ODD) == "     1\todd"
    check = await ada.sh("ls /tmp/pwned /tmp/pwned2 2>&1; ls '/tmp/odd dir' | wc -l")
    assert check.output.count("No such file or directory") == 2, check.output
    assert check.output.strip().endswith("1")
    # A name a command made is reached exactly as it is.
    made = await ada.sh("printf 'made\\n' > \"/tmp/odd dir/$(printf 'a\\nb $x')\"")
    assert made.exit_code == 0, made.output
    assert await ada.ok("read_file", path="/tmp/odd dir/a\nb $x") == "     1\tmade"
    listing = await ada.ok("list_files", path="/tmp/odd dir")
    assert "a\nb $x" in listing
    assert "'..' is not allowed" in await ada.fails("read_file", path="/tmp/../etc/passwd")


async def test_another_members_container_is_never_reached(sandbox_runtime: Runtime) -> None:
    ada = await _member(sandbox_runtime, "ada")
    bob = await _member(sandbox_runtime, "bob")
    assert (await bob.sh("echo bob-secret > /tmp/bob.txt")).exit_code == 0
    await ada.sh("true")
    assert "Nothing is at /tmp/bob.txt" in await ada.fails("read_file", path="/tmp/bob.txt")
    await ada.ok("write_file", path="/tmp/ada.txt", content="ada\n")
    assert "No such file" in (await bob.sh("cat /tmp/ada.txt 2>&1")).output
    # A role without sandbox.exec reaches no container at all.
    tim = await _member(sandbox_runtime, "tim", "children")
    assert "may not use" in await tim.fails("read_file", path="/tmp/ada.txt")


async def test_a_paused_or_absent_container_answers_in_a_sentence_and_the_home_stays_on_the_host(
    sandbox_runtime: Runtime, docker: Any
) -> None:
    rt = sandbox_runtime
    assert rt.sandbox is not None
    ada = await _member(rt, "ada")
    await ada.sh("echo hi > /tmp/x.txt")
    container = docker.containers.get(rt.sandbox.container_name(ada.user_id))
    container.pause()
    try:
        assert "paused" in await ada.fails("read_file", path="/tmp/x.txt")
        # Mounted paths keep the host path: the home works while the container is paused.
        await ada.ok("write_file", path="/home/skald/note.txt", content="on the host\n")
        home: Path = rt.core.layout.home(ada.user_id)
        assert (home / "note.txt").read_text() == "on the host\n"
        assert "on the host" in await ada.ok("read_file", path="/home/skald/note.txt")
    finally:
        container.unpause()
    container.remove(force=True)
    assert "not there now" in await ada.fails("list_files", path="/tmp")
