#!/usr/bin/env bash
# Package built zipapps as one signed release (docs/dev/installer.md): the pyz files with
# their .sha256 and .sig, install.sh/update.sh/uninstall.sh, manifest.json and its .sig.
# ci/publish.sh lays a package out in a release tree.
#
# Usage: ci/package.sh --version V --channel stable|nightly [--key PATH] --out DIR
#                      [--scripts DIR] [--image TAG [--image-arch ARCH]] PYZ...
#
#   --version V        the release version; every PYZ must be named
#                      skald-V-<os>-<arch>-<pyabi>.pyz (as ci/build.sh names them) and
#                      carry __version__ = "V"
#   --channel C        stable or nightly (recorded in the manifest)
#   --key PATH         the Ed25519 signing key (PEM, PKCS#8); default $SKALD_SIGNING_KEY
#   --out DIR          the package directory: created if missing, must be empty
#   --scripts DIR      where install.sh, update.sh, uninstall.sh come from (default: the
#                      repository root)
#   --image TAG        carry the runtime image TAG (skald-runtime:v<12 hex>, the tag every
#                      PYZ runs: checked) as `docker save TAG | gzip -n`, named
#                      skald-runtime-v<12 hex>-<arch>-<16 hex of its sha256>.tar.gz, with
#                      its .sha256 and .sig and a manifest entry; install.sh and update.sh
#                      `docker load` it (verified first) instead of building it (needs Docker)
#   --image-arch ARCH  the machine the image is for, as `uname -m` says it (default: this one)
#
# Signatures are raw Ed25519 over the exact file bytes (`openssl pkeyutl -sign -rawin`).
# Every file is written under a temporary name (.<name>.tmp.XXXXXX) and renamed into
# place. The package directory's path is the only output on stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    echo "usage: $0 --version V --channel stable|nightly [--key PATH] --out DIR [--scripts DIR] [--image TAG [--image-arch ARCH]] PYZ..." >&2
}

die() {
    echo "package.sh: $*" >&2
    exit 1
}

# The JSON, zip and digest work (ci/release.py, stdlib only).
release_py() {
    python3 "$ROOT/ci/release.py" "$@"
}

VERSION=""
CHANNEL=""
KEY="${SKALD_SIGNING_KEY:-}"
OUT=""
SCRIPTS="$ROOT"
IMAGE=""
IMAGE_ARCH="$(uname -m)"
PYZS=()

need_arg() {
    [[ $# -ge 2 ]] || { echo "package.sh: $1 needs a value" >&2; usage; exit 2; }
}

while (($#)); do
    case "$1" in
        --version) need_arg "$@"; VERSION="$2"; shift 2 ;;
        --version=*) VERSION="${1#*=}"; shift ;;
        --channel) need_arg "$@"; CHANNEL="$2"; shift 2 ;;
        --channel=*) CHANNEL="${1#*=}"; shift ;;
        --key) need_arg "$@"; KEY="$2"; shift 2 ;;
        --key=*) KEY="${1#*=}"; shift ;;
        --out) need_arg "$@"; OUT="$2"; shift 2 ;;
        --out=*) OUT="${1#*=}"; shift ;;
        --scripts) need_arg "$@"; SCRIPTS="$2"; shift 2 ;;
        --scripts=*) SCRIPTS="${1#*=}"; shift ;;
        --image) need_arg "$@"; IMAGE="$2"; shift 2 ;;
        --image=*) IMAGE="${1#*=}"; shift ;;
        --image-arch) need_arg "$@"; IMAGE_ARCH="$2"; shift 2 ;;
        --image-arch=*) IMAGE_ARCH="${1#*=}"; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; PYZS+=("$@"); break ;;
        -*) echo "package.sh: unknown argument: $1" >&2; usage; exit 2 ;;
        *) PYZS+=("$1"); shift ;;
    esac
done

