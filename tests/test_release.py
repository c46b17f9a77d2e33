"""Release artefacts (docs/dev/installer.md): ci/package.sh, ci/publish.sh and
ci/verify-version.sh make the release tree the installer reads, signed so it can tell.

No Docker and no building: the versions published here are rewrites (`make_variant`) of
the pyz that ci/test.sh builds and names in `$SKALD_TEST_PYZ`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
from prerequisites import (
    built_pyz_fixture,  # noqa: F401  (the `built_pyz` fixture)
    unavailable,
)
from release_support import (
    BROKEN_MESSAGE,
    RELEASE_PUB,
    REPO,
    TEST_KEY,
    TEST_PUB,
    make_variant,
    package,
    package_and_publish,
    publish,
    pyz_env,
    run_script,
    serve_tree,
)

RunPyz = Callable[..., subprocess.CompletedProcess[str]]

SCRIPTS = ("update.sh", "uninstall.sh", "install.sh")
BEGIN, END = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"release tests: {reason}")


@pytest.fixture(scope="module")
def variants(built_pyz: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("variants")
    return {v: make_variant(built_pyz, out, v) for v in ("0.2.0", "0.3.0")}


@pytest.fixture(scope="module")
def tree(variants: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stable channel with 0.2.0, then 0.3.0, published with the test key."""
    root = tmp_path_factory.mktemp("tree")
    for version in ("0.2.0", "0.3.0"):
        package_and_publish([variants[version]], version, "stable", root)
    return root


def _manifest(version_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((version_dir / "manifest.json").read_text(encoding="utf-8"))
    return data


def _verifies(pub: Path, path: Path, sig: Path | None = None) -> bool:
    sig = sig or path.with_name(path.name + ".sig")
    cmd = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(pub), "-rawin"]
    cmd += ["-in", str(path), "-sigfile", str(sig)]
    return subprocess.run(cmd, capture_output=True, check=False).returncode == 0


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _embedded(text: str) -> str | None:
    start = text.find(BEGIN)
    if start < 0:
        return None
    end = text.index(END, start) + len(END)
    return text[start:end]


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp." in p.name]


