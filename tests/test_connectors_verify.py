"""A connector's `verify` command (issue 29 item 5): the Connectors page's Test button
runs it with the key being typed, where the connector itself runs (the member's
container), and saving a key it refuses is refused with its message; nothing is stored,
and the key never comes back in the message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import PASSWORD, Client, MakeClient, signed_in
from connector_support import python_connector
from sandbox_support import docker_fixture, sandbox_runtime_fixture  # noqa: F401

from skald.api.app import create_app
from skald.core.runtime import Runtime
from skald.features.connectors import service
from skald.features.connectors.feedtool import write_index
from skald.features.connectors.service import ConnectorsConfig
from skald.features.connectors.supervisor import _verdict

GOOD = "good-key-31f5c0a9e27b4d68"
BAD = "bad-key-8e2d47b1c9a05f36"

# Reads the key it is given and answers one JSON line; echoes the key when it refuses
# (the message shown must not), and prints a line of noise first.
VERIFY = """
import json, os, sys
key = os.environ.get("API_KEY", "")
print("checking the key...")
if key == GOOD_KEY:
    print(json.dumps({"ok": True, "message": "the service knows this key"}))
else:
    print(json.dumps({"ok": False, "message": "the service refused " + key}))
    sys.exit(1)
""".replace("GOOD_KEY", repr(GOOD))


def _feed(root: Path, verify: bool = True) -> Path:
    extra: dict[str, Any] = {
        "scope": "personal",
        "auth": {"type": "api_key", "fields": [{"name": "API_KEY", "label": "API key"}]},
        "env": {"API_KEY": "{SECRET:API_KEY}"},
    }
    if verify:
        extra["verify"] = {"command": ["python3", "{DIR}/verify.py"], "timeout_secs": 20}
    folder = python_connector(root, "keyed", "clock_server.py", extra=extra)
    (folder / "verify.py").write_text(VERIFY)
    write_index(root, 1)
    return root


def test_a_verify_answer_is_its_last_json_line_and_anything_else_is_a_failure() -> None:
    assert _verdict('noise\n{"ok": true, "message": "fine"}\n', 0) == (True, "fine")
    assert _verdict('{"ok": false, "message": "no"}', 1) == (False, "no")
    assert _verdict('{"ok": false}', 0) == (False, "the check failed")
    # ok, but the command failed: not ok.
    assert _verdict('{"ok": true}', 3) == (False, "the check ended with exit code 3")
    assert _verdict("Traceback ...", 1) == (False, "the check gave no answer (exit code 1)")
    assert _verdict('["ok"]\n{"ok": "yes"}', 0)[0] is False


async def test_a_key_a_check_cannot_run_for_is_not_saved_and_without_a_check_test_is_400(
    runtime: Runtime, make_client: MakeClient, household: dict[str, str], tmp_path: Path
) -> None:
    """Sandboxes off here: the check (which runs in the member's container) cannot run,
    so saving says why and keeps nothing."""
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(_feed(tmp_path / "feed")))
    await c.installer.install(c.feed(), "keyed")
    ada = await signed_in(make_client, "ada")
    card = (await ada.call("GET", "/api/connectors/keyed")).json()
    assert card["verifies"] is True
    r = await ada.call("PUT", "/api/connectors/keyed/secrets", json={"values": {"API_KEY": GOOD}})
    assert r.status_code == 400 and r.json()["error"]["code"] == "verify_failed"
    assert "sandboxes are off" in r.json()["error"]["message"] and GOOD not in r.text
    assert (await ada.call("GET", "/api/connectors/keyed")).json()["secrets_set"] == []
    # A name the connector does not take is refused before anything runs.
    r = await ada.call("POST", "/api/connectors/keyed/verify", json={"values": {"OTHER": "x"}})
    assert r.status_code == 400 and "OTHER" in r.text

    c.config = ConnectorsConfig(feed=str(_feed(tmp_path / "plain", verify=False)))
    await c.store.remove("keyed")
    await c.installer.install(c.feed(), "keyed")
    r = await ada.call("POST", "/api/connectors/keyed/verify", json={"values": {"API_KEY": GOOD}})
    assert r.status_code == 400 and "no check" in r.text
    r = await ada.call("PUT", "/api/connectors/keyed/secrets", json={"values": {"API_KEY": GOOD}})
    assert r.status_code == 200 and r.json()["secrets_set"] == ["API_KEY"]


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_the_test_button_runs_verify_in_the_members_container_and_a_refusal_blocks_saving(
    sandbox_runtime: Runtime, docker: Any, tmp_path: Path
) -> None:
    runtime = sandbox_runtime
    created = await runtime.core.users.create("ada", PASSWORD, "member")
    c = service.require(runtime.server)
    c.config = ConnectorsConfig(feed=str(_feed(tmp_path / "feed")))
    await c.installer.install(c.feed(), "keyed")
    transport = httpx.ASGITransport(app=create_app(runtime), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        ada = Client(http)
        await ada.login("ada")
        r = await ada.call(
            "POST", "/api/connectors/keyed/verify", json={"values": {"API_KEY": BAD}}
        )
        assert r.status_code == 200, r.text
        assert r.json()["ok"] is False and "the service refused" in r.json()["message"]
        assert BAD not in r.text  # the check echoed it; the answer does not
        r = await ada.call(
            "PUT", "/api/connectors/keyed/secrets", json={"values": {"API_KEY": BAD}}
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == "verify_failed"
        assert "the service refused" in r.json()["error"]["message"] and BAD not in r.text
        assert (await ada.call("GET", "/api/connectors/keyed")).json()["secrets_set"] == []

        r = await ada.call(
            "POST", "/api/connectors/keyed/verify", json={"values": {"API_KEY": GOOD}}
        )
        assert r.json() == {"ok": True, "message": "the service knows this key"}
        r = await ada.call(
            "PUT", "/api/connectors/keyed/secrets", json={"values": {"API_KEY": GOOD}}
        )
        assert r.status_code == 200 and r.json()["secrets_set"] == ["API_KEY"]
    # The check left nothing running in her container.
    assert runtime.sandbox is not None
    container = docker.containers.get(await runtime.sandbox.container_id(created.user.id))
    assert "verify.py" not in json.dumps(container.top(ps_args="-eww -o pid,args"))
