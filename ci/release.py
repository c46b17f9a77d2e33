"""The Python behind ci/package.sh, ci/publish.sh and ci/verify-version.sh (stdlib only).

The release tree contract is docs/dev/installer.md. The shell scripts keep the argument
parsing, openssl and the temp-name+rename writes; this module does what is awkward in
bash (JSON, zip files, digests, PEP 440 order), once, so the manifest that package.sh
writes and the one publish.sh checks cannot drift apart.

Usage: python3 ci/release.py SUBCOMMAND ARG...   (`--help` lists the subcommands)

A refusal is one line on stderr, prefixed with the name of the script that runs the
subcommand (what users and tests saw before this module existed), and exit status 1.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

# A normalised PEP 440 version: N(.N)*[{a|b|rc}N][.postN][.devN]. The groups are the
# release, the pre-release phase and number, the post and the dev number.
VERSION_RE = re.compile(
    r"([0-9]+(?:\.[0-9]+)*)(?:(a|b|rc)([0-9]+))?(?:\.post([0-9]+))?(?:\.dev([0-9]+))?"
)
# skald-<version>-<os>-<arch>-<pyabi>.pyz, as ci/build.sh names a zipapp.
PYZ_NAME_RE = re.compile(r"skald-([^-]+)-([a-z0-9]+)-([A-Za-z0-9_]+)-(cp[0-9]+[a-z]*)\.pyz")
# The scripts every release carries, in the order manifest.json lists them.
SCRIPTS = ("update.sh", "uninstall.sh", "install.sh")
CHANNELS = ("stable", "nightly")
BEGIN, END = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"
# `__version__ = "..."` in the pyz's skald/__init__.py (ci/build.sh stamps it there).
VERSION_LINE_RE = re.compile(r'^__version__ = "([^"\n]*)"$', re.M)
PYZ_INIT = "site-packages/skald/__init__.py"
# The runtime image's Dockerfile in a pyz: its digest names the image the pyz runs
# (skald/sandbox/image.py image_tag), so a release's image must carry that tag.
PYZ_DOCKERFILE = "site-packages/skald/assets/installer/runtime/Dockerfile"
IMAGE_REPOSITORY = "skald-runtime"
IMAGE_TAG_RE = re.compile(r"skald-runtime:v([0-9a-f]{12})")
# skald-runtime-v<tag hex>-<arch>-<first 16 hex of the file's sha256>.tar.gz: the runtime
# image as `docker save | gzip -n`, named by what it holds and by its own digest.
IMAGE_NAME_RE = re.compile(r"skald-runtime-v([0-9a-f]{12})-([A-Za-z0-9_]+)-([0-9a-f]{16})\.tar\.gz")

Manifest = dict[str, Any]
Note = Callable[[str], None]


class Refusal(Exception):
    """Why a release step refuses; `main` prints it and exits with `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def refuse(message: str) -> NoReturn:
    """Stop the subcommand with one line on stderr and exit status 1."""
    raise Refusal(message)


# --- shared pieces ------------------------------------------------------------------------


class PyzName(NamedTuple):
    """The parts of an artefact's file name; the manifest records os, arch and pyabi."""

    version: str
    os: str
    arch: str
    pyabi: str


def parse_pyz_name(name: str) -> PyzName | None:
    """The parts of NAME if it is skald-<version>-<os>-<arch>-<pyabi>.pyz, else None."""
    match = PYZ_NAME_RE.fullmatch(name)
    return PyzName(*match.groups()) if match else None


def sha256(path: Path) -> str:
    """The hex SHA-256 of a file, read in chunks (a pyz is tens of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(path: Path, manifest: Manifest) -> None:
    """manifest.json as both writers make it: UTF-8, indented, a final newline. PATH is
    written in place; callers give a temporary name or a staging directory."""
    with path.open("w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")


def load_manifest(directory: Path) -> Manifest:
    """DIRECTORY/manifest.json, refused unless it is a format 1 manifest."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        refuse(f"cannot read {directory}/manifest.json: {exc}")
    if not isinstance(manifest, dict) or manifest.get("format") != 1:
        refuse(f"{directory}/manifest.json is not a format 1 manifest")
    return manifest


def key_span(text: str, where: str) -> tuple[int, int] | None:
    """Where the first BEGIN..END PUBLIC KEY block is (both markers included)."""
    start = text.find(BEGIN)
    if start < 0:
        return None
    end = text.find(END, start)
    if end < 0:
        refuse(f"{where} has {BEGIN} but no {END} after it")
    return start, end + len(END)


# --- ci/package.sh --------------------------------------------------------------------------


def check_pyz_versions(version: str, pyzs: Sequence[Path]) -> None:
    """Each pyz carries __version__ VERSION: its file name alone could be a renamed build."""
    for pyz in pyzs:
        try:
            with zipfile.ZipFile(pyz) as z:
                init = z.read(PYZ_INIT).decode("utf-8")
        except (zipfile.BadZipFile, KeyError) as exc:
            refuse(f"{pyz.name} is not a Skald zipapp ({exc})")
        found = VERSION_LINE_RE.findall(init)
        if found != [version]:
            refuse(f"{pyz.name} carries __version__ {found}, not {version!r}")


def pyz_image_tag(pyz: Path) -> str:
    """The runtime image tag PYZ runs its sandboxes from (the digest of its Dockerfile)."""
    try:
        with zipfile.ZipFile(pyz) as z:
            data = z.read(PYZ_DOCKERFILE)
    except (zipfile.BadZipFile, KeyError) as exc:
        refuse(f"{pyz.name} carries no runtime Dockerfile ({exc})")
    return f"{IMAGE_REPOSITORY}:v{hashlib.sha256(data).hexdigest()[:12]}"


def image_file_name(tag: str, arch: str, digest: str) -> str:
    """The release file name of the runtime image TAG for ARCH whose bytes hash to DIGEST."""
    match = IMAGE_TAG_RE.fullmatch(tag)
    if match is None:
        refuse(f"{tag!r} is not a runtime image tag (skald-runtime:v<12 hex>)")
    return f"skald-runtime-v{match.group(1)}-{arch}-{digest[:16]}.tar.gz"


def check_image_tags(tag: str, pyzs: Sequence[Path]) -> None:
    """Every pyz of the release runs the image TAG: an image for another Dockerfile would be
    loaded and never used (and the pyz would build its own at the first command)."""
    for pyz in pyzs:
        wants = pyz_image_tag(pyz)
        if wants != tag:
            refuse(f"{pyz.name} runs the image {wants}, not {tag}")


def make_manifest(
    out: Path,
    version: str,
    channel: str,
    names: Sequence[str],
    images: Sequence[tuple[str, str, str]] = (),
) -> Manifest:
    """The manifest of the package in OUT: artefacts from their file names and the bytes
    already written there, the scripts by digest, and IMAGES ((file, tag, arch) of each
    runtime image file) when the release carries the runtime image."""
    artefacts = []
    for name in sorted(names):
        path = out / name
        parts = parse_pyz_name(name)
        if parts is None:
            refuse(f"{name} is not named skald-<version>-<os>-<arch>-<pyabi>.pyz")
        artefacts.append(
            {
                "file": name,
                "os": parts.os,
                "arch": parts.arch,
                "pyabi": parts.pyabi,
                "sha256": sha256(path),
                "size": path.stat().st_size,
            }
        )
    manifest: Manifest = {
        "format": 1,
        "version": version,
        "channel": channel,
        "min_python": "3.11",
        "published": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "artefacts": artefacts,
        "scripts": [{"file": s, "sha256": sha256(out / s)} for s in SCRIPTS],
    }
    if images:
        manifest["images"] = [
            {
                "file": name,
                "tag": tag,
                "arch": arch,
                "sha256": sha256(out / name),
                "size": (out / name).stat().st_size,
            }
            for name, tag, arch in sorted(images)
        ]
    return manifest


# --- ci/publish.sh --------------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """What publish.sh needs from a package that checks out."""

    version: str
    channel: str
    artefacts: list[str]


def check_package(directory: Path) -> Checked:
    """The files in DIRECTORY match its manifest.json (names, sizes, digests, .sha256 files,
    scripts), so what is published is exactly what was signed."""
    m = load_manifest(directory)
    version, channel = m.get("version"), m.get("channel")
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        refuse(f"manifest version {version!r} is not a normalised PEP 440 version")
    if channel not in CHANNELS:
        refuse(f"manifest channel {channel!r} is neither stable nor nightly")
    artefacts = m.get("artefacts")
    if not isinstance(artefacts, list) or not artefacts:
        refuse("the manifest lists no artefacts")
    names = []
    for a in artefacts:
        name = a.get("file") if isinstance(a, dict) else None
        parts = parse_pyz_name(name) if isinstance(name, str) else None
        if not isinstance(name, str) or parts is None or parts.version != version:
            refuse(f"artefact {name!r} is not named skald-{version}-<os>-<arch>-<pyabi>.pyz")
        if (a.get("os"), a.get("arch"), a.get("pyabi")) != (parts.os, parts.arch, parts.pyabi):
            refuse(f"os/arch/pyabi of {name} in the manifest do not match its name")
        check_file(directory, name, a)
        names.append(name)
    names += check_images(directory, m.get("images", []))
    if len(set(names)) != len(names):
        refuse("the manifest lists an artefact twice")
    scripts = m.get("scripts")
    listed = sorted(s.get("file") for s in scripts) if isinstance(scripts, list) else None
    if not isinstance(scripts, list) or listed != sorted(SCRIPTS):
        refuse(f"the manifest's scripts are {listed}, not {sorted(SCRIPTS)}")
    for s in scripts:
        path = directory / s["file"]
        if not path.is_file() or sha256(path) != s.get("sha256"):
            refuse(f"{path} is missing or does not match its sha256 in the manifest")
    return Checked(version, channel, names)


def check_file(directory: Path, name: str, entry: dict[str, Any], digest_in_name: str = "") -> None:
    """NAME in DIRECTORY is there with the size and sha256 its manifest ENTRY gives, and its
    NAME.sha256 file says the same; DIGEST_IN_NAME, where the name carries the start of the
    digest (runtime images), must begin it too."""
    path = directory / name
    if not path.is_file():
        refuse(f"{path} is missing")
    if path.stat().st_size != entry.get("size"):
        refuse(f"{name} is {path.stat().st_size} bytes, the manifest says {entry.get('size')}")
    digest = sha256(path)
    if digest != entry.get("sha256") or not digest.startswith(digest_in_name):
        where = " or its name" if digest_in_name else ""
        refuse(f"{name} does not match its sha256 in the manifest{where}")
    sha_file = directory / f"{name}.sha256"
    if not sha_file.is_file() or sha_file.read_text(encoding="ascii") != f"{digest}  {name}\n":
        refuse(f"{sha_file} is missing or does not match {name}")


def check_images(directory: Path, images: object) -> list[str]:
    """The runtime image files the manifest lists (optional) match their names, sizes,
    digests and .sha256 files; returns their names (publish.sh checks their .sig)."""
    if not isinstance(images, list):
        refuse("the manifest's images is not a list")
    names = []
    for a in images:
        name = a.get("file") if isinstance(a, dict) else None
        match = IMAGE_NAME_RE.fullmatch(name) if isinstance(name, str) else None
        if not isinstance(name, str) or match is None:
            refuse(f"image {name!r} is not named skald-runtime-v<tag>-<arch>-<sha256>.tar.gz")
        if a.get("tag") != f"{IMAGE_REPOSITORY}:v{match.group(1)}" or a.get("arch") != match.group(
            2
        ):
            refuse(f"tag/arch of {name} in the manifest do not match its name")
        check_file(directory, name, a, digest_in_name=match.group(3))
        names.append(name)
    return names


def embedded_key(path: Path) -> str | None:
    """The PEM public key block a script embeds, if any: publish.sh compares it with the
    release key so a release is never published that its own installer would reject."""
    text = path.read_text(encoding="utf-8")
    span = key_span(text, str(path))
    return text[span[0] : span[1]] if span else None


def stamp_key(directory: Path, pub: Path, note: Note) -> None:
    """Put PUB's key into the scripts in DIRECTORY (a test or mirror tree signed with its
    own key) and re-digest them in its manifest.json; the caller re-signs the manifest."""
    pem = pub.read_text(encoding="ascii").strip()
    m = load_manifest(directory)
    for s in m["scripts"]:
        path = directory / s["file"]
        text = path.read_text(encoding="utf-8")
        span = key_span(text, str(path))
        if span is None:
            note(f"note: {s['file']} embeds no public key; published unchanged")
        else:
            path.write_text(text[: span[0]] + pem + text[span[1] :], encoding="utf-8")
        s["sha256"] = sha256(path)
    write_manifest(directory / "manifest.json", m)


# --- ci/verify-version.sh -----------------------------------------------------------------

VersionKey = tuple[tuple[int, ...], tuple[int, int], int, tuple[int, int]]


def version_key(version: str) -> VersionKey:
    """A sort key giving the PEP 440 order without the `packaging` library (not installed
    where the scripts run): 0.2.0.dev1 < 0.2.0a1 < 0.2.0rc1 < 0.2.0 < 0.2.0.post1.
    Raises ValueError(version) for anything but a normalised version."""
    m = VERSION_RE.fullmatch(version)
    if not m:
        raise ValueError(version)
    release_s, phase, pre_n, post, dev = m.groups()
    release = [int(p) for p in release_s.split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()  # 1.0 == 1.0.0
    if phase:
        pre = ({"a": 0, "b": 1, "rc": 2}[phase], int(pre_n))
    elif dev is not None and post is None:
        pre = (-1, 0)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = (3, 0)  # a final release sorts after its pre-releases
    post_k = -1 if post is None else int(post)
    dev_k = (1, 0) if dev is None else (0, int(dev))  # a dev release before its final
    return (tuple(release), pre, post_k, dev_k)


def sort_versions(names: Sequence[str]) -> list[str]:
    """NAMES oldest first; publish.sh prunes the oldest nightlies with it."""
    bad = [n for n in names if not VERSION_RE.fullmatch(n)]
    if bad:
        refuse(f"not a version: {bad[0]}")
    return sorted(names, key=version_key)


# --- the command line ---------------------------------------------------------------------
# One handler a subcommand; its docstring is its line in --help.

Handler = Callable[[list[str], Note], int]


def _pyz_versions(args: list[str], _note: Note) -> int:
    """VERSION PYZ...: each PYZ carries __version__ VERSION."""
    check_pyz_versions(args[0], [Path(a) for a in args[1:]])
    return 0


def _manifest(args: list[str], _note: Note) -> int:
    """OUT VERSION CHANNEL DEST NAME... [--image FILE TAG ARCH]...: write the manifest of
    package OUT to DEST."""
    out, version, channel, dest, *rest = args
    names: list[str] = []
    images: list[tuple[str, str, str]] = []
    while rest:
        if rest[0] == "--image":
            if len(rest) < 4:
                refuse("--image needs FILE TAG ARCH")
            images.append((rest[1], rest[2], rest[3]))
            rest = rest[4:]
        else:
            names.append(rest.pop(0))
    write_manifest(Path(dest), make_manifest(Path(out), version, channel, names, images))
    return 0


def _image_tag(args: list[str], _note: Note) -> int:
    """TAG PYZ...: each PYZ runs the runtime image TAG."""
    check_image_tags(args[0], [Path(a) for a in args[1:]])
    return 0


def _image_name(args: list[str], _note: Note) -> int:
    """TAG ARCH FILE: print the release name of FILE, the image TAG saved for ARCH."""
    print(image_file_name(args[0], args[1], sha256(Path(args[2]))))
    return 0


def _check(args: list[str], _note: Note) -> int:
    """DIR: DIR matches its manifest; prints the version, the channel, the artefacts."""
    checked = check_package(Path(args[0]))
    print(checked.version)
    print(checked.channel)
    for name in checked.artefacts:
        print(name)
    return 0


def _embedded(args: list[str], _note: Note) -> int:
    """FILE: print the PEM public key block FILE embeds, if any."""
    block = embedded_key(Path(args[0]))
    if block is not None:
        print(block)
    return 0


def _stamp(args: list[str], note: Note) -> int:
    """DIR PUBFILE: embed PUBFILE's key in DIR's scripts, re-digest them in the manifest."""
    stamp_key(Path(args[0]), Path(args[1]), note)
    return 0


def _sort_versions(_args: list[str], _note: Note) -> int:
    """(versions on stdin): print them oldest first."""
    for name in sort_versions([line.strip() for line in sys.stdin if line.strip()]):
        print(name)
    return 0


def _newer(args: list[str], _note: Note) -> int:
    """CANDIDATE LATEST: exit 0 if CANDIDATE is newer, 1 if not, 2 if either is no version."""
    try:
        newer = version_key(args[0]) > version_key(args[1])
    except ValueError as exc:
        raise Refusal(f"not a version: {exc}", status=2) from None
    return 0 if newer else 1


# name: (the script whose name prefixes its messages, how many arguments at least, handler)
COMMANDS: dict[str, tuple[str, int, Handler]] = {
    "pyz-versions": ("package.sh", 2, _pyz_versions),
    "manifest": ("package.sh", 5, _manifest),
    "image-tag": ("package.sh", 2, _image_tag),
    "image-name": ("package.sh", 3, _image_name),
    "check": ("publish.sh", 1, _check),
    "embedded": ("publish.sh", 1, _embedded),
    "stamp": ("publish.sh", 2, _stamp),
    "sort-versions": ("verify-version.sh", 0, _sort_versions),
    "newer": ("verify-version.sh", 2, _newer),
}


def _help() -> str:
    lines = ["usage: python3 ci/release.py SUBCOMMAND ARG..."]
    for name, (caller, _, run) in COMMANDS.items():
        lines.append(f"  {name} {run.__doc__}  [ci/{caller}]")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run one subcommand; a Refusal becomes "<caller>: <message>" on stderr."""
    if argv and argv[0] in ("-h", "--help"):
        print(_help())
        return 0
    if not argv or argv[0] not in COMMANDS or len(argv) - 1 < COMMANDS[argv[0]][1]:
        print(_help(), file=sys.stderr)
        return 2
    caller, _, run = COMMANDS[argv[0]]

    def note(message: str) -> None:
        print(f"{caller}: {message}", file=sys.stderr)

    try:
        return run(argv[1:], note)
    except Refusal as exc:
        note(str(exc))
        return exc.status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
