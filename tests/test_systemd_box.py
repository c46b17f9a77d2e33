"""The end-to-end test box itself (tests/systemd_support.py): what the installer tests rely
on. Without a login session, alice's `sudo -n loginctl enable-linger alice` starts her user
manager; an enabled user unit comes back after a reboot; bob, without sudo, cannot enable
linger; a server on the host's loopback is reachable from the box."""

from __future__ import annotations

import functools
import http.server
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from systemd_support import SystemdBox, image_tag, systemd_box_fixture  # noqa: F401

pytestmark = pytest.mark.docker

USER_UNITS = "/home/alice/.config/systemd/user"
WEB_UNIT = """\
[Unit]
Description=e2e box smoke test web server

[Service]
ExecStart=/usr/bin/python3 -m http.server {port} --bind 127.0.0.1 --directory %h/www
Restart=always

[Install]
WantedBy=default.target
"""


def free_port() -> int:
    """A loopback port nobody listens on (the box shares the host's network)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def curl(box: SystemdBox, url: str, *, user: str = "root", seconds: float = 15) -> str:
    """GET `url` from inside the box, retrying while the server comes up."""
    proc = box.exec(
        f"for i in $(seq {int(seconds * 5)}); do curl -fsS {url} && exit 0; sleep 0.2; done; exit 1",
        user=user,
        timeout=seconds + 10,
    )
    return proc.stdout


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def host_server(tmp_path: Path) -> Iterator[str]:
    """A server on the host's 127.0.0.1 (not in the box) serving hello.txt; its base URL."""
    (tmp_path / "hello.txt").write_text("hello from the host\n")
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_image_tag_follows_the_build_script(tmp_path: Path) -> None:
    script = Path(__file__).parent / "e2e" / "build-systemd-image.sh"
    copy = tmp_path / "build.sh"
    copy.write_bytes(script.read_bytes())
    assert image_tag(copy) == image_tag()
    assert image_tag().startswith("skald-e2e-systemd:trixie-")
    copy.write_bytes(script.read_bytes() + b"# changed\n")
    assert image_tag(copy) != image_tag()
    # The script prints the same tag.
    printed = subprocess.run(
        [str(script), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert printed == image_tag()


def test_linger_starts_the_user_manager_and_an_enabled_unit_survives_reboot(
    systemd_box: SystemdBox, tmp_path: Path
) -> None:
    box = systemd_box
    print(f"box booted in {box.boot_seconds:.1f}s")
    # A docker exec has no login session: no runtime directory, no user manager yet.
    assert box.exec("echo ${XDG_RUNTIME_DIR:-unset}", user="alice").stdout.strip() == "unset"
    assert box.exec("systemctl is-active user@1000.service", check=False).returncode != 0

    enabled = box.exec("sudo -n loginctl enable-linger alice", user="alice")
    assert enabled.stderr == ""  # e.g. no "sudo: unable to resolve host"
    assert box.exec("test -e /var/lib/systemd/linger/alice", check=False).returncode == 0
    box.wait_user_manager("alice")
    assert box.exec("systemctl is-active user@1000.service").stdout.strip() == "active"
    assert box.exec("test -S /run/user/1000/bus", check=False).returncode == 0

    # XDG_RUNTIME_DIR alone is enough for `systemctl --user` (its private socket).
    env = box.exec("echo $XDG_RUNTIME_DIR $DBUS_SESSION_BUS_ADDRESS", user="alice").stdout
    assert env.split() == ["/run/user/1000", "unix:path=/run/user/1000/bus"]
    state = box.exec(
        "env -u DBUS_SESSION_BUS_ADDRESS systemctl --user is-system-running", user="alice"
    )
    assert state.stdout.strip() == "running"

    # An enabled user unit, its file copied in as alice (the parents are made as alice).
    port = free_port()
    (tmp_path / "web.service").write_text(WEB_UNIT.format(port=port))
    box.copy_in(tmp_path / "web.service", f"{USER_UNITS}/web.service", owner="alice")
    box.exec("mkdir -p ~/www && echo 'hello from alice' > ~/www/index.html", user="alice")
    box.exec("systemctl --user daemon-reload && systemctl --user enable --now web", user="alice")
    assert curl(box, f"http://127.0.0.1:{port}/") == "hello from alice\n"
    first = box.exec("systemctl --user show -P InvocationID web", user="alice").stdout.strip()

    # Delegation: the user manager owns its cgroup subtree and put the unit in it.
    owner = box.exec("stat -c %U /sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service")
    assert owner.stdout.strip() == "alice"
    cgroup = box.exec("systemctl --user show -P ControlGroup web", user="alice").stdout.strip()
    assert cgroup == "/user.slice/user-1000.slice/user@1000.service/app.slice/web.service"

    box.exec("touch /run/before-reboot")
    began = time.monotonic()
    box.reboot()
    print(f"box rebooted in {time.monotonic() - began:.1f}s")
    assert box.exec("test -e /run/before-reboot", check=False).returncode == 1  # a fresh /run
    # Linger brings the manager (and /run/user/1000) back without anyone logging in.
    box.wait_user_manager("alice")
    # (systemd 256+ lists the user manager itself as a session of class "manager".)
    sessions = box.exec("loginctl list-sessions --no-legend").stdout.splitlines()
    assert [line.split()[5] for line in sessions] == ["manager"]
    assert curl(box, f"http://127.0.0.1:{port}/") == "hello from alice\n"
    after = box.exec("systemctl --user show -P InvocationID web", user="alice").stdout.strip()
    assert after and after != first
    assert box.exec("systemctl --user is-enabled web", user="alice").stdout.strip() == "enabled"


def test_without_sudo_bob_cannot_enable_linger(systemd_box: SystemdBox) -> None:
    box = systemd_box
    refused = box.exec("sudo -n loginctl enable-linger bob", user="bob", check=False)
    assert refused.returncode != 0
    assert "password is required" in refused.stderr
    # Nor without sudo: no polkit in the box (nor on a typical server), so logind says no.
    # Without a user name loginctl means "this session", and a docker exec has none.
    direct = box.exec("loginctl enable-linger bob", user="bob", check=False)
    assert direct.returncode != 0
    assert "Access denied" in direct.stderr
    bare = box.exec("loginctl enable-linger", user="bob", check=False)
    assert bare.returncode != 0
    assert box.exec("test -e /var/lib/systemd/linger/bob", check=False).returncode != 0
    assert box.exec("systemctl is-active user@1001.service", check=False).returncode != 0
    # Whether linger is on, readable without privileges; `loginctl show-user` would fail
    # for a user who is neither logged in nor lingering.
    assert box.exec("ls /var/lib/systemd/linger", user="bob").stdout.strip() == ""


def test_the_box_reaches_a_server_on_the_hosts_loopback(
    systemd_box: SystemdBox, host_server: str
) -> None:
    assert curl(systemd_box, f"{host_server}/hello.txt", user="bob") == "hello from the host\n"


def test_box_helpers(systemd_box: SystemdBox, tmp_path: Path) -> None:
    box = systemd_box
    # A login through su opens a logind session: the runtime directory comes with it.
    login = box.exec(
        "echo $XDG_RUNTIME_DIR; loginctl list-sessions --no-legend", user="bob", login=True
    )
    assert login.stdout.splitlines()[0] == "/run/user/1001"
    assert " bob " in login.stdout
    # Environment, working directory and stdin reach the command; PATH can be overridden.
    proc = box.exec(
        "echo $GREETING $PATH $(pwd) $(cat)",
        user="alice",
        env={"GREETING": "hi there", "PATH": "/usr/bin:/bin"},
        cwd="/tmp",
        input="from stdin",
    )
    assert proc.stdout.split() == ["hi", "there", "/usr/bin:/bin", "/tmp", "from", "stdin"]
    # copy_in reaches mounts made inside the box (systemd's tmpfs on /tmp) and trees.
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tmp_path / "tree" / "sub" / "run.sh").chmod(0o755)
    box.copy_in(tmp_path / "tree", "/tmp/deep/copied")
    assert box.exec("/tmp/deep/copied/sub/run.sh").stdout == "ran\n"
    assert box.exec("stat -c %U /tmp/deep/copied/sub/run.sh").stdout.strip() == "root"
    # A command that outlives its timeout is stopped inside the box, not just abandoned.
    with pytest.raises(subprocess.TimeoutExpired):
        box.exec("sleep 300; echo never", user="alice", timeout=1)
    assert box.exec("pgrep -x sleep", check=False).returncode == 1
    with pytest.raises(subprocess.CalledProcessError, match="exit 3 output"):
        box.exec("echo exit 3 output; exit 3")
