"""The whole lifecycle on a real systemd (issue #7, DESIGN.md C10).

A Debian trixie box with systemd as PID 1 plays the household's fresh machine; a release
tree signed with the test key is served from 127.0.0.1 (the box shares the host's
network). As the unprivileged `alice`, with no terminal: `curl | bash` installs, the user
service runs with linger, the admin is created from the printed setup link, logs in and
chats; updates go forward, a broken build rolls back, a tampered one is refused, kill -9
at every update step leaves a working `current`, a reboot brings the service back, and
uninstall keeps the data until --purge.

The tests run in file order on one box (each builds on the state the previous one left).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fake_llm import FakeLLM
from harness import Api, free_port
from release_support import (
    build_pyz,
    make_image,
    make_variant,
    package_and_publish,
    pyz_image_tag,
    remove_image,
    serve_tree,
)
from systemd_support import SystemdBox
from terminal_support import SETUP_ANSWERS, SETUP_PASSWORD, converse

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

HOME = "/home/alice/.local/share/skald"
PASSWORD = SETUP_PASSWORD
# The update steps install.sh names (docs/dev/installer.md), in order.
UPDATE_STEPS = [
    "fetch",
    "verify",
    "selftest",
    "journal",
    "stop",
    "snapshot",
    "switch",
    "start",
    "health",
    "prune",
]


@dataclass
class World:
    box: SystemdBox
    url: str  # base URL of the release tree, as the box sees it
    tree: Path
    base: Path  # the one real build every version is rewritten from
    port: int
    builds: Path
    versions: list[str] = field(default_factory=list)

    def publish(self, version: str, *, broken: bool = False) -> Path:
        pyz = make_variant(self.base, self.builds / version, version, broken=broken)
        package_and_publish([pyz], version, "stable", self.tree)
        self.versions.append(version)
        return self.tree / "releases" / version / pyz.name

    def publish_with_image(self, version: str) -> tuple[Path, str]:
        """VERSION with a runtime image of its own (a stand-in made here, saved into the
        release by ci/package.sh --image); returns the image file and its tag."""
        note = f"e2e {os.getpid()} {version}"
        pyz = make_variant(self.base, self.builds / version, version, image_note=note)
        tag = pyz_image_tag(pyz)
        make_image(tag)
        try:
            package_and_publish([pyz], version, "stable", self.tree, image=tag)
        finally:
            remove_image(tag)
        self.versions.append(version)
        (image,) = (self.tree / "releases" / version).glob("skald-runtime-*.tar.gz")
        return image, tag

    def alice(
        self, cmd: str, *, check: bool = True, timeout: float = 300, **env: str
    ) -> tuple[int, str]:
        proc = self.box.exec(cmd, user="alice", env=env, check=check, timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr

    def install(self, *args: str, check: bool = True) -> tuple[int, str]:
        opts = " ".join(args)
        return self.alice(
            f"curl -fsSL {self.url}/install.sh | SKALD_RELEASES_URL={self.url} "
            f"SKALD_PORT={self.port} bash -s -- {opts}",
            check=check,
        )

    def update(self, *args: str, check: bool = True, **env: str) -> tuple[int, str]:
        return self.alice(f"{HOME}/update.sh {' '.join(args)}", check=check, **env)

    def health(self) -> dict[str, object] | None:
        try:
            r = httpx.get(f"http://127.0.0.1:{self.port}/api/health", timeout=3)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def wait_version(self, version: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            h = self.health()
            if h and h.get("version") == version:
                return
            time.sleep(0.5)
        raise AssertionError(f"no healthy {version} within {timeout} s (last: {self.health()})")

    def current(self) -> str:
        return self.alice(f"readlink {HOME}/current")[1].strip()

    def service(self, verb: str) -> str:
        return self.alice(f"systemctl --user {verb} skald.service", check=False)[1].strip()

    def main_pid(self) -> str:
        return self.alice("systemctl --user show -p MainPID --value skald.service")[1].strip()


def _system_python_313_pyz() -> Path:
    given = os.environ.get("SKALD_TEST_PYZ_313")
    if given:
        return Path(given)
    # Outside CI: cross-build it (about a minute, cached for the session).
    return build_pyz("3.13", "0.0.1", Path(tempfile.mkdtemp(prefix="skald-e2e-base-")))


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    base = _system_python_313_pyz()
    work = Path(tempfile.mkdtemp(prefix="skald-e2e-"))
    tree = work / "tree"
    tree.mkdir()
    url, stop = serve_tree(tree)
    try:
        with SystemdBox() as box:
            yield World(
                box=box, url=url, tree=tree, base=base, port=free_port(), builds=work / "builds"
            )
    finally:
        stop()
        shutil.rmtree(work, ignore_errors=True)


def _login(world: World) -> Api:
    api = Api(f"http://127.0.0.1:{world.port}")
    api.login("alice", PASSWORD)
    return api


def test_curl_bash_installs_a_running_service_with_linger(world: World) -> None:
    world.publish("1.0.0")
    rc, out = world.install()
    assert rc == 0, out
    assert "linger enabled" in out, out
    assert "enabled and running" in out, out
    assert world.service("is-active") == "active"
    assert world.service("is-enabled") == "enabled"
    world.box.exec("test -e /var/lib/systemd/linger/alice")
    assert world.current() == "releases/1.0.0"
    assert (world.health() or {}).get("version") == "1.0.0"
    env = world.alice(f"cat {HOME}/installer.env")[1]
    assert "SKALD_LINGER_BY_INSTALLER=yes" in env
    # Without a terminal the first administrator is made in the browser, from this link.
    link = re.search(r"http://[0-9.]+:(\d+)/#/setup\?token=([A-Za-z0-9_-]+)", out)
    assert link, out
    assert int(link.group(1)) == world.port
    r = httpx.post(
        f"http://127.0.0.1:{world.port}/api/setup",
        json={"token": link.group(2), "username": "alice", "password": PASSWORD},
        timeout=60,
    )
    assert r.status_code == 201, r.text
    # The unit is the documented one.
    unit = world.alice("cat ~/.config/systemd/user/skald.service")[1]
    for line in ("Restart=always", "RestartSec=5", "LimitNOFILE=65536", "SHIV_ROOT="):
        assert line in unit
    assert "docker.service" not in unit


def test_the_admin_logs_in_and_chats(world: World) -> None:
    with FakeLLM() as fake:
        api = _login(world)
        api.add_model(fake.base_url_openai, "box-model")
        fake.script("box-model", ["Hello from inside the box."])
        r = api.post("/api/chat", json={"text": "hi"})
        assert r.status_code == 200, r.text
        assert r.json()["reply"] == "Hello from inside the box."
        api.close()


def test_running_the_installer_again_is_safe(world: World) -> None:
    pid = world.main_pid()
    rc, out = world.install()
    assert rc == 0, out
    assert "already installed" in out
    assert "intact" in out
    assert world.main_pid() == pid, "re-running the installer restarted a healthy service"
    assert "setup?token" not in out  # an administrator exists


def test_doctor_and_status_on_the_installed_box(world: World) -> None:
    rc, out = world.alice(f"{HOME}/bin/skald doctor", check=False)
    assert "Traceback" not in out
    failed = [line.split()[1] for line in out.splitlines() if line.startswith("fail ")]
    assert failed == ["docker"], out  # the box has no Docker; everything else is healthy
    assert "sudo apt-get install docker.io" in out
    assert rc == 1, out
    for check in ("install", "unit", "linger", "port", "registry", "permissions"):
        assert re.search(rf"(?m)^ok\s+{check}\b", out), (check, out)
    rc, out = world.alice(f"{HOME}/bin/skald status", check=False)
    assert rc == 0, out
    assert re.search(r"(?m)^service\s+active, enabled", out), out
    assert re.search(r"(?m)^running\s+1\.0\.0", out), out


def _doctor_json(world: World) -> dict[str, dict[str, object]]:
    _, out = world.alice(f"{HOME}/bin/skald doctor --json", check=False)
    start = out.index("{")
    report = json.loads(out[start : out.index("\n", start)] if "\n" in out[start:] else out[start:])
    return {str(c["name"]): c for c in report["checks"]}


def _run_fix(world: World, check: dict[str, object]) -> None:
    """Run the command part of a printed fix (an explanation may follow in parentheses)."""
    fix = str(check["fix"]).split(" (", 1)[0]
    world.alice(fix)


def test_every_fix_the_doctor_prints_on_the_systemd_box_heals_its_check(world: World) -> None:
    """The systemd shape: each breakage an operator may meet, the doctor's fix run as
    printed, and the check is ok again."""
    # The unit disabled.
    world.alice("systemctl --user disable skald.service")
    checks = _doctor_json(world)
    assert checks["unit"]["status"] == "fail", checks["unit"]
    assert checks["unit"]["fix"] == "systemctl --user enable --now skald"
    _run_fix(world, checks["unit"])
    assert _doctor_json(world)["unit"]["status"] == "ok"
    # Linger turned off (the service keeps running until logout; the doctor warns).
    world.box.exec("loginctl disable-linger alice")
    checks = _doctor_json(world)
    assert checks["linger"]["status"] == "warn", checks["linger"]
    assert checks["linger"]["fix"] == "sudo loginctl enable-linger alice"
    _run_fix(world, checks["linger"])
    world.box.wait_user_manager("alice")
    assert _doctor_json(world)["linger"]["status"] == "ok"
    # The unit file lost: the repair is update.sh --force (this install has a release server).
    world.alice("rm ~/.config/systemd/user/skald.service && systemctl --user daemon-reload")
    checks = _doctor_json(world)
    assert checks["unit"]["status"] == "fail", checks["unit"]
    assert checks["unit"]["fix"] == f"{HOME}/update.sh --force"
    _run_fix(world, checks["unit"])
    world.wait_version("1.0.0")
    checks = _doctor_json(world)
    assert checks["unit"]["status"] == "ok", checks["unit"]
    # Nothing on this shape says "not applicable".
    for name in ("install", "unit", "linger", "port", "services"):
        assert checks[name]["status"] == "ok", (name, checks[name])


def test_update_to_a_newer_build_keeps_data_and_heals_the_service(world: World) -> None:
    world.publish("1.1.0")
    # An operator's drop-in, a damaged unit and lost linger (which stops the service).
    unit = "~/.config/systemd/user/skald.service"
    world.alice(
        f"mkdir -p {unit}.d && printf '[Service]\\nEnvironment=E2E_MARK=kept\\n' "
        f">{unit}.d/override.conf && sed -i /LimitNOFILE/d {unit}"
    )
    world.box.exec("loginctl disable-linger alice && sleep 1")
    # An agent the operator added in the data directory (issue 31) is data: kept.
    meta = json.dumps(
        {"id": "recipes", "name": "Recipe finder", "type": "task",
         "description": "Finds recipes.", "about": {"it": "Ti trova una ricetta"}}
    )  # fmt: skip
    world.alice(
        f"mkdir -p {HOME}/data/agents/recipes && printf '%s' {shlex.quote(meta)} "
        f">{HOME}/data/agents/recipes/meta.json && printf '# Recipes\\n' "
        f">{HOME}/data/agents/recipes/AGENT.md"
    )
    assert world.health() is None
    rc, out = world.update()
    assert rc == 0, out
    world.box.exec("test -e /var/lib/systemd/linger/alice")
    assert "LimitNOFILE=65536" in world.alice(f"cat {unit}")[1]
    env = world.alice("systemctl --user show -p Environment --value skald.service")[1]
    assert "E2E_MARK=kept" in env
    assert "updated from 1.0.0 to 1.1.0" in out
    world.wait_version("1.1.0", timeout=5)
    assert world.current() == "releases/1.1.0"
    snaps = world.alice(f"ls {HOME}/data/backups")[1].split()
    assert any(s.startswith("pre-update-1.0.0-to-1.1.0-") for s in snaps), snaps
    api = _login(world)  # the account made on 1.0.0 still opens
    agents = {a["id"]: a for a in api.get("/api/agents").json()}
    api.close()
    assert agents["recipes"]["about"] == {"it": "Ti trova una ricetta"}, agents
    rc, out = world.update()
    assert rc == 0 and "up to date" in out, out


def test_the_installer_on_an_older_install_updates_it(world: World) -> None:
    world.publish("1.1.1")
    rc, out = world.install()
    assert rc == 0, out
    assert "updating" in out and "updated from 1.1.0 to 1.1.1" in out, out
    world.wait_version("1.1.1", timeout=5)


def test_update_to_a_broken_build_rolls_back(world: World) -> None:
    before = world.current().split("/")[1]
    world.publish("1.2.0", broken=True)
    rc, out = world.update(check=False)
    assert rc != 0, out
    assert f"Rolled back to {before}" in out, out
    assert "failed-update-" in world.alice(f"ls {HOME}/data/backups")[1]
    assert world.current() == f"releases/{before}"
    world.wait_version(before, timeout=30)
    assert world.service("is-active") == "active"
    api = _login(world)
    api.close()


def test_a_tampered_build_is_refused_and_nothing_changes(world: World) -> None:
    before = world.current()
    pyz = world.publish("1.3.0")
    data = bytearray(pyz.read_bytes())
    data[len(data) // 2] ^= 0x01
    pyz.write_bytes(bytes(data))
    pid = world.main_pid()
    rc, out = world.update(check=False)
    assert rc != 0
    assert "corrupted or was altered" in out, out
    assert world.current() == before
    assert world.main_pid() == pid
    # A fresh install of the same tree refuses it too, and leaves nothing behind.
    proc = world.box.exec(
        f"curl -fsSL {world.url}/install.sh | SKALD_RELEASES_URL={world.url} bash",
        user="bob",
        check=False,
    )
    assert proc.returncode != 0
    assert "corrupted or was altered" in proc.stderr, proc.stderr
    world.box.exec("test ! -e /home/bob/.local/share/skald/current", user="bob")


# The box has no Docker: a stand-in `docker` that does what install.sh asks of it, for
# real where it matters (it reads the saved image's manifest.json for its tags, so only a
# real `docker save` loads), and keeps the "loaded" tags and every call in ~/.fake-docker.
FAKE_DOCKER = r"""#!/bin/sh
state=$HOME/.fake-docker
mkdir -p "$state"
echo "$*" >>"$state/calls"
case "$1" in
    info) exit 0 ;;
    image) [ "$2" = inspect ] && grep -qxF "$3" "$state/tags" 2>/dev/null ;;
    load)
        [ "$2" = -i ] || exit 2
        tags=$(gzip -dc "$3" | tar -xOf - manifest.json | python3 -c '
import json, sys
print("\n".join(t for e in json.load(sys.stdin) for t in e.get("RepoTags") or []))') || exit 1
        [ -n "$tags" ] || exit 1
        printf '%s\n' "$tags" >>"$state/tags"
        printf 'Loaded image: %s\n' $tags
        ;;
    *) echo "fake docker: $*" >&2; exit 1 ;;
