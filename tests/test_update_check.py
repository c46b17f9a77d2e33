"""The Overview's "update available" line (issue 30): administrators see whether the
release server the updater uses has a newer Skald, checked now and then (not at every
view), never from a source checkout. The release server is a double on 127.0.0.1."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import MakeClient, signed_in
from release_support import serve_tree

from skald.core.runtime import Runtime
from skald.features.usage.updates import CHECK_EVERY_S, RETRY_AFTER_S, UpdateCheck, version_key
from skald.ops.install_root import InstallRoot


def _release_tree(tmp: Path, **latest: str) -> Path:
    """The release server's files: each channel's folder (`releases` for stable,
    `nightly`) with the version its LATEST names."""
    tree = tmp / "tree"
    for folder, version in latest.items():
        (tree / folder).mkdir(parents=True)
        (tree / folder / "LATEST").write_text(f"{version}\n")
    return tree


@contextlib.contextmanager
def served_tree(tree: Path) -> Iterator[str]:
    """`serve_tree(tree)` for the block; its base URL."""
    url, stop = serve_tree(tree)
    try:
        yield url
    finally:
        stop()


def _install(tmp: Path, url: str, version: str = "0.1.0", channel: str = "stable") -> Path:
    root = tmp / "skald-home"
    (root / "releases" / version).mkdir(parents=True)
    (root / "current").symlink_to(f"releases/{version}")
    (root / "installer.env").write_text(f"SKALD_RELEASES_URL={url}\nSKALD_CHANNEL={channel}\n")
    return root


def _checker(runtime: Runtime, root: Path, clock: list[float], installed: bool = True) -> None:
    check = runtime.server.state(UpdateCheck)
    check.root = InstallRoot(root)
    check.running = (lambda r: r.releases_dir / "0.1.0") if installed else (lambda r: None)
    check.clock = lambda: clock[0]


async def _line(client: Any) -> dict[str, Any]:
    r = await client.call("GET", "/api/dashboard/health")
    assert r.status_code == 200, r.text
    [line] = [x for x in r.json() if x["name"] == "update"]
    return line  # type: ignore[no-any-return]


async def test_admins_see_a_newer_release_from_the_updaters_server_checked_now_and_then(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, tmp_path: Path
) -> None:
    tree = _release_tree(tmp_path, releases="0.2.0", nightly="0.3.0-nightly.5")
    url, stop = serve_tree(tree)
    try:
        clock = [1000.0]
        _checker(runtime, _install(tmp_path, url), clock)
        mum = await signed_in(make_client, "mum")
        line = await _line(mum)
        assert line["status"] == "warn" and "0.2.0 is available" in line["finding"], line
        assert "0.1.0" in line["finding"] and "update" in (line["fix"] or "")
        # A newer release meanwhile: views keep the answer for hours (one request per
        # period, not one per page view)...
        (tree / "releases" / "LATEST").write_text("0.1.0\n")
        assert (await _line(mum))["status"] == "warn"
        clock[0] += CHECK_EVERY_S + 1
        line = await _line(mum)  # ...then ask again
        assert line["status"] == "ok" and line["fix"] is None, line
        # The release server down: "not checked", asked again sooner.
        stop()
        clock[0] += CHECK_EVERY_S + 1
        line = await _line(mum)
        assert line["status"] == "unknown" and "could not be asked" in line["finding"], line
        url, stop = serve_tree(tree)
        (tree / "releases" / "LATEST").write_text("0.2.0\n")
        _checker(runtime, _install(tmp_path / "again", url), clock)
        clock[0] += RETRY_AFTER_S + 1
        assert (await _line(mum))["status"] == "warn"
        # Members never see the line (nor the rest of the box's health).
        ada = await signed_in(make_client, "ada")
        assert (await ada.call("GET", "/api/dashboard/health")).status_code == 403
    finally:
        stop()


async def test_a_nightly_install_asks_the_nightly_channel(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, tmp_path: Path
) -> None:
    with served_tree(_release_tree(tmp_path, nightly="0.1.1")) as url:
        _checker(runtime, _install(tmp_path, url, channel="nightly"), [0.0])
        line = await _line(await signed_in(make_client, "mum"))
        assert line["status"] == "warn" and "0.1.1" in line["finding"], line


async def test_a_source_checkout_or_an_install_without_a_release_server_is_never_checked(
    runtime: Runtime, household: dict[str, str], make_client: MakeClient, tmp_path: Path
) -> None:
    with served_tree(_release_tree(tmp_path, releases="9.9.9")) as url:
        mum = await signed_in(make_client, "mum")
        _checker(runtime, _install(tmp_path, url), [0.0], installed=False)
        line = await _line(mum)
        assert line["status"] == "skip" and "source checkout" in line["finding"], line
        assert "9.9.9" not in str(line)
        # Installed from source: no release server recorded.
        root = _install(tmp_path / "src", "")
        _checker(runtime, root, [CHECK_EVERY_S * 10])
        line = await _line(mum)
        assert line["status"] == "skip" and "no release server" in line["finding"], line


def test_versions_compare_by_their_numbers() -> None:
    assert version_key("0.10.0") > version_key("0.9.1")
    assert version_key("1.0.0+abc") == version_key("1.0.0")
    assert version_key("0.2.0") > version_key("0.1.0")
