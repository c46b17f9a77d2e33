"""The command line: every mistake is one clear line, a non-zero exit, and writes nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skald import __version__
from skald.cli import main

PW = "household password"


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    environ = {"HOME": str(tmp_path), "SKALD_SECURITY_KDF_PROFILE": "test"}

    def invoke(*argv: str, stdin: str = "") -> Result:
        out = io.StringIO()
        code = main(
            ["--data", str(data), *argv], environ=environ, stdin=io.StringIO(stdin), stdout=out
        )
        err = capsys.readouterr().err
        return Result(code, out.getvalue(), err)

    invoke.data = data  # type: ignore[attr-defined]
    return invoke


def _snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("skald: ")]
    assert len(lines) == 1, err
    return lines[0]


def test_setup_then_users(run) -> None:  # type: ignore[no-untyped-def]
    r = run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    assert r.code == 0, r.err
    assert "Recovery code for mum" in r.out
    r = run("user", "add", "ada", "--role", "member", "--password-stdin", stdin=PW + "\n")
    assert r.code == 0 and "encrypted" in r.out and "Recovery code" in r.out
    r = run("user", "add", "tim", "--role", "children", "--password-stdin", stdin=PW + "\n")
    assert r.code == 0 and "not encrypted" in r.out and "Recovery code" not in r.out
    listed = json.loads(run("user", "list", "--json").out)
    assert [(u["username"], u["role"], u["encrypted"]) for u in listed] == [
        ("ada", "member", True),
        ("mum", "admin", True),
        ("tim", "children", False),
    ]
    table = run("user", "list").out
    assert table.splitlines()[0].split()[:3] == ["USERNAME", "NAME", "ROLE"]
    # Secrets never appear in any output.
    assert PW not in table and "password" not in json.dumps(listed)


def test_setup_refuses_when_an_admin_exists(run) -> None:  # type: ignore[no-untyped-def]
    assert run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n").code == 0
    before = _snapshot(run.data)
    r = run("setup", "--admin", "dad", "--password-stdin", stdin=PW + "\n")
    assert r.code == 1
    assert "administrator already exists" in _error_line(r.err)
    assert _snapshot(run.data) == before


def test_duplicate_username_writes_nothing(run) -> None:  # type: ignore[no-untyped-def]
    run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    run("user", "add", "ada", "--role", "member", "--password-stdin", stdin=PW + "\n")
    before = _snapshot(run.data)
    r = run("user", "add", "Ada", "--role", "member", "--password-stdin", stdin=PW + "\n")
    assert r.code == 1 and "already exists" in _error_line(r.err)
    assert _snapshot(run.data) == before


@pytest.mark.parametrize(
    ("argv", "stdin", "code", "needle"),
    [
        (["frobnicate"], "", 2, "invalid choice"),
        (["user", "add", "ada", "--password-stdin"], PW, 2, "--role"),
        (["user", "add", "ada", "--role", "member", "--password-stdin"], "", 2, "end of input"),
        (
            ["user", "add", "ada", "--role", "member", "--password-stdin"],
            "short\n",
            1,
            "at least 8",
        ),
        (["user", "add", "../x", "--role", "member", "--password-stdin"], PW, 1, "usernames are"),
        (["user", "add", "ada", "--role", "wizard", "--password-stdin"], PW, 1, "no role named"),
        (["user", "delete", "mum"], "", 2, "--yes"),
        (["user", "deactivate", "nobody"], "", 1, "no user named"),
        (["user", "passwd", "mum", "--password-stdin"], PW, 1, "--with-current"),
        (
            ["user", "recover", "mum", "--recovery-code-stdin", "--password-stdin"],
            "AAAA\n" + PW,
            1,
            "recovery code",
        ),
    ],
)
def test_bad_input_is_one_clear_line(run, argv, stdin, code, needle) -> None:  # type: ignore[no-untyped-def]
    run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    before = _snapshot(run.data)
    r = run(*argv, stdin=stdin)
    assert r.code == code, r.err
    assert needle in _error_line(r.err)
    assert "Traceback" not in r.err
    assert _snapshot(run.data) == before


def test_bad_config_is_reported_with_file_line_and_key(run) -> None:  # type: ignore[no-untyped-def]
    run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    (run.data / "config.toml").write_text('[server]\nhost = "::"\nport = "nine"\n')
    before = _snapshot(run.data)
    r = run("user", "list")
    assert r.code == 78
    line = _error_line(r.err)
    assert "config.toml" in line and "line 3" in line and "server.port" in line
    assert _snapshot(run.data) == before


def test_missing_data_dir_is_not_created(run) -> None:  # type: ignore[no-untyped-def]
    r = run("user", "list")
    assert r.code == 1 and "skald setup" in _error_line(r.err)
    assert not run.data.exists()


def test_password_change_and_recovery_through_the_cli(run) -> None:  # type: ignore[no-untyped-def]
    r = run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    code = r.out.split("store it somewhere safe):")[1].split()[0]
    passwd = ("user", "passwd", "mum", "--with-current", "--password-stdin")
    recover = ("user", "recover", "mum", "--recovery-code-stdin", "--password-stdin")
    r = run(*passwd, stdin=f"{PW}\nsecond password\n")
    assert r.code == 0, r.err
    r = run(*recover, stdin=f"{code}\nthird password\n")
    assert r.code == 0, r.err
    assert "Recovery code for mum" in r.out and code not in r.out
    r = run(*passwd, stdin="second password\nyet another password\n")
    assert r.code == 1 and "wrong" in _error_line(r.err)


def test_deactivate_activate_delete(run) -> None:  # type: ignore[no-untyped-def]
    run("setup", "--admin", "mum", "--password-stdin", stdin=PW + "\n")
    run("user", "add", "tim", "--role", "children", "--password-stdin", stdin=PW + "\n")
    assert run("user", "deactivate", "tim").code == 0
    assert json.loads(run("user", "list", "--json").out)[1]["active"] is False
    assert run("user", "activate", "tim").code == 0
    tim_id = json.loads(run("user", "list", "--json").out)[1]["id"]
    assert (run.data / "database" / "users" / f"{tim_id}.db").exists()
    assert run("user", "delete", "tim", "--yes").code == 0
    assert not (run.data / "database" / "users" / f"{tim_id}.db").exists()
    assert [u["username"] for u in json.loads(run("user", "list", "--json").out)] == ["mum"]


def test_data_option_after_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"HOME": str(tmp_path), "SKALD_SECURITY_KDF_PROFILE": "test"}
    data = tmp_path / "elsewhere"
    code = main(
        ["setup", "--admin", "mum", "--password-stdin", "--data", str(data)],
        environ=env,
        stdin=io.StringIO(PW),
        stdout=io.StringIO(),
    )
    assert code == 0 and (data / "database" / "system.db").exists()


def test_default_data_dir_follows_skald_home(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "SKALD_HOME": str(tmp_path / "sk"),
        "SKALD_SECURITY_KDF_PROFILE": "test",
    }
    code = main(
        ["setup", "--admin", "mum", "--password-stdin"],
        environ=env,
        stdin=io.StringIO(PW),
        stdout=io.StringIO(),
    )
    assert code == 0 and (tmp_path / "sk" / "data" / "database" / "system.db").exists()


def test_entry_point_exit_codes_and_help(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env["HOME"] = str(tmp_path)

    def skald(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "skald", *argv],
            capture_output=True,
            text=True,
            env=env,
            input=stdin,
            timeout=60,
        )

    assert skald("version").stdout.strip() == f"skald {__version__}"
    for argv in (
        ["--help"],
        ["setup", "--help"],
        ["user", "--help"],
        ["user", "recover", "--help"],
        ["selftest", "--help"],
    ):
        r = skald(*argv)
        assert r.returncode == 0 and "usage: skald" in r.stdout, argv
    r = skald("user", "add")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("skald: ")
    # No terminal and no --password-stdin: a clear refusal instead of a hang.
    r = subprocess.run(
        [
            "setsid",
            sys.executable,
            "-m",
            "skald",
            "--data",
            str(tmp_path / "d"),
            "setup",
            "--admin",
            "mum",
        ],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert r.returncode == 2 and "no terminal" in r.stderr, r.stderr
    # It names the flag that works (it said "the -stdin flag", which does not exist).
    assert "pass it with --password-stdin" in r.stderr, r.stderr
