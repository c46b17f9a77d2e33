"""kill -9 with a command waiting for approval: after the restart the Inbox still lists it,
and approving runs the command in the member's container and completes the turn."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from fake_llm import Call, FakeLLM, Text
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from sandbox_support import docker_client
from test_chat_recovery import _items, _wait_for

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
            for container in docker.containers.list(
                all=True, filters={"label": f"skald.user={ada_id}"}
            ):
                container.remove(force=True)
            docker.close()
