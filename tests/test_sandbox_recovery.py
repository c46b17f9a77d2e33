"""kill -9 with a command waiting for approval: after the restart the Inbox still lists it,
and approving runs the command in the member's container and completes the turn. kill -9
with a command running: its processes (a detached one included) die at the restart.
Each test removes the instance's containers and networks, whatever happened."""

from __future__ import annotations

import contextlib
import json
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker import errors as docker_errors
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess, wait_until
from sandbox_support import docker_client, remove_server_containers
from test_chat_recovery import _items

from skald.paths import DataLayout
from skald.store.snapshot import read_instance_id

pytestmark = pytest.mark.docker
PW = "ada's long password"


@contextlib.contextmanager
def _sandbox_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, FakeLLM, Any, str]]:
    """A started server with the sandbox on and the member ada, and the fake provider:
    (the server, the fake, a Docker client, ada's id). Afterwards the server is killed
    and the instance's containers and networks are removed."""
    docker = docker_client()
    with FakeLLM() as fake:
        srv = ServerProcess(tmp_path, SKALD_SANDBOX_ENABLED="true", SKALD_SANDBOX_MEMORY_MB="512")
        srv.create_admin()
        srv.add_user("ada", PW)
        ada_id = _user_id(srv, "ada")
        srv.start()
        try:
            yield srv, fake, docker, ada_id
        finally:
            srv.close()
            _clean(docker, srv.data)


def _ada_asks_to_run(
    srv: ServerProcess, fake: FakeLLM, command: str, answer: str
) -> tuple[Api, str]:
    """The fake as the model `m`, which calls `execute_cmd` with `command` and then says
    `answer`; ada signed in, having asked it in a new conversation: (her client, its id)."""
    admin = Api(srv.url)
    admin.login(ADMIN, ADMIN_PW)
    admin.add_model(fake.base_url_openai, "m")
    fake.script("m", [[Call("execute_cmd", {"command": command})], Text(answer)])
    ada = Api(srv.url)
    ada.login("ada", PW)
    cid = ada.post("/api/conversations", json={"title": "Cmd"}).json()["id"]
    ada.post(f"/api/conversations/{cid}/messages", json={"text": "Run it"})
    return ada, cid


def test_kill_9_with_a_command_pending_then_approve_runs_it_in_the_sandbox(tmp_path: Path) -> None:
    with _sandbox_server(tmp_path) as (srv, fake, _, ada_id):
        command = (
            'echo "made in $(. /etc/os-release; echo $VERSION_CODENAME)" > ~/ran.txt; cat ~/ran.txt'
        )
        ada, cid = _ada_asks_to_run(srv, fake, command, "The command ran.")
        [before] = wait_until(lambda: ada.get("/api/inbox").json(), 60)
        assert before["tool"] == "execute_cmd"
        srv.stop(signal.SIGKILL)

        srv.start()
        ada = Api(srv.url)
        ada.login("ada", PW)
        [after] = wait_until(lambda: ada.get("/api/inbox").json(), 60)
        assert after["id"] == before["id"]
        assert ada.post(f"/api/inbox/{after['id']}/approve", json={}).status_code == 204
        wait_until(lambda: _items(ada, cid)[-1]["text"] == "The command ran.", 90)
        # It ran in the container (Debian trixie), writing into Ada's home on the host.
        assert (srv.data / "homes" / ada_id / "ran.txt").read_text().strip() == "made in trixie"
        tool_msgs: list[Any] = [
            m for m in fake.bodies("openai")[1]["messages"] if m["role"] == "tool"
        ]
        assert "made in trixie" in tool_msgs[0]["content"]


def _clean(docker: Any, data: Path) -> None:
    try:
        remove_server_containers(docker, data)
    finally:
        docker.close()


def _user_id(srv: ServerProcess, name: str) -> str:
    return str(
        next(
            u["id"]
            for u in json.loads(srv.cli("user", "list", "--json").stdout)
            if u["username"] == name
        )
    )


SLEEPERS = ["sh", "-c", "ps -eo args | grep -E '^sleep (1000|1001)$' || true"]


def test_kill_9_with_a_command_running_kills_its_processes_at_the_restart(
    tmp_path: Path,
) -> None:
    # Once in about fifty CI runs the command was gone already right after the crash,
    # before any restart, which leaves nothing for the restart to show. That sitting is
    # reported (as a warning, with the container's state and the server's last words)
    # and played again once on a fresh server; two in a row fail the test.
    for attempt in (1, 2):
        seen = _crash_with_a_command_running_then_restart(tmp_path / f"try{attempt}")
        if seen is None:
            return
        warnings.warn(
            f"attempt {attempt}: the command was gone before the restart: {seen}",
            stacklevel=1,
        )
    pytest.fail("twice, the crash itself ended the command: the restart had nothing to kill")


def _crash_with_a_command_running_then_restart(root: Path) -> str | None:
    """kill -9 while an approved command (and a detached escapee) runs, then start again:
    both die at the restart and the call is reported interrupted. Returns None then, or
    what was seen when the command was no longer running right after the crash."""
    root.mkdir()
    with _sandbox_server(root) as (srv, fake, docker, ada_id):
        command = "env -i setsid sleep 1001 >/dev/null 2>&1 < /dev/null & sleep 1000"
        ada, cid = _ada_asks_to_run(srv, fake, command, "done")
        [request] = wait_until(lambda: ada.get("/api/inbox").json(), 60)
        assert ada.post(f"/api/inbox/{request['id']}/approve", json={}).status_code == 204
        instance = read_instance_id(DataLayout(srv.data).system_db)
        name = f"skald-{instance}-{ada_id}"

        def sleepers() -> list[str]:
            # The approved command may not have made its container yet: none yet.
            try:
                container = docker.containers.get(name)
            except docker_errors.NotFound:
                return []
            return sorted(container.exec_run(SLEEPERS).output.decode().split())

        both = ["1000", "1001", "sleep", "sleep"]
        wait_until(lambda: sleepers() == both, 60)
        srv.stop(signal.SIGKILL)
        # The crash killed nothing: the command and its escapee run on, unowned.
        after_crash = sleepers()
        if after_crash != both:
            return _what_was_seen(docker, name, after_crash, srv)
        srv.start()
        wait_until(lambda: sleepers() == [], 60)
        ada = Api(srv.url)
        ada.login("ada", PW)
        # Recovery reports the call as interrupted rather than running it again.
        wait_until(lambda: "interrupted by a restart" in json.dumps(_items(ada, cid)), 60)
    return None


def _what_was_seen(docker: Any, name: str, sleepers: list[str], srv: ServerProcess) -> str:
    try:
        state = docker.containers.get(name).attrs["State"]
        shown = {k: state.get(k) for k in ("Status", "OOMKilled", "StartedAt", "ExitCode")}
    except docker_errors.NotFound:
        shown = {"Status": "no container"}
    return f"sleepers {sleepers}, container {shown}, server log:\n{srv.own_log(30)}"
