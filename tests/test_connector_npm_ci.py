"""The host-side `npm ci` of a connector's dependencies: it asks the registry the lock was
resolved against (the operator's `npm_config_*` settings reach it), and a version missing
from npm's cached version list (ETARGET, seen in CI) is asked once more online; any other
failure is reported as it is, never retried.

npm here is a script on a PATH of the test's own: the registry's lag cannot be made on
demand, and what is tested is Skald's handling of npm's answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skald.errors import SkaldError
from skald.features.connectors.install import Installer

FILES = {"package.json": b'{"name": "x", "private": true}\n', "package-lock.json": b"{}\n"}

NPM = """#!/bin/sh
echo "$@" >> "$npm_config_skald_test_log"
case "$*" in
  *--prefer-online*) [ "$npm_config_skald_test_mode" = etarget ] && exit 0 ;;
esac
if [ "$npm_config_skald_test_mode" = etarget ]; then
  echo "npm error code ETARGET"; echo "npm error notarget No matching version found"
else
  echo "npm error code E403"; echo "npm error 403 Forbidden"
fi
exit 1
"""


def _fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "npm").write_text(NPM)
    (folder / "npm").chmod(0o755)
    log = tmp_path / "npm.log"
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("npm_config_skald_test_log", str(log))
    monkeypatch.setenv("npm_config_skald_test_mode", mode)
    return log


async def test_an_npm_ci_that_meets_a_stale_version_list_is_asked_once_more_online(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_npm(tmp_path, monkeypatch, "etarget")
    folder = await Installer(None, tmp_path / "connectors").install_deps_on_host("npm", FILES)
    assert folder.is_dir()
    calls = log.read_text().splitlines()
    assert len(calls) == 2, calls
    assert calls[0].startswith("ci ") and "--prefer-online" not in calls[0]
    assert calls[1].endswith("--prefer-online")


async def test_any_other_npm_ci_failure_is_reported_once_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_npm(tmp_path, monkeypatch, "forbidden")
    installer = Installer(None, tmp_path / "connectors")
    with pytest.raises(SkaldError, match="403 Forbidden"):
        await installer.install_deps_on_host("npm", FILES)
    assert len(log.read_text().splitlines()) == 1
    assert not installer.deps_folder("npm", FILES).exists()


async def test_npm_ci_waits_seconds_not_a_minute_between_its_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # npm's own back-off (10 s, then up to 60) also follows an error no retry mends:
    # a certificate error on a TLS-inspecting network reached the connector's card
    # after 70 s (docs/dev/connectors.md). The same command runs in the sandboxes.
    log = _fake_npm(tmp_path, monkeypatch, "forbidden")
    with pytest.raises(SkaldError):
        await Installer(None, tmp_path / "connectors").install_deps_on_host("npm", FILES)
    args = log.read_text().split()
    flags = dict(a.split("=", 1) for a in args if a.startswith("--fetch-retry-"))
    assert int(flags["--fetch-retry-mintimeout"]) <= 2000, args
    assert int(flags["--fetch-retry-maxtimeout"]) <= 10000, args
