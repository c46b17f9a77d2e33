"""`skald doctor`: a healthy fake installation passes; every broken part fails with a fix
command (and, where the fix is a command we can run here, running it heals the check)."""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import ADMIN, ADMIN_PW, ServerProcess, free_port, household

from skald.cli import main
from skald.config import Config
from skald.features.backups.archive import utc_stamp
from skald.ops import checks_base, checks_host, doctor
from skald.ops import install_root as ir
from skald.paths import DataLayout

VERSION = "0.1.0"


def _path_without_skald() -> str:
    """This machine's PATH less any folder holding a `skald` (a developer's venv): the
    fixes the doctor prints name the install's own wrapper, as on a household's machine."""
    folders = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not (Path(f) / "skald").exists())


class Install:
    """A fake install root as install.sh lays it out, with its data directory set up."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.root = tmp / "skald"
        self.data = self.root / "data"
        release = self.root / "releases" / VERSION
        release.mkdir(parents=True)
        (release / f"skald-{VERSION}-linux-x86_64-cp311.pyz").write_bytes(b"PK")
        (release / "skald.pyz").symlink_to(f"skald-{VERSION}-linux-x86_64-cp311.pyz")
        (self.root / "current").symlink_to(f"releases/{VERSION}")
        self.bin = self.root / "bin" / "skald"  # the wrapper install.sh writes
        self.bin.parent.mkdir()
        self.bin.write_text("#!/bin/sh\nexit 0\n")
        self.bin.chmod(0o755)
        update = self.root / "update.sh"
        update.write_text("#!/bin/sh\nexit 0\n")
        update.chmod(0o755)
        (self.root / "installer.env").write_text(
            "SKALD_RELEASES_URL=http://127.0.0.1:1/rel\nSKALD_CHANNEL=stable\n"
            "SKALD_PYTHON=/usr/bin/python3\nSKALD_LINGER_BY_INSTALLER=no\n"
        )
        self.config_home = tmp / "config"
        self.unit = self.config_home / "systemd" / "user" / "skald.service"
        self.unit.parent.mkdir(parents=True)
        self.unit.write_text(
            "[Unit]\nDescription=Skald\n\n[Service]\nExecStart=/bin/true\n\n"
            "[Install]\nWantedBy=default.target\n"
        )
        wants = self.unit.parent / "default.target.wants"
        wants.mkdir()
        (wants / "skald.service").symlink_to(self.unit)
        self.linger = tmp / "linger"
        self.linger.mkdir()
        (self.linger / ir.current_user({})).touch()
        monkeypatch.setattr(ir, "LINGER_DIR", self.linger)
        # The service shape: systemd is the init (its runtime directory exists).
        (tmp / "run-systemd").mkdir()
        monkeypatch.setattr(checks_base, "SYSTEMD_RUN_DIR", tmp / "run-systemd")
        self.port = free_port()
        self.environ = {
            "HOME": str(tmp),
            "PATH": _path_without_skald(),
            "SKALD_HOME": str(self.root),
            "XDG_CONFIG_HOME": str(self.config_home),
            "SKALD_SECURITY_KDF_PROFILE": "test",
            "SKALD_SANDBOX_ENABLED": "false",
            "SKALD_SERVER_PORT": str(self.port),
            # No user manager: the unit is judged by its files (XDG_RUNTIME_DIR is unset).
        }
        code = main(
            ["setup", "--admin", ADMIN, "--password-stdin"],
            environ=self.environ,
            stdin=io.StringIO(ADMIN_PW + "\n"),
            stdout=io.StringIO(),
        )
        assert code == 0
        # A healthy household has a recent backup (the check reads names and times).
        backups = self.data / "backups"
        backups.mkdir(mode=0o700, exist_ok=True)
        backup = backups / f"skald-backup-{utc_stamp()}.tar"  # one name: a second may pass
        backup.write_bytes(b"")
        backup.chmod(0o600)

    def doctor(self, *extra: str, **env: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
        """Exit code, the JSON report, and its checks by name."""
        out = io.StringIO()
        code = main(["doctor", "--json", *extra], environ={**self.environ, **env}, stdout=out)
        report = json.loads(out.getvalue())
        return code, report, {c["name"]: c for c in report["checks"]}


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Install:
    return Install(tmp_path, monkeypatch)


def _assert_fail(check: dict[str, Any], *words: str) -> None:
    assert check["status"] == "fail", check
    assert check["fix"], check
    for word in words:
        assert word in check["fix"] or word in check["finding"], (word, check)


def test_healthy_install_passes(install: Install) -> None:
    code, report, checks = install.doctor()
    assert code == 0, report
    assert report["ok"] is True and report["failures"] == 0 and report["warnings"] == 0
    expected = {
        "python": "ok",
        "config": "ok",
        "install": "ok",
        "data": "ok",
        "registry": "ok",
        "databases": "ok",
        "permissions": "ok",
        "homes": "ok",
        "disk": "ok",
        "docker": "skip",  # sandbox disabled in this test
        "image": "skip",
        "sandbox network": "skip",
        "sandbox trust": "skip",
        "host listeners": "skip",
        "unit": "ok",
        "linger": "ok",
        "port": "ok",
        "services": "skip",  # no server running
        "backups": "ok",
    }
    assert [(name, c["status"]) for name, c in checks.items()] == list(expected.items())
    assert f"current -> releases/{VERSION}" in checks["install"]["finding"]
    assert all(c["fix"] is None for c in checks.values() if c["status"] == "ok")


def test_text_output_names_each_fix(install: Install) -> None:
    (install.linger / ir.current_user({})).unlink()
    install.unit.unlink()
    out = io.StringIO()
    code = main(["doctor"], environ=install.environ, stdout=out)
    text = out.getvalue()
    assert code == 1
    lines = text.splitlines()
    unit = next(i for i, ln in enumerate(lines) if ln.startswith("fail  unit"))
    assert "fix: " in lines[unit + 1] and "update.sh --force" in lines[unit + 1]
    linger = next(i for i, ln in enumerate(lines) if ln.startswith("warn  linger"))
    assert f"sudo loginctl enable-linger {ir.current_user({})}" in lines[linger + 1]
    assert "1 failed, 1 warning(s)" in lines[-1]


def test_bad_permissions_fail_and_the_fix_heals(install: Install) -> None:
    layout = DataLayout(install.data)
    layout.config_file.write_text("[server]\n")
    layout.config_file.chmod(0o644)
    layout.system_db.chmod(0o640)
    layout.database_dir.chmod(0o755)
    code, _, checks = install.doctor()
    assert code == 1
    check = checks["permissions"]
    _assert_fail(check, "chmod 600", "chmod 700", str(layout.config_file), str(layout.system_db))
    subprocess.run(["sh", "-c", check["fix"]], check=True)
    code, _, checks = install.doctor()
    assert code == 0, [c for c in checks.values() if c["status"] == "fail"]


def test_files_root_made_in_a_home_fail_and_the_fix_heals(install: Install) -> None:
    """What root in a sandbox leaves in its bind-mounted home (tests run as root)."""
    home = DataLayout(install.data).home("ada1")
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "rootshell").write_bytes(b"\x7fELF")
    (home / "bin" / "rootshell").chmod(0o4755)
    (home / "owned").mkdir()
    (home / "owned" / "f").write_text("x")
    os.chown(home / "owned", 12345, 12345)
    os.chown(home / "owned" / "f", 12345, 12345)
    os.mkfifo(home / "a-fifo")  # ordinary (git, ssh agents): not reported
    (home / "etc-link").symlink_to("/etc/hostname")
    try:
        os.mknod(home / "disk", 0o600 | stat.S_IFBLK, os.makedev(7, 0))
        device = True
    except PermissionError:
        device = False
    code, _, checks = install.doctor()
    assert code == 1
    check = checks["homes"]
    _assert_fail(check, "setuid", "uid 12345", "chmod ug-s", "chown -hR")
    if device:
        assert "device" in check["finding"] and "-type b" in check["fix"]
    # The test already runs as root (and may have no sudo).
    subprocess.run(["sh", "-c", check["fix"].replace("sudo ", "")], check=True)
    _, _, checks = install.doctor()
    assert checks["homes"]["status"] == "ok", checks["homes"]
    assert (home / "a-fifo").exists() and not (home / "disk").exists()
    assert Path("/etc/hostname").stat().st_uid == 0, "the fix followed a link"


def test_many_bad_permissions_get_one_recursive_fix(install: Install) -> None:
    layout = DataLayout(install.data)
    for p in [layout.root, *layout.root.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
        elif p.is_file():
            p.chmod(0o644)
    _, _, checks = install.doctor()
    _assert_fail(checks["permissions"], "chmod -R go-rwx")
    subprocess.run(["sh", "-c", checks["permissions"]["fix"]], check=True)
    _, _, checks = install.doctor()
    assert checks["permissions"]["status"] == "ok"


def test_broken_current_link(install: Install) -> None:
    current = install.root / "current"
    current.unlink()
    current.symlink_to("releases/9.9.9")
    code, _, checks = install.doctor()
    assert code == 1
    _assert_fail(checks["install"], "releases/9.9.9", f"{install.root}/update.sh --force")


def test_missing_current_without_update_script_points_at_the_installer(install: Install) -> None:
    (install.root / "current").unlink()
    (install.root / "update.sh").unlink()
    _, _, checks = install.doctor()
    _assert_fail(checks["install"], "curl -fsSL http://127.0.0.1:1/rel/install.sh | bash")


def test_interrupted_update_is_a_warning(install: Install) -> None:
    (install.root / ".update-journal").write_text("from=0.0.9\nto=0.1.0\n")
    code, _, checks = install.doctor()
    assert code == 0
    assert checks["install"]["status"] == "warn"
    assert "update.sh" in checks["install"]["fix"]


def test_missing_unit(install: Install) -> None:
    install.unit.unlink()
    code, _, checks = install.doctor()
    assert code == 1
    _assert_fail(checks["unit"], str(install.unit), "update.sh --force")


def test_unit_not_enabled(install: Install) -> None:
    (install.unit.parent / "default.target.wants" / "skald.service").unlink()
    _, _, checks = install.doctor()
    _assert_fail(checks["unit"], "systemctl --user enable --now skald")


def test_no_linger_warns_only(install: Install) -> None:
    (install.linger / ir.current_user({})).unlink()
    code, report, checks = install.doctor()
    assert code == 0 and report["warnings"] == 1
    assert checks["linger"]["status"] == "warn"
    assert checks["linger"]["fix"] == f"sudo loginctl enable-linger {ir.current_user({})}"


def test_port_taken_by_another_program(install: Install) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", install.port))
        listener.listen()
        code, _, checks = install.doctor()
    assert code == 1
    check = checks["port"]
    _assert_fail(check, str(install.port), "not Skald", "[server]")
    assert "SKALD_SERVER_PORT" in check["fix"]


def test_corrupted_registry(install: Install) -> None:
    for archive in (install.data / "backups").glob("skald-backup-*.tar"):
        archive.unlink()  # first without a backup at hand
    db = DataLayout(install.data).system_db
    raw = bytearray(db.read_bytes())
    assert len(raw) > 5 * 4096
    # Keep the header (page 1) so the file still opens; ruin the b-tree pages after it.
    raw[4096 : len(raw) - 4096] = b"\xa5" * (len(raw) - 8192)
    db.write_bytes(bytes(raw))
    code, _, checks = install.doctor()
    assert code == 1
    _assert_fail(checks["registry"], "integrity", "skald restore ARCHIVE")
    # With an archive at hand, the fix names the newest one.
    backups = install.data / "backups"
    (backups / "skald-backup-20261101T000000Z.tar").write_bytes(b"old")
    newest = backups / "skald-backup-20261128T000000Z.tar"
    newest.write_bytes(b"new")
    os.utime(backups / "skald-backup-20261101T000000Z.tar", (1, 1))
    _, _, checks = install.doctor()
    assert checks["registry"]["fix"] == (
        f"systemctl --user stop skald && {install.bin} restore {newest}"
    )


def test_registry_that_is_not_a_database(install: Install) -> None:
    DataLayout(install.data).system_db.write_bytes(b"not sqlite at all " * 500)
    code, _, checks = install.doctor()
    assert code == 1
    _assert_fail(checks["registry"], "restore")


def test_docker_unreachable_is_reported(install: Install) -> None:
    code, _, checks = install.doctor(
        SKALD_SANDBOX_ENABLED="true", DOCKER_HOST="unix:///nonexistent/docker.sock"
    )
    assert code == 1
    check = checks["docker"]
    assert check["status"] == "fail" and check["fix"]
    assert "/nonexistent/docker.sock" in check["finding"]
    assert checks["image"]["status"] == "skip"


def test_sandbox_disabled_skips_docker(install: Install) -> None:
    code, _, checks = install.doctor(DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert code == 0
    assert checks["docker"]["status"] == "skip"
    assert "not needed" in checks["docker"]["finding"]


@pytest.mark.parametrize(
    ("dockerd", "url", "systemd", "fix"),
    [
        (None, "unix:///nonexistent/docker.sock", True, "sudo apt-get install docker.io"),
        ("/usr/bin/dockerd", "unix:///var/run/docker.sock", True, "sudo systemctl enable --now"),
        ("/usr/bin/dockerd", "unix:///var/run/docker.sock", False, "sudo service docker start"),
        ("/usr/bin/dockerd", "unix:///nonexistent/docker.sock", True, "unset DOCKER_HOST"),
    ],
)
def test_missing_docker_socket_fixes_fit_the_machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dockerd: str | None,
    url: str,
    systemd: bool,
    fix: str,
) -> None:
    run_dir = tmp_path / "run-systemd"
    if systemd:
        run_dir.mkdir()
    monkeypatch.setattr(checks_base, "SYSTEMD_RUN_DIR", run_dir)
    monkeypatch.setattr(checks_host, "_which", lambda name, environ: dockerd)
    real_exists = Path.exists
    monkeypatch.setattr(
        Path, "exists", lambda self: False if "docker.sock" in str(self) else real_exists(self)
    )
    ctx = checks_base.Context(layout=DataLayout(tmp_path), config=Config(), environ={})
    found = checks_host._docker_socket_problem(ctx, url)
    assert found is not None and found.status == "fail"
    assert found.fix is not None and fix in found.fix


def test_docker_socket_without_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        sock.chmod(0o000)
        if os.geteuid() == 0:  # root may open anything: pretend it may not
            monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != sock)
        ctx = checks_base.Context(
            layout=DataLayout(tmp_path / "data"),
            config=Config(),
            environ={"HOME": str(tmp_path)},
        )
        found = checks_host._docker_socket_problem(ctx, f"unix://{sock}")
    assert found is not None and found.status == "fail"
    assert found.fix == f"sudo usermod -aG docker {ir.current_user({})}, then log out and in"


def test_bad_config_is_a_finding_not_an_exit_78(install: Install) -> None:
    (install.data / "config.toml").write_text("[server]\nprot = 1\n")
    (install.data / "config.toml").chmod(0o600)
    code, _, checks = install.doctor()
    assert code == 1
    _assert_fail(checks["config"], "unknown key server.prot", "config.toml")
    # Every other check still ran.
    assert checks["registry"]["status"] == "ok"


def test_missing_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ir, "LINGER_DIR", tmp_path / "linger")
    out = io.StringIO()
    code = main(
        ["--data", str(tmp_path / "nowhere"), "doctor", "--json"],
        environ={"HOME": str(tmp_path), "SKALD_SANDBOX_ENABLED": "false"},
        stdout=out,
    )
    checks = {c["name"]: c for c in json.loads(out.getvalue())["checks"]}
    assert code == 1
    # The fix names this data directory: a bare `skald setup` would set up another one.
    _assert_fail(checks["data"], f"skald --data {tmp_path / 'nowhere'} setup")
    # Not installed here and running from a checkout: the install checks do not apply.
    for name in ("install", "unit", "linger"):
        assert checks[name]["status"] == "skip"
        assert checks[name]["finding"].startswith("not applicable: "), checks[name]
    assert not (tmp_path / "nowhere").exists()


async def test_a_check_that_raises_becomes_a_fail_line(tmp_path: Path) -> None:
    async def check_exploding(ctx: checks_base.Context) -> checks_base.Finding:
        raise RuntimeError("boom")

    ctx = checks_base.Context(layout=DataLayout(tmp_path), config=Config(), environ={})
    report = await doctor.run_checks(ctx, [checks_host.check_python, check_exploding])
    assert not report.ok
    assert report.checks[1].name == "exploding"
    assert report.checks[1].status == "fail"
    assert "RuntimeError: boom" in report.checks[1].finding


def test_install_root_parsing(tmp_path: Path) -> None:
    root = ir.InstallRoot.from_environ({"HOME": str(tmp_path)})
    assert root.root == tmp_path / ".local" / "share" / "skald"
    assert not root.exists() and root.current_version() is None and root.releases() == []
    root = ir.InstallRoot.from_environ({"HOME": str(tmp_path), "SKALD_HOME": "~/sk"})
    assert root.root == tmp_path / "sk"
    assert ir.parse_env_file(
        "# c\n\nSKALD_CHANNEL=nightly\nexport SKALD_PYTHON='/usr/bin/python3'\n"
        'SKALD_RELEASES_URL="http://x/y"\nbad line\n1X=2\n'
    ) == {
        "SKALD_CHANNEL": "nightly",
        "SKALD_PYTHON": "/usr/bin/python3",
        "SKALD_RELEASES_URL": "http://x/y",
    }
    assert ir.unit_path({"HOME": "/h"}) == Path("/h/.config/systemd/user/skald.service")
    assert ir.unit_path({"HOME": "/h", "XDG_CONFIG_HOME": "/c"}) == Path(
        "/c/systemd/user/skald.service"
    )


# -- with a real server --------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with household(tmp_path / "srv") as srv:
        yield srv


def _doctor_for(srv: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(ir, "LINGER_DIR", tmp_path / "linger")
    out = io.StringIO()
    environ = {**srv.env, "SKALD_SERVER_PORT": str(srv.port)}
    environ.pop("XDG_RUNTIME_DIR", None)
    environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
    code = main(["--data", str(srv.data), "doctor", "--json"], environ=environ, stdout=out)
    return code, {c["name"]: c for c in json.loads(out.getvalue())["checks"]}


def test_port_served_by_this_skald_is_ok_and_databases_come_from_the_server(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, checks = _doctor_for(server, tmp_path, monkeypatch)
    assert checks["port"]["status"] == "ok", checks["port"]
    assert "this Skald" in checks["port"]["finding"]
    assert checks["registry"]["status"] == "ok"
    assert checks["databases"]["status"] == "ok", checks["databases"]
    assert "running server" in checks["databases"]["finding"]
    assert checks["services"]["status"] == "ok", checks["services"]
    assert "none degraded" in checks["services"]["finding"]
    assert code == 0, checks


def test_server_running_another_version_than_current(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `current` already switched to a newer release; the server still runs the old one.
    root = server.root / ".local" / "share" / "skald"
    (root / "releases" / "9.0.0").mkdir(parents=True)
    (root / "current").symlink_to("releases/9.0.0")
    # Without systemd the server is a process someone started: restart that.
    monkeypatch.setattr(checks_base, "SYSTEMD_RUN_DIR", tmp_path / "no-systemd")
    _, checks = _doctor_for(server, tmp_path, monkeypatch)
    assert checks["port"]["status"] == "warn", checks["port"]
    assert "installed version is 9.0.0" in checks["port"]["finding"]
    assert "systemctl" not in checks["port"]["fix"]
    assert f"--data {server.data} serve` (Ctrl-C), then start it again" in checks["port"]["fix"]
    (tmp_path / "systemd").mkdir()
    monkeypatch.setattr(checks_base, "SYSTEMD_RUN_DIR", tmp_path / "systemd")
    _, checks = _doctor_for(server, tmp_path, monkeypatch)
    assert checks["port"]["fix"] == "systemctl --user restart skald"


def test_port_held_by_another_skald(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second data directory configured for the port the first server listens on.
    other = ServerProcess(tmp_path / "other")
    other.port = server.port
    other.env = {**other.env}
    other.create_admin()
    _, checks = _doctor_for(other, tmp_path, monkeypatch)
    _assert_fail(checks["port"], "another Skald server", str(server.port))


def test_running_from(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    root = ir.InstallRoot(install.root)
    assert ir.running_from(root) is None  # the tests run from the checkout
    monkeypatch.setattr("sys.argv", [str(install.root / "current" / "skald.pyz"), "doctor"])
    assert ir.running_from(root) == (install.root / "releases" / VERSION).resolve()
    # An older release's pyz run by hand: noted, not a problem.
    (install.root / "releases" / "0.0.9").mkdir()
    monkeypatch.setattr("sys.argv", [str(install.root / "releases" / "0.0.9" / "x.pyz")])
    _, _, checks = install.doctor()
    assert checks["install"]["status"] == "ok"
    assert "this command itself runs release 0.0.9" in checks["install"]["finding"]


def test_without_systemd_the_service_checks_do_not_apply_and_no_fix_names_systemd(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    # install.sh on a machine without systemd writes no unit and enables no linger.
    monkeypatch.setattr(checks_base, "SYSTEMD_RUN_DIR", install.tmp / "no-systemd")
    install.unit.unlink()
    (install.linger / ir.current_user({})).unlink()
    code, report, checks = install.doctor()
    assert code == 0 and report["warnings"] == 0, checks
    for name in ("unit", "linger"):
        assert checks[name]["status"] == "skip"
        assert checks[name]["finding"].startswith("not applicable: "), checks[name]
        assert f"{install.bin} serve" in checks[name]["finding"]
    # A broken registry: the restore fix stops the hand-started server, not a unit.
    db = DataLayout(install.data).system_db
    raw = bytearray(db.read_bytes())
    raw[4096 : len(raw) - 4096] = b"\xa5" * (len(raw) - 8192)
    db.write_bytes(bytes(raw))
    _, _, checks = install.doctor()
    fixes = " ".join(str(c["fix"]) for c in checks.values() if c["fix"])
    assert "systemctl" not in fixes and "loginctl" not in fixes, fixes
    assert f"stop the running `{install.bin} serve`" in checks["registry"]["fix"]


def test_a_from_source_install_is_repaired_from_its_checkout_not_by_update_sh(
    install: Install,
) -> None:
    source = install.tmp / "checkout"
    (install.root / "installer.env").write_text(
        f"SKALD_RELEASES_URL=\nSKALD_CHANNEL=stable\nSKALD_SOURCE={source}\n"
    )
    (install.root / "current").unlink()
    _, _, checks = install.doctor()
    assert checks["install"]["status"] == "fail"
    assert checks["install"]["fix"] == f"{source}/install.sh --from-source"
    # Without a checkout recorded and no release server, it says what to run, not update.sh.
    (install.root / "installer.env").write_text("SKALD_RELEASES_URL=\n")
    _, _, checks = install.doctor()
    assert "update.sh" not in checks["install"]["fix"]
    assert "install.sh --from-source" in checks["install"]["fix"]