def _listing(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- the tree -----------------------------------------------------------------------------


def test_tree_layout_and_latest(tree: Path, variants: dict[str, Path]) -> None:
    assert sorted(p.name for p in tree.iterdir()) == ["install.sh", "releases"]
    releases = tree / "releases"
    assert sorted(p.name for p in releases.iterdir()) == ["0.2.0", "0.3.0", "LATEST"]
    assert (releases / "LATEST").read_text(encoding="utf-8") == "0.3.0\n"
    for version in ("0.2.0", "0.3.0"):
        pyz = variants[version].name
        assert sorted(p.name for p in (releases / version).iterdir()) == sorted(
            [
                "install.sh",
                "manifest.json",
                "manifest.json.sig",
                pyz,
                f"{pyz}.sha256",
                f"{pyz}.sig",
                "uninstall.sh",
                "update.sh",
            ]
        )
        # The artefact is published byte for byte.
        assert (releases / version / pyz).read_bytes() == variants[version].read_bytes()
    # The served installer is the newest stable release's.
    assert (tree / "install.sh").read_bytes() == (releases / "0.3.0" / "install.sh").read_bytes()
    assert os.access(tree / "install.sh", os.X_OK)
    assert not _temp_files(tree)


def test_manifest_fields_and_digests(tree: Path, built_pyz: Path) -> None:
    version_dir = tree / "releases" / "0.3.0"
    m = _manifest(version_dir)
    assert list(m) == [
        "format",
        "version",
        "channel",
        "min_python",
        "published",
        "artefacts",
        "scripts",
    ]
    assert (m["format"], m["version"], m["channel"], m["min_python"]) == (
        1,
        "0.3.0",
        "stable",
        "3.11",
    )
    published = datetime.strptime(m["published"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - published) < timedelta(hours=1)

    platform = re.fullmatch(r"skald-[^-]+-(.+)\.pyz", built_pyz.name)
    assert platform
    os_, arch, pyabi = platform.group(1).split("-")
    [artefact] = m["artefacts"]
    name = f"skald-0.3.0-{os_}-{arch}-{pyabi}.pyz"
    pyz = version_dir / name
    assert artefact == {
        "file": name,
        "os": os_,
        "arch": arch,
        "pyabi": pyabi,
        "sha256": _sha256(pyz),
        "size": pyz.stat().st_size,
    }
    assert (os_, arch) == (os.uname().sysname.lower(), os.uname().machine)
    # sha256sum format with the bare name, so `sha256sum -c` works in the directory.
    sha_file = version_dir / f"{name}.sha256"
    assert sha_file.read_text(encoding="ascii") == f"{_sha256(pyz)}  {name}\n"
    check = subprocess.run(
        ["sha256sum", "-c", sha_file.name], cwd=version_dir, capture_output=True, check=False
    )
    assert check.returncode == 0, check.stderr

    assert [s["file"] for s in m["scripts"]] == list(SCRIPTS)
    for script in m["scripts"]:
        assert script["sha256"] == _sha256(version_dir / script["file"]), script["file"]
        assert set(script) == {"file", "sha256"}


def test_signatures_verify_with_the_stamped_key(tree: Path) -> None:
    sigs = sorted(tree.rglob("*.sig"))
    assert len(sigs) == 4  # manifest and pyz, two versions
    for sig in sigs:
        signed = sig.with_name(sig.name.removesuffix(".sig"))
        assert len(sig.read_bytes()) == 64, sig
        assert _verifies(TEST_PUB, signed), f"{sig} does not verify with the test key"
        assert not _verifies(RELEASE_PUB, signed), f"{sig} verifies with the release key"
    # The published scripts embed the key that signed the tree, where the repo's embed one.
    test_pem = TEST_PUB.read_text(encoding="ascii").strip()
    for script in SCRIPTS:
        original = (REPO / script).read_text(encoding="utf-8")
        published = (tree / "releases" / "0.3.0" / script).read_text(encoding="utf-8")
        block = _embedded(original)
        if block is None:
            assert published == original, script
        else:
            assert published == original.replace(block, test_pem, 1), script


def test_a_tampered_pyz_does_not_verify(tree: Path, tmp_path: Path) -> None:
    version_dir = tree / "releases" / "0.3.0"
    [name] = [a["file"] for a in _manifest(version_dir)["artefacts"]]
    copy = tmp_path / name
    shutil.copyfile(version_dir / name, copy)
    sig = version_dir / f"{name}.sig"
    assert _verifies(TEST_PUB, copy, sig)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    assert not _verifies(TEST_PUB, copy, sig)


def test_stamp_key_rewrites_the_block_in_each_script(
    variants: dict[str, Path], tmp_path: Path
) -> None:
    release_pem = RELEASE_PUB.read_text(encoding="ascii").strip()
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    # The block as a quoted variable, as bare lines in a heredoc and indented.
    originals = {
        "install.sh": f"#!/bin/sh\nKEY='{release_pem}'\necho install\n",
        "update.sh": f"#!/bin/sh\ncat <<'PEM'\n{release_pem}\nPEM\n",
        "uninstall.sh": "#!/bin/sh\n"
        + "".join(f"    {line}\n" for line in release_pem.splitlines())
        + "exit 0\n",
    }
    for name, text in originals.items():
        (scripts / name).write_text(text, encoding="utf-8")
    pkg = package([variants["0.2.0"]], "0.2.0", "stable", tmp_path / "pkg", "--scripts", scripts)
    version_dir = publish(pkg, tmp_path / "tree")

    test_pem = TEST_PUB.read_text(encoding="ascii").strip()
    m = _manifest(version_dir)
    digests = {s["file"]: s["sha256"] for s in m["scripts"]}
    for name, text in originals.items():
        published = (version_dir / name).read_text(encoding="utf-8")
        start = text.index(BEGIN)
        end = text.index(END) + len(END)
        assert published == text[:start] + test_pem + text[end:], name
        assert digests[name] == _sha256(version_dir / name)
    assert _verifies(TEST_PUB, version_dir / "manifest.json")
    # The package itself is left as it was.
    for name, text in originals.items():
        assert (pkg / name).read_text(encoding="utf-8") == text


def test_serve_tree_serves_the_tree_over_http(tree: Path) -> None:
    url, stop = serve_tree(tree)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        assert httpx.get(f"{url}/releases/LATEST", timeout=10).content == b"0.3.0\n"
        manifest = httpx.get(f"{url}/releases/0.3.0/manifest.json", timeout=10)
        assert manifest.json()["version"] == "0.3.0"
        assert httpx.get(f"{url}/releases/9.9.9/manifest.json", timeout=10).status_code == 404
    finally:
        stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/releases/LATEST", timeout=5)


# --- refusals -----------------------------------------------------------------------------


def test_verify_version_refuses_an_existing_or_older_version(tree: Path) -> None:
    script = REPO / "ci" / "verify-version.sh"
    for version, why in [
        ("0.3.0", "already published"),
        ("0.2.0", "already published"),
        ("0.2.5", "not newer"),
        ("0.3.0.dev9", "not newer"),
    ]:
        proc = run_script(script, "--builds-dir", tree, version)
        assert proc.returncode != 0, version
        assert why in proc.stderr, (version, proc.stderr)
    for version in ("0.3.1", "0.3.0.post1", "1.0.0rc1"):
        proc = run_script(script, "--builds-dir", tree, version)
        assert proc.returncode == 0, (version, proc.stderr)
    # The nightly channel has its own LATEST (none yet).
    proc = run_script(script, "--builds-dir", tree, "--channel", "nightly", "0.0.1")
    assert proc.returncode == 0, proc.stderr


def test_publish_refuses_to_overwrite_a_published_version(
    tree: Path, variants: dict[str, Path], tmp_path: Path
) -> None:
    before = _listing(tree)
    pkg = package([variants["0.3.0"]], "0.3.0", "stable", tmp_path / "pkg")
    proc = run_script(
        REPO / "ci" / "publish.sh", "--to", tree, "--stamp-key", "--key", TEST_KEY, pkg
    )
    assert proc.returncode != 0
    assert "already published" in proc.stderr
    assert _listing(tree) == before
    assert not _temp_files(tree)


def test_publish_without_stamp_key_refuses_the_test_key(
    variants: dict[str, Path], tmp_path: Path
) -> None:
    pkg = package([variants["0.2.0"]], "0.2.0", "stable", tmp_path / "pkg")
    target = tmp_path / "tree"
    publish_sh = REPO / "ci" / "publish.sh"
    for extra in ([], ["--key", str(TEST_KEY)]):
        proc = run_script(publish_sh, "--to", target, *extra, pkg)
        assert proc.returncode != 0, extra
        assert "release key" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not target.exists() or not any(target.rglob("*"))


def test_package_refuses_a_pyz_named_for_another_version(
    variants: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "pkg"
    proc = run_script(
        REPO / "ci" / "package.sh",
        "--version",
        "0.9.0",
        "--channel",
        "stable",
        "--key",
        TEST_KEY,
        "--out",
        out,
        variants["0.2.0"],
    )
    assert proc.returncode != 0
    assert "not --version 0.9.0" in proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_nightly_keeps_the_three_newest(built_pyz: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    versions = [f"0.4.0.dev{n}" for n in (1, 2, 3, 10)]  # dev10 sorts after dev3
    for version in versions:
        pyz = make_variant(built_pyz, tmp_path / "variants", version)
        package_and_publish([pyz], version, "nightly", root)
    nightly = root / "nightly"
    assert sorted(p.name for p in nightly.iterdir()) == sorted(["LATEST", *versions[1:]])
    assert (nightly / "LATEST").read_text(encoding="utf-8") == "0.4.0.dev10\n"
    assert _manifest(nightly / "0.4.0.dev10")["channel"] == "nightly"
    # A tree with only nightlies still serves an installer.
    assert (root / "install.sh").is_file()
    assert not (root / "releases").exists()
    assert not _temp_files(root)


# --- the variants run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def system_python() -> str:
    system = Path("/usr/bin/python3")
    if not system.is_file():
        _unavailable("no system python at /usr/bin/python3")
    return str(system)


@pytest.fixture
def run_pyz(tmp_path: Path, system_python: str) -> RunPyz:
    shiv_root, home, cwd = tmp_path / "shiv", tmp_path / "home", tmp_path / "run"
    for d in (shiv_root, home, cwd):
        d.mkdir()
    env = pyz_env(shiv_root, home)

    def run(pyz: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [system_python, str(pyz), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


@pytest.mark.slow
def test_a_published_variant_runs_version_and_selftest(tree: Path, run_pyz: RunPyz) -> None:
    version_dir = tree / "releases" / "0.2.0"
    [name] = [a["file"] for a in _manifest(version_dir)["artefacts"]]
    proc = run_pyz(version_dir / name, "version", timeout=120)
    assert proc.returncode == 0, _describe(proc)
    assert proc.stdout.strip() == "skald 0.2.0"
    proc = run_pyz(version_dir / name, "selftest", timeout=600)
    assert proc.returncode == 0, _describe(proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.slow
def test_a_broken_variant_passes_selftest_but_does_not_serve(
    built_pyz: Path, tmp_path: Path, run_pyz: RunPyz
) -> None:
    broken = make_variant(built_pyz, tmp_path / "variants", "0.3.1", broken=True)
    proc = run_pyz(broken, "version", timeout=120)
    assert proc.stdout.strip() == "skald 0.3.1", _describe(proc)
    proc = run_pyz(broken, "selftest", timeout=600)
    assert proc.returncode == 0, _describe(proc)
    data = tmp_path / "data"
    proc = run_pyz(
        broken,
        "--data",
        str(data),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(_free_port()),
        timeout=120,
    )
    assert proc.returncode != 0, _describe(proc)
    assert BROKEN_MESSAGE in proc.stderr, _describe(proc)
