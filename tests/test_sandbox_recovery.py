"""kill -9 with a command waiting for approval: after the restart the Inbox still lists it,
and approving runs the command in the member's container and completes the turn. kill -9
with a command running: its processes (a detached one included) die at the restart.
Each test removes the instance's containers and networks, whatever happened."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from docker import errors as docker_errors
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from sandbox_support import docker_client, remove_instance_containers
from test_chat_recovery import _items, _wait_for

from skald.paths import DataLayout
from skald.store.snapshot import read_instance_id

pytestmark = pytest.mark.docker
PW = "ada's long password"


def test_kill_9_with_a_command_pending_then_approve_runs_it_in_the_sandbox(tmp_path: Path) -> None:
    docker = docker_client()
    with FakeLLM() as fake:
        srv = ServerProcess(tmp_path, SKALD_SANDBOX_ENABLED="true", SKALD_SANDBOX_MEMORY_MB="512")
        srv.create_admin()
        assert (
            srv.cli(
                "user", "add", "ada", "--role", "member", "--password-stdin", stdin=PW + "\n"
            ).returncode
            == 0
        )
        ada_id = next(
            u["id"]
            for u in json.loads(srv.cli("user", "list", "--json").stdout)
            if u["username"] == "ada"
        )
        srv.start()
        try:
            admin = Api(srv.url)
            admin.login(ADMIN, ADMIN_PW)
            admin.add_model(fake.base_url_openai, "m")
            command = 'echo "made in $(. /etc/os-release; echo $VERSION_CODENAME)" > ~/ran.txt; cat ~/ran.txt'
            fake.script(
                "m", [[Call("execute_cmd", {"command": command})], Text("The command ran.")]
            )
            ada = Api(srv.url)
            ada.login("ada", PW)
            cid = ada.post("/api/conversations", json={"title": "Cmd"}).json()["id"]
            ada.post(f"/api/conversations/{cid}/messages", json={"text": "Run it"})
            [before] = _wait_for(lambda: ada.get("/api/inbox").json(), timeout=60)
            assert before["tool"] == "execute_cmd"
            srv.stop(signal.SIGKILL)

            srv.start()
            ada = Api(srv.url)
            ada.login("ada", PW)
            [after] = _wait_for(lambda: ada.get("/api/inbox").json(), timeout=60)
            assert after["id"] == before["id"]
            assert ada.post(f"/api/inbox/{after['id']}/approve", json={}).status_code == 204
            _wait_for(lambda: _items(ada, cid)[-1]["text"] == "The command ran.", timeout=90)
            # It ran in the container (Debian trixie), writing into Ada's home on the host.
            assert (srv.data / "homes" / ada_id / "ran.txt").read_text().strip() == "made in trixie"
            tool_msgs: list[Any] = [
                m for m in fake.bodies("openai")[1]["messages"] if m["role"] == "tool"
            ]
            assert "made in trixie" in tool_msgs[0]["content"]
        finally:
            srv.close()
            _clean(docker, srv.data)


def _clean(docker: Any, data: Path) -> None:
    instance = read_instance_id(DataLayout(data).system_db)
    try:
        if instance is not None:
            remove_instance_containers(docker, instance)
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
    docker = docker_client()
    with FakeLLM() as fake:
        srv = ServerProcess(tmp_path, SKALD_SANDBOX_ENABLED="true", SKALD_SANDBOX_MEMORY_MB="512")
        srv.create_admin()
        srv.add_user("ada", PW)
        ada_id = _user_id(srv, "ada")
        srv.start()
        try:
            admin = Api(srv.url)
            admin.login(ADMIN, ADMIN_PW)
            admin.add_model(fake.base_url_openai, "m")
            command = "env -i setsid sleep 1001 >/dev/null 2>&1 < /dev/null & sleep 1000"
            fake.script("m", [[Call("execute_cmd", {"command": command})], Text("done")])
            ada = Api(srv.url)
            ada.login("ada", PW)
            cid = ada.post("/api/conversations", json={"title": "Cmd"}).json()["id"]
            ada.post(f"/api/conversations/{cid}/messages", json={"text": "Run it"})
            [request] = _wait_for(lambda: ada.get("/api/inbox").json(), timeout=60)
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
            _wait_for(lambda: sleepers() == both, timeout=60)
            srv.stop(signal.SIGKILL)
            # The crash killed nothing: the command and its escapee run on, unowned.
            assert sleepers() == both
            srv.start()
            _wait_for(lambda: sleepers() == [], timeout=60)
            ada = Api(srv.url)
            ada.login("ada", PW)
            # Recovery reports the call as interrupted rather than running it again.
            _wait_for(lambda: "interrupted by a restart" in json.dumps(_items(ada, cid)), 60)
        finally:
            srv.close()
            _clean(docker, srv.data)
