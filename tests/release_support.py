"""Release artefacts for tests: build a pyz, rewrite it into other versions, package and
publish a release tree signed with the test key, serve the tree over HTTP.

Cross-building a pyz takes a minute and rewriting one takes seconds, so end-to-end tests
build once (`build_pyz`, cached for the session) and get their old, new and broken builds
from that one with `make_variant`. The tree layout is docs/dev/installer.md's.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEST_KEY = REPO / "tests" / "keys" / "test-release-key.pem"
TEST_PUB = REPO / "tests" / "keys" / "test-release-key.pub"
RELEASE_PUB = REPO / "installer" / "release-key.pub"

PYZ_NAME = re.compile(r"skald-([^-]+)-([a-z0-9]+-[A-Za-z0-9_]+-cp[0-9]+[a-z]*)\.pyz")
_VERSION_LINE = re.compile(r'^__version__ = "[^"\n]*"$', re.M)
# The first line of `serve` (its signature, possibly over several lines, up to the colon).
_SERVE_DEF = re.compile(r"^async def serve\(.*?\)[^\n]*:\n", re.M | re.S)
BROKEN_MESSAGE = "skald: deliberately broken test build: serve refuses to start"
# The runtime image's Dockerfile in a pyz; its digest is the image tag the pyz runs.
PYZ_DOCKERFILE = "site-packages/skald/assets/installer/runtime/Dockerfile"

# What goes into a build (ci/build.sh stages these); a change to any of them is a new build.
_SOURCES = (
    "pyproject.toml",
    "README.md",
    "ci/build.sh",
    "skald",
    "web",
    "agents",
    "docs",
    "installer",
)
_SKIP_DIRS = {"__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}

_builds: dict[tuple[str, str | None, str], Path] = {}
_build_dir: Path | None = None


def _source_digest() -> str:
    digest = hashlib.sha256()
    for top in _SOURCES:
        base = REPO / top
        paths = [base] if base.is_file() else sorted(_walk(base))
        for path in paths:
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(("skald/assets/", "docs/dev/")):
                continue
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _walk(base: Path) -> Iterable[Path]:
    if not base.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in filenames:
            if not name.endswith(".pyc"):
                yield Path(dirpath) / name


def _session_build_dir() -> Path:
    global _build_dir
    if _build_dir is None:
        _build_dir = Path(tempfile.mkdtemp(prefix="skald-test-builds-"))
        atexit.register(shutil.rmtree, _build_dir, True)
    return _build_dir


def build_pyz(python_version: str | None, version: str, out: Path) -> Path:
    """`ci/build.sh --version VERSION [--python-version X.Y]`, into OUT; returns the pyz.

    Builds are cached for the session by (source tree, python version, version): asking
    again for the same build only copies it.
    """
    key = (_source_digest(), python_version, version)
    built = _builds.get(key)
    if built is None or not built.is_file():
        target = _session_build_dir() / f"{len(_builds)}"
        cmd = [str(REPO / "ci" / "build.sh"), "--out", str(target), "--version", version]
        if python_version:
            cmd += ["--python-version", python_version]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ci/build.sh failed (exit {proc.returncode}):\n{proc.stderr}")
        built = Path(proc.stdout.strip())
        _builds[key] = built
    out.mkdir(parents=True, exist_ok=True)
    dest = out / built.name
    for src in (built, built.with_name(built.name + ".sha256")):
        if src.resolve() != (out / src.name).resolve():
            shutil.copy2(src, out / src.name)
    return dest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _replace_once(
    text: str, pattern: re.Pattern[str], repl: Callable[[str], str], what: str
) -> str:
    matches = list(pattern.finditer(text))
    assert len(matches) == 1, f"expected exactly one {what}, found {len(matches)}"
    m = matches[0]
    return text[: m.start()] + repl(m.group(0)) + text[m.end() :]


def make_variant(
    pyz: Path, out_dir: Path, version: str, broken: bool = False, image_note: str | None = None
) -> Path:
    """Rewrite a built pyz into skald-VERSION-<platform>.pyz in OUT_DIR (and its .sha256).

    The copy carries `__version__ = VERSION` (also in its dist-info) and a new shiv build
    id, so it extracts to a directory of its own. With `broken`, `serve` raises SystemExit
    at its start: the server never becomes healthy, while `selftest` still passes. With
    `image_note`, its runtime Dockerfile gains that comment line, so it runs an image tag
    of its own (`pyz_image_tag`): a test's stand-in image never replaces the real one.
    """
    m = PYZ_NAME.fullmatch(pyz.name)
    assert m, f"{pyz.name} is not named skald-<version>-<platform>.pyz"
    old_version, platform = m.group(1), m.group(2)
    name = f"skald-{version}-{platform}.pyz"
    out_dir.mkdir(parents=True, exist_ok=True)
    old_info = f"site-packages/skald-{old_version}.dist-info/"
    new_info = f"site-packages/skald-{version}.dist-info/"

    patched: dict[str, bytes] = {}
    # The files whose one match of a pattern is rewritten: (pattern, rewrite, what it is).
    edits: dict[str, tuple[re.Pattern[str], Callable[[str], str], str]] = {
        "site-packages/skald/__init__.py": (
            _VERSION_LINE,
            lambda _: f'__version__ = "{version}"',
            "__version__ line",
        ),
    }
    if broken:
        edits["site-packages/skald/server.py"] = (
            _SERVE_DEF,
            lambda sig: f"{sig}    raise SystemExit({BROKEN_MESSAGE!r})\n",
            "`async def serve(` in skald/server.py",
        )
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.tmp.", dir=out_dir)
    tmp = Path(tmp_name)
    try:
        with zipfile.ZipFile(pyz) as src, os.fdopen(fd, "wb") as f:
            infos = src.infolist()
            # The shebang line (and anything else) in front of the first entry.
            with pyz.open("rb") as raw:
                f.write(raw.read(min(i.header_offset for i in infos)))
            env = json.loads(src.read("environment.json"))
            with zipfile.ZipFile(f, "w") as dst:
                for info in infos:
                    if info.filename == "environment.json":
                        continue  # written last, once the build id is known
                    data = src.read(info)
                    new_name = info.filename
                    if info.filename in edits:
                        pattern, repl, what = edits[info.filename]
                        text = _replace_once(data.decode(), pattern, repl, what)
                        data = patched[new_name] = text.encode()
                    elif image_note is not None and info.filename == PYZ_DOCKERFILE:
                        data = patched[new_name] = data + f"# {image_note}\n".encode()
                    elif info.filename.startswith(old_info):
                        new_name = new_info + info.filename[len(old_info) :]
                        if new_name.endswith("/METADATA"):
                            text = re.sub(
                                r"^Version: .*$",
                                f"Version: {version}",
                                data.decode(),
                                count=1,
                                flags=re.M,
                            )
                            data = patched[new_name] = text.encode()
                        elif new_name.endswith("/RECORD"):
                            data = data.replace(
                                old_info.removeprefix("site-packages/").encode(),
                                new_info.removeprefix("site-packages/").encode(),
                            )
                    dst.writestr(_renamed(info, new_name), data)
                seed = [env["build_id"], version, str(broken)]
                seed += [f"{n}:{hashlib.sha256(d).hexdigest()}" for n, d in sorted(patched.items())]
                env["build_id"] = hashlib.sha256("\n".join(seed).encode()).hexdigest()
                dst.writestr(
                    _renamed(src.getinfo("environment.json"), "environment.json"),
                    json.dumps(env, indent=2).encode(),
                )
        assert "site-packages/skald/__init__.py" in patched, f"{pyz} has no skald/__init__.py"
        if broken:
            assert "site-packages/skald/server.py" in patched, f"{pyz} has no skald/server.py"
        tmp.chmod(0o755)
        dest = out_dir / name
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    dest.with_name(name + ".sha256").write_text(f"{_sha256(dest)}  {name}\n", encoding="ascii")
    return dest


def pyz_image_tag(pyz: Path) -> str:
    """The runtime image tag PYZ runs (skald/sandbox/image.py image_tag of its Dockerfile)."""
    with zipfile.ZipFile(pyz) as z:
        return f"skald-runtime:v{hashlib.sha256(z.read(PYZ_DOCKERFILE)).hexdigest()[:12]}"


def make_image(tag: str) -> None:
    """A tiny image tagged TAG (`docker import` of a one-file root, no registry needed) that
    stands in for the runtime image in release tests; remove it with `remove_image`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = f"stand-in for {tag}\n".encode()
        info = tarfile.TarInfo("skald-test-image")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    subprocess.run(
        ["docker", "import", "--change", "LABEL skald.test-image=1", "-", tag],
        input=buf.getvalue(),
        capture_output=True,
        check=True,
        timeout=120,
    )


