"""`skald image build` from the command line, and a missing image reported as such (the
image itself is built once by ci/test.sh, so here every step comes from the cache)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_ENV
from sandbox_support import docker_fixture, wait_for  # noqa: F401

from skald.cli import main
from skald.config import load_config
from skald.core.runtime import Runtime
from skald.paths import DataLayout
from skald.sandbox.image import image_tag

pytestmark = pytest.mark.docker


def _cli(tmp_path: Path, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    environ = {"HOME": str(tmp_path), **{k: v for k, v in os.environ.items() if k == "DOCKER_HOST"}}
    code = main(["--data", str(tmp_path / "data"), *argv], environ=environ, stdout=out)
    return code, out.getvalue()


def test_image_build_prints_progress_and_the_tag(tmp_path: Path, docker: Any) -> None:
    code, out = _cli(tmp_path, "image", "build")
    assert code == 0, out
    tag = image_tag()
    assert out.startswith(f"Building {tag} from ")
    assert "Step 1/" in out and out.rstrip().endswith(f"Built {tag}")
    assert not (tmp_path / "data").exists()  # building needs no data directory


async def test_missing_image_is_a_degraded_reason(tmp_path: Path, docker: Any) -> None:
    layout = DataLayout(tmp_path / "data")
    env = {**TEST_ENV, "SKALD_SANDBOX_ENABLED": "true", "SKALD_SANDBOX_IMAGE": "skald-x:none"}
    rt = await Runtime.boot(layout, load_config(layout.root, env), announce=io.StringIO())
    try:
        assert rt.sandbox is not None

        async def missing() -> bool:
            return rt.docker_state == "image_missing"

        await wait_for(missing, 15)
        status, reasons = rt.health()
        assert status == "degraded"
        assert reasons == ["sandbox image skald-x:none is missing: run `skald image build`"]
    finally:
        await rt.shutdown()
