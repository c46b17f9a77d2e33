"""The installer's own check that the service's port is free (`port_owner` in install.sh).

The check runs before the service is (re)started: a port with another program listening
is refused with a message that names `--port`. A port that only has TIME_WAIT leftovers
of the previous server's connections is free: the server binds with SO_REUSEADDR and
starts on it. Without that option the check refused it for a minute after every stop
(a CI run saw "port 44455 is used by another program" when installing again right after
an uninstall).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_SH = Path(__file__).resolve().parent.parent / "install.sh"


def _port_owner(port: int) -> str:
    """Runs install.sh's `port_owner` function alone, with this interpreter as `$PY`."""
    text = INSTALL_SH.read_text()
    found = re.search(r"^port_owner\(\) \{\n.*?^\}\n", text, re.MULTILINE | re.DOTALL)
    assert found, "port_owner() is no longer in install.sh"
    script = f'PY="{sys.executable}"\n{found.group(0)}port_owner {port}\n'
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def test_a_port_another_program_listens_on_is_busy(listener: socket.socket) -> None:
    assert _port_owner(listener.getsockname()[1]) == "busy"


def test_a_port_left_with_only_time_wait_connections_is_free(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    # The server's side closes first, as Skald's does: its end waits in TIME_WAIT.
    accepted.close()
    client.recv(1)
    client.close()
    listener.close()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # the leftover is there: a bare bind still fails
    assert _port_owner(port) == "free"
