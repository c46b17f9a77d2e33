"""The end-to-end test box: a Debian trixie container with systemd as PID 1, users
`alice` (uid 1000, passwordless sudo) and `bob` (uid 1001, no sudo), on the host's network.

The image is built by tests/e2e/build-systemd-image.sh (ci/test.sh runs it in the prepare
step); tests never build it: `ensure_image()` fails under CI and skips elsewhere when it is
missing. docs/dev/installer.md, "End-to-end test box", explains the docker run flags and
the traps (what a `docker exec` without a login session can and cannot do).

    with SystemdBox() as box:
        box.exec("sudo -n loginctl enable-linger alice", user="alice")
        box.wait_user_manager("alice")
        box.exec("systemctl --user enable --now web.service", user="alice")
        box.reboot()

Every box is a container named `skald-e2e-<random>` labelled with the process that made
it; `sweep_leftovers()` (run by each new box) removes the boxes of processes that are gone,
so a killed test run leaves nothing behind for long and a concurrent run is never touched.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest
from prerequisites import unavailable

BUILD_SCRIPT = Path(__file__).resolve().parent / "e2e" / "build-systemd-image.sh"
IMAGE_REPOSITORY = "skald-e2e-systemd"
SUITE = "trixie"
NAME_PREFIX = "skald-e2e-"
# Value: "<pid>:<start time>" of the process that made the box (see sweep_leftovers).
OWNER_LABEL = "skald.e2e.owner"
HOSTNAME = "skald-e2e"

# What makes systemd boot in a container here without --privileged (the documentation
# explains each one). The image's PID 1 (skald-e2e-init) mounts a fresh cgroup2 at
# /sys/fs/cgroup, which needs both SYS_ADMIN and a private cgroup namespace.
RUN_FLAGS: tuple[str, ...] = (
    "--cap-add",
    "SYS_ADMIN",
    "--cgroupns=private",
    "--tmpfs",
    "/run:exec,mode=755",
    "--tmpfs",
    "/run/lock",
    "--network",
    "host",
    "--hostname",
    HOSTNAME,
    # Host networking gives the box the host's /etc/hosts, where this name is missing and
    # sudo then warns on every call ("unable to resolve host"); with this, Docker writes one.
    "--add-host",
    f"{HOSTNAME}:127.0.1.1",
    # systemd ignores SIGTERM as PID 1; this is its "halt" signal. `docker import` cannot
    # set STOPSIGNAL, so it is given here (without it `docker restart` waits, then kills).
    "--stop-signal",
    "SIGRTMIN+3",
    # A terminal makes systemd print its boot messages, which `docker logs` then shows.
    "--tty",
)

# `timeout` inside the box exits with these when it had to stop the command.
_TIMED_OUT = (124, 137)


class BoxError(Exception):
    """The box did not start, boot or answer; the message carries what it said."""


class BoxCommandError(subprocess.CalledProcessError):
    """A command in the box exited non-zero; str() includes its output."""

    def __str__(self) -> str:
        return (
            f"{super().__str__()}\n--- stdout ---\n{_tail(self.stdout)}"
            f"\n--- stderr ---\n{_tail(self.stderr)}"
        )


def _tail(text: str | bytes | None, lines: int = 40) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def image_tag(script: Path = BUILD_SCRIPT) -> str:
    """`skald-e2e-systemd:trixie-<first 12 hex of sha256(build script)>`, the tag the build
    script gives by default."""
    digest = hashlib.sha256(script.read_bytes()).hexdigest()[:12]
    return f"{IMAGE_REPOSITORY}:{SUITE}-{digest}"


def _docker(
    *args: str, timeout: float = 60, input: str | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args],
        input=input,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=check,
    )


def docker_problem() -> str | None:
    """Why Docker cannot be used here, or None when it answers."""
    try:
        proc = _docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except FileNotFoundError:
        return "the docker command is not installed"
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if proc.returncode != 0:
        return f"`docker info` failed: {proc.stderr.strip()}"
    return None


def has_image(tag: str) -> bool:
    return _docker("image", "inspect", tag).returncode == 0


def ensure_image() -> str:
    """The box image's tag; fails (under SKALD_CI) or skips when Docker or the image is
    missing. Tests never build it: ci/test.sh does, in its prepare step."""
    problem = docker_problem()
    if problem:
        unavailable(f"Docker is required: {problem}")
    tag = image_tag()
    if not has_image(tag):
        unavailable(
            f"the e2e systemd image {tag} is not built "
            f"(run {BUILD_SCRIPT.relative_to(BUILD_SCRIPT.parents[2])} as root)"
        )
    return tag


def _process_start(pid: int) -> str | None:
    """The start time (clock ticks since boot) of a live process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces and parentheses.
    return stat.rsplit(")", 1)[1].split()[19]


