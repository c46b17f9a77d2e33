"""A restore never touches another installation's sandboxes: a copy restored into another
data directory gets an instance id of its own, and only the target's containers stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import PASSWORD
from harness import ServerProcess, run_cli
from sandbox_support import docker_client, remove_instance_containers

from skald.paths import DataLayout
from skald.sandbox.image import image_tag
from skald.sandbox.manager import LABEL_INSTANCE, LABEL_USER
from skald.store.snapshot import read_instance_id

pytestmark = pytest.mark.docker


def _instance(srv: ServerProcess) -> str:
    value = read_instance_id(DataLayout(srv.data).system_db)
    assert value
    return value


def _sandbox_of(client: Any, instance: str) -> Any:
    """A running container labelled as that installation's member sandbox."""
    return client.containers.run(
        image_tag(),
        ["sleep", "300"],
        detach=True,
        labels={LABEL_INSTANCE: instance, LABEL_USER: "someone"},
    )


def test_restore_into_another_directory_leaves_the_live_instances_sandboxes_alone(
    tmp_path: Path,
) -> None:
    client = docker_client()
    live = ServerProcess(tmp_path / "live")
    live.create_admin()
    live.add_user("ada", PASSWORD)
    other = ServerProcess(tmp_path / "other")
    other.create_admin()
    live_id, other_id = _instance(live), _instance(other)
    r = live.cli("backup")
    assert r.returncode == 0, r.stderr
    archive = r.stdout.split("Backup written: ", 1)[1].split("\n", 1)[0]
    live_box = _sandbox_of(client, live_id)
    other_box = _sandbox_of(client, other_id)
    fresh = tmp_path / "fresh" / "data"
    fresh_id = None
    try:
        env = {**live.env, "SKALD_SANDBOX_ENABLED": "true"}
        # A copy into a brand-new directory: its own id, nothing stopped anywhere.
        r = run_cli(fresh, env, "restore", archive, "--yes")
        assert r.returncode == 0, r.stderr
        fresh_id = read_instance_id(DataLayout(fresh).system_db)
        assert fresh_id and fresh_id not in (live_id, other_id)
        # Into another existing installation: it keeps its id; only its sandbox stops.
        r = run_cli(other.data, env, "restore", archive, "--yes")
        assert r.returncode == 0, r.stderr
        assert _instance(other) == other_id
        assert "Stopped 1 sandbox(es)" in r.stdout, r.stdout
        other_box.reload()
        assert other_box.status == "exited"
        # The live installation's sandbox ran through both restores.
        live_box.reload()
        assert live_box.status == "running"
        assert _instance(live) == live_id
        # A restore into its own directory is still its own: its id, its sandboxes.
        r = run_cli(live.data, env, "restore", archive, "--yes")
        assert r.returncode == 0, r.stderr
        assert _instance(live) == live_id
        live_box.reload()
        assert live_box.status == "exited"
    finally:
        for instance in (live_id, other_id, fresh_id):
            if instance:
                remove_instance_containers(client, instance)
        client.close()