[[ -n "$VERSION" && -n "$CHANNEL" && -n "$OUT" ]] || { usage; exit 2; }
((${#PYZS[@]})) || die "no PYZ given"
VERSION_RE='^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$'
[[ "$VERSION" =~ $VERSION_RE ]] \
    || die "--version $VERSION is not a normalised PEP 440 version (e.g. 0.2.0, 0.2.0rc1, 0.2.0.dev20261129)"
[[ "$CHANNEL" == stable || "$CHANNEL" == nightly ]] \
    || die "--channel must be stable or nightly, not '$CHANNEL'"

# --- the signing key ------------------------------------------------------------------
[[ -n "$KEY" ]] || die "no signing key: pass --key PATH or set SKALD_SIGNING_KEY"
[[ -f "$KEY" && -r "$KEY" ]] || die "signing key $KEY is not a readable file"
KEY_KIND="$(openssl pkey -in "$KEY" -noout -text 2>/dev/null | head -n 1)" || true
[[ "$KEY_KIND" == "ED25519 Private-Key:" ]] \
    || die "$KEY is not an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519)"

# --- the inputs -----------------------------------------------------------------------
NAME_RE='^skald-([^-]+)-([a-z0-9]+)-([A-Za-z0-9_]+)-(cp[0-9]+[a-z]*)\.pyz$'
declare -A SEEN=()
NAMES=()
for pyz in "${PYZS[@]}"; do
    [[ -f "$pyz" ]] || die "$pyz is not a file"
    name="$(basename "$pyz")"
    [[ "$name" =~ $NAME_RE ]] || die "$name is not named skald-<version>-<os>-<arch>-<pyabi>.pyz"
    [[ "${BASH_REMATCH[1]}" == "$VERSION" ]] \
        || die "$name is version ${BASH_REMATCH[1]}, not --version $VERSION"
    [[ -z "${SEEN[$name]:-}" ]] || die "$name is given twice"
    SEEN[$name]=1
    NAMES+=("$name")
    # A .sha256 next to it (ci/build.sh writes one) must agree.
    if [[ -f "$pyz.sha256" ]]; then
        want="$(cut -d' ' -f1 <"$pyz.sha256")"
        have="$(sha256sum "$pyz" | cut -d' ' -f1)"
        [[ "$want" == "$have" ]] || die "$pyz does not match its $name.sha256"
    fi
done
for script in install.sh update.sh uninstall.sh; do
    [[ -f "$SCRIPTS/$script" ]] || die "$SCRIPTS/$script is missing"
done

# Each pyz must carry the version it is named for.
release_py pyz-versions "$VERSION" "${PYZS[@]}"
if [[ -n "$IMAGE" ]]; then
    [[ "$IMAGE_ARCH" =~ ^[A-Za-z0-9_]+$ ]] || die "--image-arch $IMAGE_ARCH is not a machine name"
    # The image must be the one the pyz files run, and be here to save.
    release_py image-tag "$IMAGE" "${PYZS[@]}"
    docker image inspect "$IMAGE" >/dev/null 2>&1 || die "the image $IMAGE is not in Docker here"
fi

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
[[ -z "$(ls -A "$OUT")" ]] || die "--out $OUT is not empty; give a new or empty directory"

# --- writing --------------------------------------------------------------------------
PENDING=()
WRITTEN=()
cleanup() {
    local rc=$? f
    for f in "${PENDING[@]}"; do
        rm -f -- "$f"
    done
    # A failed run leaves the directory as empty as it found it.
    if ((rc != 0)); then
        for f in "${WRITTEN[@]}"; do
            rm -f -- "$f"
        done
    fi
    return 0
}
trap cleanup EXIT

# tmp_for DEST: sets TMP to a new temporary file next to DEST (removed on exit unless it
# has been renamed into place by commit).
tmp_for() {
    TMP="$(mktemp "$(dirname "$1")/.$(basename "$1").tmp.XXXXXX")"
    PENDING+=("$TMP")
}

# commit MODE DEST: the last TMP becomes DEST.
commit() {
    chmod "$1" "$TMP"
    mv -f -- "$TMP" "$2"
    WRITTEN+=("$2")
}

PUB="$(openssl pkey -in "$KEY" -pubout)"

# sign FILE: writes FILE.sig and checks it against the key's public half.
sign() {
    tmp_for "$1.sig"
    openssl pkeyutl -sign -rawin -inkey "$KEY" -in "$1" -out "$TMP"
    [[ "$(stat -c %s "$TMP")" -eq 64 ]] || die "openssl did not write a 64-byte Ed25519 signature for $1"
    openssl pkeyutl -verify -pubin -inkey <(printf '%s\n' "$PUB") -rawin -in "$1" \
        -sigfile "$TMP" >/dev/null || die "the signature of $1 does not verify"
    commit 0644 "$1.sig"
}

for i in "${!PYZS[@]}"; do
    name="${NAMES[$i]}"
    tmp_for "$OUT/$name"
    cp -- "${PYZS[$i]}" "$TMP"
    commit 0755 "$OUT/$name"
    tmp_for "$OUT/$name.sha256"
    printf '%s  %s\n' "$(sha256sum "$OUT/$name" | cut -d' ' -f1)" "$name" >"$TMP"
    commit 0644 "$OUT/$name.sha256"
    sign "$OUT/$name"
done

IMAGE_ARGS=()
if [[ -n "$IMAGE" ]]; then
    # Saved under a temporary name, then renamed to the name its digest gives it.
    tmp_for "$OUT/skald-runtime.tar.gz"
    docker save "$IMAGE" | gzip -n >"$TMP"
    image_name="$(release_py image-name "$IMAGE" "$IMAGE_ARCH" "$TMP")"
    commit 0644 "$OUT/$image_name"
    tmp_for "$OUT/$image_name.sha256"
    printf '%s  %s\n' "$(sha256sum "$OUT/$image_name" | cut -d' ' -f1)" "$image_name" >"$TMP"
    commit 0644 "$OUT/$image_name.sha256"
    sign "$OUT/$image_name"
    IMAGE_ARGS=(--image "$image_name" "$IMAGE" "$IMAGE_ARCH")
fi

for script in install.sh update.sh uninstall.sh; do
    tmp_for "$OUT/$script"
    cp -- "$SCRIPTS/$script" "$TMP"
    commit 0755 "$OUT/$script"
done

# manifest.json: artefacts from the file names and the bytes just written.
tmp_for "$OUT/manifest.json"
release_py manifest "$OUT" "$VERSION" "$CHANNEL" "$TMP" "${NAMES[@]}" "${IMAGE_ARGS[@]}"
commit 0644 "$OUT/manifest.json"
sign "$OUT/manifest.json"

echo "$OUT"