def _owner() -> str:
    pid = os.getpid()
    return f"{pid}:{_process_start(pid)}"


def _owner_alive(owner: str) -> bool:
    pid, _, start = owner.partition(":")
    if not pid.isdigit():
        return False
    return _process_start(int(pid)) == start


def sweep_leftovers() -> list[str]:
    """Remove the boxes whose making process is gone (a killed test run). Returns their
    names. Boxes of live processes, including other test runs, are left alone."""
    proc = _docker(
        "ps",
        "--all",
        "--filter",
        f"label={OWNER_LABEL}",
        "--format",
        f'{{{{.Names}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}',
    )
    removed = []
    for line in proc.stdout.splitlines():
        name, _, owner = line.partition("\t")
        if name.startswith(NAME_PREFIX) and not _owner_alive(owner):
            _docker("rm", "--force", "--volumes", name)
            removed.append(name)
    return removed


class SystemdBox:
    """A booted systemd container; a context manager that always removes it.

    On leaving with an exception the box's diagnostics (failed units, journal tail) are
    printed first, so a failing test shows what the box saw.
    """

    def __init__(
        self,
        image: str | None = None,
        *,
        boot_timeout: float = 60,
        extra_run_args: Sequence[str] = (),
    ) -> None:
        self.image = image or ensure_image()
        self.name = NAME_PREFIX + secrets.token_hex(6)
        self.boot_timeout = boot_timeout
        self.extra_run_args = tuple(extra_run_args)
        # Seconds from `docker run`/`docker restart` to systemd answering running|degraded.
        self.boot_seconds: float | None = None
        self._accounts: dict[str, tuple[int, str]] = {}
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> SystemdBox:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is not None and self._started:
                print(self.diagnostics())
        finally:
            self.remove()

    def start(self) -> None:
        sweep_leftovers()
        began = time.monotonic()
        proc = _docker(
            "run",
            "--detach",
            "--name",
            self.name,
            "--label",
            f"{OWNER_LABEL}={_owner()}",
            *RUN_FLAGS,
            *self.extra_run_args,
            self.image,
        )
        if proc.returncode != 0:
            raise BoxError(f"docker run {self.image} failed: {proc.stderr.strip()}")
        self._started = True
        try:
            self.wait_until_running()
        except BaseException:
            print(self.diagnostics())
            self.remove()
            raise
        self.boot_seconds = time.monotonic() - began

    def remove(self) -> None:
        if self._started:
            _docker("rm", "--force", "--volumes", self.name)
            self._started = False

    def reboot(self) -> None:
        """`docker restart`: systemd shuts down cleanly (SIGRTMIN+3), /run starts empty,
        then wait for the new boot like `start` does."""
        began = time.monotonic()
        proc = _docker("restart", "--time", "60", self.name, timeout=120)
        if proc.returncode != 0:
            raise BoxError(f"docker restart {self.name} failed: {proc.stderr.strip()}")
        self.wait_until_running()
        self.boot_seconds = time.monotonic() - began

    def is_running(self) -> bool:
        proc = _docker("inspect", "--format", "{{.State.Running}}", self.name)
        return proc.stdout.strip() == "true"

    def wait_until_running(self, timeout: float | None = None) -> str:
        """Wait until `systemctl is-system-running` says running or degraded (returned).
        Degraded boots print the failed units. Raises BoxError naming the state, the
        failed units and the queued jobs when the time runs out."""
        deadline = time.monotonic() + (self.boot_timeout if timeout is None else timeout)
        state = ""
        while True:
            if not self.is_running():
                raise BoxError(
                    f"the box {self.name} stopped while booting\n--- docker logs ---\n"
                    f"{_tail(self.logs())}"
                )
            proc = _docker("exec", self.name, "systemctl", "is-system-running", timeout=30)
            state = proc.stdout.strip() or proc.stderr.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                jobs = self.exec("systemctl list-jobs --no-pager", check=False).stdout
                raise BoxError(
                    f"systemd in {self.name} is {state!r} after the wait; "
                    f"failed units: {self.failed_units()}\n--- jobs ---\n{_tail(jobs)}"
                )
            time.sleep(0.2)
        if state == "degraded":
            print(f"{self.name} booted degraded; failed units: {self.failed_units()}")
        return state

    # -- commands ---------------------------------------------------------------------------

    def account(self, user: str) -> tuple[int, str]:
        """(uid, home) of a user in the box."""
        if user not in self._accounts:
            proc = _docker("exec", self.name, "getent", "passwd", user)
            fields = proc.stdout.strip().split(":")
            if proc.returncode != 0 or len(fields) < 7:
                raise BoxError(f"no user {user!r} in the box")
            self._accounts[user] = (int(fields[2]), fields[5])
        return self._accounts[user]

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        user: str = "root",
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float | None = 120,
        login: bool = False,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `cmd` (a shell string, or an argv that is quoted into one) through `bash -lc`
        as `user`, capturing text output.

        Without `login`, it is a `docker exec -u USER` with HOME, USER and LOGNAME set: no
        PAM session (like cron or a service), so XDG_RUNTIME_DIR and
        DBUS_SESSION_BUS_ADDRESS are set only when /run/user/<uid> (and its bus) exist, the
        way pam_systemd would. With `login=True` it goes through `su -l USER` from root,
        which opens a real logind session (class "background", as over ssh without a tty)
        and so starts the user's manager even without linger.

        `env` is exported after the login scripts ran (so PATH can be overridden). The
        command is killed inside the box after `timeout` seconds (subprocess.TimeoutExpired
        is raised); a non-zero exit raises BoxCommandError when `check`.
        """
        __tracebackhide__ = True  # a failing command shows the test's line, not this one
        script = cmd if isinstance(cmd, str) else shlex.join(cmd)
        lines = [f"export {key}={shlex.quote(value)}" for key, value in (env or {}).items()]
        lines += [
            'if [ -z "${XDG_RUNTIME_DIR:-}" ] && [ -d "/run/user/$(id -u)" ]; then',
            '  export XDG_RUNTIME_DIR="/run/user/$(id -u)"; fi',
            'if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ] && [ -S "${XDG_RUNTIME_DIR:-/nonexistent}/bus" ]; then',
            '  export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"; fi',
        ]
        if cwd is not None:
            lines.append(f"cd -- {shlex.quote(cwd)}")
        lines.append(script)
        body = "\n".join(lines)

        argv = ["exec"]
        if input is not None:
            argv.append("--interactive")
        if login:
            argv.append(self.name)
            argv += _timeout_prefix(timeout)
            argv += ["su", "--login", user, "--shell", "/bin/bash", "--command", body]
        else:
            _uid, home = self.account(user)
            argv += ["--user", user, "--env", f"HOME={home}"]
            argv += ["--env", f"USER={user}", "--env", f"LOGNAME={user}", self.name]
            argv += _timeout_prefix(timeout)
            argv += ["bash", "-lc", body]
        # The outer limit only guards against a hung docker CLI; `timeout` in the box
        # is what stops the command (killing the CLI would leave it running there).
        began = time.monotonic()
        proc = _docker(*argv, input=input, timeout=24 * 3600 if timeout is None else timeout + 30)
        # 124/137 are also what a command killed by SIGKILL (or exiting 124) returns: only
        # a run that lasted the whole limit timed out.
        if (
            timeout is not None
            and proc.returncode in _TIMED_OUT
            and time.monotonic() - began >= timeout
        ):
            raise subprocess.TimeoutExpired(script, timeout, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise BoxCommandError(proc.returncode, script, proc.stdout, proc.stderr)
        return proc

    def wait_user_manager(self, user: str, timeout: float = 30) -> str:
        """Wait until `user`'s systemd manager runs and answers `systemctl --user`
        (running or degraded, returned), e.g. after `loginctl enable-linger`."""
        uid, _home = self.account(user)
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            proc = self.exec(
                f"test -S /run/user/{uid}/bus && systemctl --user is-system-running",
                user=user,
                check=False,
                timeout=20,
            )
            state = proc.stdout.strip() or proc.stderr.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.2)
        status = self.exec(f"systemctl status user@{uid}.service --no-pager", check=False)
        raise BoxError(
            f"the user manager of {user} did not come up (last answer: {state!r})\n"
            f"{_tail(status.stdout)}"
        )

    def copy_in(self, host_path: Path | str, box_path: str, *, owner: str | None = None) -> None:
        """Copy a file or directory tree from the host to `box_path` (its new name in the
        box; missing parents are made). Extracted by `tar` run as `owner` (default root),
        so the files are owner's and the owner needs write access to the parent.

        A tar stream through `docker exec` rather than `docker cp`: `docker cp` cannot
        see mounts made inside the box (systemd's tmpfs on /tmp, /run/user/<uid>)."""
        source = Path(host_path)
        if not source.exists():
            raise FileNotFoundError(source)
        target = box_path.rstrip("/")
        parent, _, leaf = target.rpartition("/")
        if not leaf or not target.startswith("/"):
            raise ValueError(f"copy_in needs an absolute path that names the copy: {box_path!r}")
        with tempfile.TemporaryFile() as buffer:
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                archive.add(source, arcname=leaf, filter=_plain_member)
            buffer.seek(0)
            proc = subprocess.run(
                [
                    "docker",
                    "exec",
                    "--interactive",
                    "--user",
                    owner or "root",
                    self.name,
                    "sh",
                    "-c",
                    'mkdir -p -- "$1" && exec tar -x --no-same-owner -C "$1"',
                    "sh",
                    parent or "/",
                ],
                stdin=buffer,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=300,
            )
        if proc.returncode != 0:
            raise BoxError(f"copying {source} to {box_path} failed: {proc.stderr.strip()}")

    # -- what the box saw -----------------------------------------------------------------

    def logs(self) -> str:
        """PID 1's console (systemd's boot messages) as `docker logs` has it."""
        proc = _docker("logs", self.name)
        return proc.stdout + proc.stderr

    def journal(
        self,
        user_unit: str | None = None,
        *,
        user: str = "alice",
        unit: str | None = None,
        lines: int = 200,
    ) -> str:
        """The journal's tail: of a user unit (read as `user`: as root `--user-unit`
        matches root's own units only), of a system unit, or of everything."""
        if user_unit is not None:
            cmd = f"journalctl --user --unit {shlex.quote(user_unit)}"
            as_user = user
        elif unit is not None:
            cmd = f"journalctl --unit {shlex.quote(unit)}"
            as_user = "root"
        else:
            cmd = "journalctl"
            as_user = "root"
        proc = self.exec(
            f"{cmd} --no-pager --quiet --lines {lines}", user=as_user, check=False, timeout=60
        )
        return proc.stdout + proc.stderr

    def failed_units(self) -> list[str]:
        proc = self.exec(
            "systemctl list-units --failed --no-legend --plain --no-pager",
            check=False,
            timeout=30,
        )
        return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]

    def diagnostics(self) -> str:
        """What to print when a test fails: failed units and the journal's tail."""
        if not self.is_running():
            return f"=== {self.name} is not running; docker logs:\n{_tail(self.logs(), 80)}"
        return (
            f"=== {self.name}: failed units {self.failed_units()}\n"
            f"=== journal (last 80 lines)\n{self.journal(lines=80)}"
        )


def _timeout_prefix(timeout: float | None) -> list[str]:
    if timeout is None:
        return []
    return ["timeout", "--kill-after=10", f"{timeout:g}"]


def _plain_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


# Registered under its short name; test modules import `systemd_box_fixture`.
@pytest.fixture(name="systemd_box")
def systemd_box_fixture(request: pytest.FixtureRequest) -> Iterator[SystemdBox]:
    """A booted box for one test, removed afterwards. When the test failed, the box's
    diagnostics are printed first (pytest shows them as the teardown's output)."""
    failed_before = request.session.testsfailed
    with SystemdBox() as box:
        yield box
        if request.session.testsfailed > failed_before:
            print(box.diagnostics())
