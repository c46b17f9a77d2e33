"""The runtime image carries the tools members' assistants reach for (issue 31): each
answers its version, the time zones are there, and every shared library a headless
Chromium needs resolves (no browser is shipped; one a package brings then starts)."""

from __future__ import annotations

from typing import Any

import pytest
from sandbox_support import docker_fixture  # noqa: F401

from skald.sandbox.image import image_tag

pytestmark = pytest.mark.docker

# (tool, the command that shows its version, a word the answer contains)
TOOLS = [
    ("zip", "zip -v", "Zip"),
    ("unzip", "unzip -v", "UnZip"),
    ("sqlite3", "sqlite3 --version", "3."),
    ("wget", "wget --version", "GNU Wget"),
    ("ssh", "ssh -V", "OpenSSH"),
    ("dig", "dig -v", "DiG"),
    ("ping", "ping -V", "iputils"),
    ("tzdata", "TZ=Europe/Rome date -d @0 +%Z", "CET"),
]
CHROMIUM_LIBS = [
    "libnss3.so", "libnspr4.so", "libatk-1.0.so.0", "libatk-bridge-2.0.so.0",
    "libatspi.so.0", "libcups.so.2", "libdrm.so.2", "libgbm.so.1", "libxkbcommon.so.0",
    "libXcomposite.so.1", "libXdamage.so.1", "libXfixes.so.3", "libXrandr.so.2",
    "libXext.so.6", "libX11.so.6", "libxcb.so.1", "libpango-1.0.so.0", "libcairo.so.2",
    "libasound.so.2", "libdbus-1.so.3", "libglib-2.0.so.0",
]  # fmt: skip


def _sh(docker: Any, script: str) -> str:
    out = docker.containers.run(
        image_tag(), ["bash", "-c", script], remove=True, network_mode="none"
    )
    return str(out.decode("utf-8", "replace"))


@pytest.mark.parametrize(("tool", "command", "word"), TOOLS, ids=[t[0] for t in TOOLS])
def test_the_runtime_image_has_the_tool(docker: Any, tool: str, command: str, word: str) -> None:
    answer = _sh(docker, f"{command} 2>&1")
    assert word in answer, (tool, answer)


def test_every_library_a_headless_chromium_needs_is_in_the_runtime_image(docker: Any) -> None:
    found = _sh(docker, "ldconfig -p")
    missing = [lib for lib in CHROMIUM_LIBS if f"{lib} " not in found]
    assert not missing, missing
