"""Plugins in a real `skald serve`: an administrator uploads the example plugin's wheel
and a plugin that raises when imported; after the restart the example serves, the
broken one is listed as failed with its error (its address answers 503 with the reason)
and everything else serves. The CLI installs, lists and switches too."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import ADMIN, ADMIN_PW, Api, ServerProcess
from plugin_wheels import build_example, plugin_wheel
from ui_support import server_fixture

BROKEN = "raise RuntimeError('the broken plugin cannot start')\n"


server = server_fixture()


@pytest.mark.timeout(180)
def test_an_uploaded_plugin_serves_after_a_restart_and_a_broken_one_is_listed_failed(
    server: ServerProcess, tmp_path: Path
) -> None:
    example = build_example(tmp_path / "wheels")
    code = {"skald_broken/__init__.py": BROKEN}
    broken = plugin_wheel(tmp_path / "wheels", "broken", code, "0.1")
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    for wheel in (example, broken):
        files = [("data", (wheel.name, wheel.read_bytes(), "application/octet-stream"))]
        r = admin.post("/api/plugins", files=files)
        assert r.status_code == 201, r.text
        assert r.json()["restart_required"] is True
    server.stop()
    server.start()
    admin = Api(server.url)
    admin.login(ADMIN, ADMIN_PW)
    listed = {p["id"]: p for p in admin.get("/api/plugins").json()}
    assert listed["example"]["status"] == "ok", listed
    assert listed["broken"]["status"] == "failed"
    assert "the broken plugin cannot start" in listed["broken"]["error"]
    # The rest of the server serves; the broken plugin's address says why.
    assert admin.get("/api/health").status_code == 200
    assert admin.get("/api/auth/me").status_code == 200
    r = admin.get("/api/plugin/broken/anything")
    assert r.status_code == 503 and "cannot start" in r.json()["error"]["message"]
    assert r.headers["cache-control"] == "no-cache"
    r = admin.get("/api/plugin/example/motto")
    assert r.status_code == 200 and r.json() == {"motto": "Many hands make light work"}
    # Switched off through the CLI while the server runs: 404 at the next request.
    out = server.cli("plugin", "disable", "example")
    assert out.returncode == 0, out.stderr
    assert admin.get("/api/plugin/example/motto").status_code == 404
    assert server.cli("plugin", "enable", "example").returncode == 0
    assert admin.get("/api/plugin/example/motto").status_code == 200
    listing = server.cli("plugin", "list").stdout
    assert "example  1.0.0  wheel  on" in listing and "broken  0.1  wheel  failed" in listing