esac
"""
FAKE_PATH = "/opt/fake-docker:/usr/local/bin:/usr/bin:/bin"


def test_the_release_image_is_verified_before_docker_load_and_a_tampered_one_refused(
    world: World,
) -> None:
    """A release that carries the runtime image, installed by bob (a second account, with
    Docker as far as the installer can tell): a tampered image is refused before anything
    is loaded or installed; the intact one is loaded, and no image build runs."""
    world.box.exec(
        "mkdir -p /opt/fake-docker && cat >/opt/fake-docker/docker "
        "&& chmod 755 /opt/fake-docker/docker",
        input=FAKE_DOCKER,
    )
    image, tag = world.publish_with_image("1.3.1")
    good = image.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0x01
    image.write_bytes(bytes(data))
    install = f"curl -fsSL {world.url}/install.sh | SKALD_RELEASES_URL={world.url} bash"
    bob_home = "/home/bob/.local/share/skald"
    proc = world.box.exec(install, user="bob", check=False, env={"PATH": FAKE_PATH})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{image.name} is corrupted or was altered" in proc.stderr, proc.stderr
    calls = world.box.exec("cat ~/.fake-docker/calls", user="bob").stdout
    assert "load" not in calls, calls  # refused before docker load
    world.box.exec(
        f"test ! -e {bob_home}/current && test ! -e {bob_home}/releases/1.3.1", user="bob"
    )
    world.box.exec(f"! ls {bob_home}/staging/skald-runtime-* 2>/dev/null", user="bob")

    image.write_bytes(good)
    proc = world.box.exec(install, user="bob", check=False, env={"PATH": FAKE_PATH})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"verified {image.name} (sha256 and signature)" in out, out
    assert f"loaded {tag} from the release" in out, out
    assert "the sandbox image (5 to 15 minutes" not in out, out  # not built
    loaded = world.box.exec("cat ~/.fake-docker/tags", user="bob").stdout.split()
    assert loaded == [tag], loaded
    world.box.exec(f"test -e {bob_home}/current", user="bob")
    world.box.exec(f"{bob_home}/uninstall.sh --purge --yes", user="bob", env={"PATH": FAKE_PATH})
    world.box.exec("rm -rf ~/.fake-docker", user="bob")


def test_kill_9_at_every_update_step_leaves_a_working_current(world: World) -> None:
    versions = iter(f"1.4.{n}" for n in range(len(UPDATE_STEPS) + 1))
    target = next(versions)
    world.publish(target)
    for step in UPDATE_STEPS:
        before = world.current().split("/")[1]
        if before == target:  # the last kill came late enough that recovery finished it
            target = next(versions)
            world.publish(target)
        rc, out = world.update(check=False, SKALD_TEST_KILL_AT=step)
        assert rc == 137, f"{step}: expected the SIGKILL (exit 137), got {rc}\n{out}"
        current = world.current().split("/")[1]
        assert current in (before, target), (step, current)
        rc, ver = world.alice(f"{HOME}/bin/skald version", check=False)
        assert rc == 0 and ver.strip() == f"skald {current}", (step, ver)
    # One plain run heals whatever the last kill left.
    rc, out = world.update()
    assert rc == 0, out
    world.wait_version(target, timeout=10)
    assert world.service("is-active") == "active"
    world.box.exec(f"test ! -e {HOME}/.update-journal")


def test_a_reboot_brings_the_service_back(world: World) -> None:
    version = world.current().split("/")[1]
    world.box.reboot()
    world.wait_version(version, timeout=90)
    world.box.wait_user_manager("alice")
    assert world.service("is-active") == "active"


def test_uninstall_keeps_data_then_purge_removes_it(world: World) -> None:
    rc, out = world.alice(f"{HOME}/uninstall.sh")
    assert rc == 0, out
    assert "Kept" in out
    assert world.health() is None
    world.alice("test ! -e ~/.config/systemd/user/skald.service")
    world.alice(f"test ! -e {HOME}/releases && test ! -e {HOME}/current && test ! -e {HOME}/bin")
    world.alice(f"test -f {HOME}/data/database/system.db")
    world.box.exec("test ! -e /var/lib/systemd/linger/alice")  # the installer had enabled it
    # Installing again over the kept data: the household is still there.
    rc, out = world.install()
    assert rc == 0, out
    assert "setup?token" not in out
    api = _login(world)
    api.close()
    rc, out = world.alice(f"{HOME}/uninstall.sh --purge --yes")
    assert rc == 0, out
    world.alice(f"test ! -e {HOME}")
    assert world.health() is None


def test_install_at_a_terminal_creates_the_administrator(world: World) -> None:
    port = free_port()
    with SystemdBox() as box:
        command = (
            f"curl -fsSL {world.url}/install.sh | SKALD_RELEASES_URL={world.url} "
            f"SKALD_PORT={port} bash"
        )
        argv = ["docker", "exec", "-it", "-u", "alice", "-e", "HOME=/home/alice"]
        argv += ["-e", "USER=alice", box.name, "bash", "-lc", command]
        rc, seen = converse(
            argv,
            [("docker.io package now", "n"), *SETUP_ANSWERS],
            timeout=300,
        )
        assert rc == 0, seen
        assert "Recovery code for mum" in seen, seen
        assert "setup?token" not in seen  # made at the terminal, no link needed
        r = httpx.post(
            f"http://127.0.0.1:{port}/api/auth/login",
            json={"username": "mum", "password": PASSWORD},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        assert r.json()["role"] == "admin"
