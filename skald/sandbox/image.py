"""The runtime image: its Dockerfile (shipped in the pyz), its tag, and how to build it.

The tag is derived from the Dockerfile's bytes, so an edited Dockerfile can never be
mistaken for an image built from the old one, and containers made from an old image are
recreated by `ensure` (the image tag is part of their spec).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skald.assets import asset_dir
from skald.errors import SkaldError

IMAGE_REPOSITORY = "skald-runtime"
DEFAULT_BASE = "debian:trixie-slim"
# What `bootstrap-base` imports a debootstrap rootfs as.
LOCAL_BASE = "skald-base:trixie"
BASE_SUITE = "trixie"


class ImageError(SkaldError):
    """Building or importing an image failed; the message says why."""

    code = "image_error"


def dockerfile_path() -> Path:
    return asset_dir("installer") / "runtime" / "Dockerfile"


def image_tag(dockerfile: bytes | None = None) -> str:
    """`skald-runtime:v<first 12 hex of sha256(Dockerfile)>`."""
    data = dockerfile_path().read_bytes() if dockerfile is None else dockerfile
    return f"{IMAGE_REPOSITORY}:v{hashlib.sha256(data).hexdigest()[:12]}"


def has_image(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def pick_base(client: Any, requested: str | None) -> str:
    """The base to build from: the one asked for, else the slim image if it is here, else
    the locally bootstrapped one if it is here, else the slim image (pulled by Docker)."""
    if requested:
        return requested
    if has_image(client, DEFAULT_BASE):
        return DEFAULT_BASE
    if has_image(client, LOCAL_BASE):
        return LOCAL_BASE
    return DEFAULT_BASE


def _progress_lines(events: Iterator[dict[str, Any]]) -> Iterator[str]:
    for event in events:
        if "error" in event:
            detail = event.get("errorDetail", {}).get("message") or event["error"]
            raise ImageError(f"the image build failed: {str(detail).strip()}")
        text = event.get("stream") or event.get("status")
        if text:
            yield str(text)


def build_image(
    client: Any,
    *,
    base: str,
    tag: str | None = None,
    dockerfile: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> str:
    """Build the runtime image (blocking: call it from a thread). Returns the tag."""
    source = dockerfile or dockerfile_path()
    data = source.read_bytes()
    tag = tag or image_tag(data)
    # The build context is the Dockerfile alone: the image needs nothing else.
    events = client.api.build(
        fileobj=io.BytesIO(data),
        tag=tag,
        buildargs={"BASE": base},
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
        labels={"skald.runtime": "1"},
    )
    for line in _progress_lines(events):
        progress(line)
    if not has_image(client, tag):
        raise ImageError(f"the build finished but {tag} is not there")
    return tag


# -- a base without any registry: debootstrap + import ---------------------------------


def apt_mirror(sources: Path = Path("/etc/apt")) -> str | None:
    """The Debian mirror this machine's apt uses (first `debian` URI in its sources)."""
    files = sorted(sources.glob("sources.list.d/*.sources"))
    files += sorted(sources.glob("sources.list.d/*.list"))
    files.append(sources / "sources.list")
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            uris: list[str] = []
            if words[0] == "URIs:":
                uris = words[1:]
            elif words[0] == "deb":
                uris = [w for w in words[1:] if "://" in w][:1]
            for uri in uris:
                # The main archive, not the security one nor a third-party repository.
                if uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/")
    return None


def bootstrap_base(
    client: Any,
    *,
    mirror: str,
    tag: str = LOCAL_BASE,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> str:
    """debootstrap a minimal Debian trixie and import it as `tag` (blocking; root only)."""
    tool = shutil.which("debootstrap")
    if tool is None:
        raise ImageError("debootstrap is not installed (Debian: apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="skald-base-", dir=workdir) as tmp:
        rootfs = Path(tmp) / "rootfs"
        progress(f"debootstrap --variant=minbase {BASE_SUITE} from {mirror}\n")
        _run([tool, "--variant=minbase", BASE_SUITE, str(rootfs), mirror], progress)
        # Downloaded packages would only make the image bigger.
        for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        progress(f"packing {rootfs}\n")
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], progress)
        repository, _, version = tag.partition(":")
        progress(f"importing as {tag}\n")
        client.api.import_image_from_file(
            str(tarball),
            repository=repository,
            tag=version or "latest",
            changes=['CMD ["bash"]', "ENV LANG=C.UTF-8"],
        )
    if not has_image(client, tag):
        raise ImageError(f"the import finished but {tag} is not there")
    return tag


def _run(argv: list[str], progress: Callable[[str], None]) -> None:
    proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        progress(line)
    if proc.wait() != 0:
        raise ImageError(f"{Path(argv[0]).name} failed with exit code {proc.returncode}")