def remove_image(tag: str) -> None:
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False, timeout=120)


def has_image(tag: str) -> bool:
    proc = subprocess.run(
        ["docker", "image", "inspect", tag], capture_output=True, check=False, timeout=60
    )
    return proc.returncode == 0


def _renamed(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    new = zipfile.ZipInfo(name, date_time=info.date_time)
    new.compress_type = info.compress_type
    new.external_attr = info.external_attr
    new.create_system = info.create_system
    return new


def run_script(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """A ci/ script, with no SKALD_SIGNING_KEY from the caller's environment."""
    env = {k: v for k, v in os.environ.items() if k != "SKALD_SIGNING_KEY"}
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def package(
    pyzs: Sequence[Path], version: str, channel: str, out: Path, *extra: str | Path
) -> Path:
    """`ci/package.sh` with the test key into OUT; returns the package directory."""
    proc = run_script(
        REPO / "ci" / "package.sh",
        "--version",
        version,
        "--channel",
        channel,
        "--key",
        TEST_KEY,
        "--out",
        out,
        *extra,
        *pyzs,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ci/package.sh failed (exit {proc.returncode}): {proc.stderr}")
    return Path(proc.stdout.strip())


def publish(package_dir: Path, tree: Path) -> Path:
    """`ci/publish.sh --stamp-key` with the test key; returns the published version dir."""
    proc = run_script(
        REPO / "ci" / "publish.sh", "--to", tree, "--stamp-key", "--key", TEST_KEY, package_dir
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ci/publish.sh failed (exit {proc.returncode}): {proc.stderr}")
    return Path(proc.stdout.strip())


def package_and_publish(
    pyzs: Sequence[Path], version: str, channel: str, tree: Path, *, image: str | None = None
) -> None:
    """Package PYZS as VERSION on CHANNEL and publish them into TREE, signed with the test
    key, which the published scripts then embed (`--stamp-key`); with IMAGE (a tag in
    Docker here), the release carries that image (`ci/package.sh --image`)."""
    extra = ("--image", image) if image else ()
    with tempfile.TemporaryDirectory(prefix="skald-package-") as tmp:
        publish(package(pyzs, version, channel, Path(tmp) / "package", *extra), tree)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_tree(tree: Path) -> tuple[str, Callable[[], None]]:
    """Serve TREE over HTTP on 127.0.0.1 (a free port) from a thread; returns the base URL
    and a function that stops the server."""
    handler = partial(_QuietHandler, directory=str(tree))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="release-tree", daemon=True)
    thread.start()
    port = server.server_address[1]

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}", stop


# Variables that must not reach a pyz run by a test: they would point it at the venv, at
# the developer's real data, or change what shiv runs.
_STRIP_EXACT = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}
_STRIP_PREFIXES = ("SHIV_", "SKALD_", "XDG_")


def pyz_env(shiv_root: Path, home: Path) -> dict[str, str]:
    """A clean environment for running a pyz with the system python: nothing from the venv
    or the caller's Skald/shiv/XDG settings, extraction into SHIV_ROOT, HOME of its own and
    no sandbox containers."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _STRIP_EXACT and not key.startswith(_STRIP_PREFIXES)
    }
    venv = os.environ.get("VIRTUAL_ENV")
    if venv and "PATH" in env:
        venv_bin = str(Path(venv) / "bin")
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["SHIV_ROOT"] = str(shiv_root)
    env["HOME"] = str(home)
    env["SKALD_SANDBOX_ENABLED"] = "false"
    return env
