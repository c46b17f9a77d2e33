#!/usr/bin/env bash
# Publish a package from ci/package.sh into a release tree served over HTTP
# (docs/dev/installer.md): DIR/<channel dir>/<version>/..., then DIR/install.sh, then
# DIR/<channel dir>/LATEST, last.
#
# Usage: ci/publish.sh --to DIR [--stamp-key] [--key PATH] [--base-url URL] PACKAGE_DIR
#
#   --to DIR       the release tree (created if missing)
#   --stamp-key    for test and mirror trees signed with their own key: rewrite the public
#                  key embedded in the published install.sh/update.sh/uninstall.sh to the
#                  signing key's public half, then re-digest and re-sign the manifest.
#                  Needs the signing key (--key PATH or $SKALD_SIGNING_KEY).
#   --base-url URL where DIR is served from: written into the served DIR/install.sh as its
#                  default release server, so `curl -fsSL URL/install.sh | bash` needs no
#                  SKALD_RELEASES_URL (the copy inside the version directory is unchanged)
#   --key PATH     the signing key the package was made with (default
#                  $SKALD_SIGNING_KEY); without --stamp-key it is only checked
#
# Without --stamp-key the package must be signed with the release key
# (installer/release-key.pub) and its scripts must embed that key: a release is never
# published that its own installer would reject. Every signature and digest in the
# package is checked before anything is written, and a version already in the tree, or
# not newer than the channel's LATEST, is refused (ci/verify-version.sh).
#
# The version directory is assembled under a temporary name (.<version>.tmp.XXXXXX) next
# to its final place and renamed into place whole; install.sh and LATEST are each written
# to a temporary name and renamed. A stable publish always replaces DIR/install.sh; a
# nightly one writes it only when the tree has none. The nightly channel keeps its
# $NIGHTLY_KEEP newest versions and prunes the rest. The published version directory is
# the only output on stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELEASE_PUB="$ROOT/installer/release-key.pub"
NIGHTLY_KEEP=3
SCRIPTS=(install.sh update.sh uninstall.sh)

usage() {
    echo "usage: $0 --to DIR [--stamp-key] [--key PATH] [--base-url URL] PACKAGE_DIR" >&2
}

die() {
    echo "publish.sh: $*" >&2
    exit 1
}

TREE=""
STAMP=0
KEY="${SKALD_SIGNING_KEY:-}"
PKG=""
BASE_URL=""

while (($#)); do
    case "$1" in
        --to)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            TREE="$2"
            shift 2
            ;;
        --to=*) TREE="${1#*=}"; shift ;;
        --stamp-key) STAMP=1; shift ;;
        --key)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            KEY="$2"
            shift 2
            ;;
        --key=*) KEY="${1#*=}"; shift ;;
        --base-url)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            BASE_URL="$2"
            shift 2
            ;;
        --base-url=*) BASE_URL="${1#*=}"; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "publish.sh: unknown argument: $1" >&2; usage; exit 2 ;;
        *)
            [[ -z "$PKG" ]] || { echo "publish.sh: more than one PACKAGE_DIR" >&2; usage; exit 2; }
            PKG="$1"
            shift
            ;;
    esac
done
[[ -n "$TREE" && -n "$PKG" ]] || { usage; exit 2; }
[[ -d "$PKG" ]] || die "$PKG is not a directory"
if [[ -n "$BASE_URL" ]]; then
    # It ends up in a double-quoted shell assignment through sed: no quotes, $, backquote, backslash, | or &.
    url_re='^https?://[A-Za-z0-9._~:/?#@!+,;=%-]+$'
    [[ "$BASE_URL" =~ $url_re ]] \
        || die "--base-url must be an http(s) URL of plain characters, got: $BASE_URL"
    BASE_URL="${BASE_URL%/}"
fi
PKG="$(cd "$PKG" && pwd)"
[[ -f "$PKG/manifest.json" && -f "$PKG/manifest.json.sig" ]] \
    || die "$PKG has no manifest.json and manifest.json.sig; make it with ci/package.sh"

# The JSON and digest work is ci/release.py (stdlib only). Its subcommands used here:
#   check DIR              the files in DIR match manifest.json (sizes, digests, .sha256
#                          files); prints the version, the channel, then one artefact a line
#                          (the pyz files, then the runtime image file if the release has one)
#   embedded FILE          prints the PEM public key block embedded in FILE, if any
#   stamp DIR PUBFILE      replaces the embedded key block in DIR's scripts with PUBFILE and
#                          rewrites the script digests in DIR/manifest.json
release_py() {
    python3 "$ROOT/ci/release.py" "$@"
}

# verify_sig PUBFILE FILE: FILE.sig is FILE's signature by PUBFILE's key.
verify_sig() {
    [[ -f "$2.sig" ]] || die "$2.sig is missing"
    openssl pkeyutl -verify -pubin -inkey "$1" -rawin -in "$2" -sigfile "$2.sig" >/dev/null 2>&1
}

# --- which key the package must be signed with -----------------------------------------
WORK="$(mktemp -d "${TMPDIR:-/tmp}/skald-publish.XXXXXX")"
STAGE=""
PENDING=()
cleanup() {
    local f
    rm -rf -- "$WORK"
    [[ -z "$STAGE" ]] || rm -rf -- "$STAGE"
    for f in "${PENDING[@]}"; do
        rm -f -- "$f"
    done
    return 0
}
trap cleanup EXIT

if [[ -n "$KEY" ]]; then
    [[ -f "$KEY" && -r "$KEY" ]] || die "signing key $KEY is not a readable file"
    [[ "$(openssl pkey -in "$KEY" -noout -text 2>/dev/null | head -n 1)" == "ED25519 Private-Key:" ]] \
        || die "$KEY is not an Ed25519 private key in PEM"
    openssl pkey -in "$KEY" -pubout -out "$WORK/signing.pub"
fi
[[ -f "$RELEASE_PUB" ]] || die "$RELEASE_PUB is missing"
if ((STAMP)); then
    [[ -n "$KEY" ]] || die "--stamp-key needs the signing key: pass --key PATH or set SKALD_SIGNING_KEY"
    PUB="$WORK/signing.pub"
    WHOSE="the signing key $KEY"
else
    PUB="$RELEASE_PUB"
    WHOSE="the release key (installer/release-key.pub)"
    if [[ -n "$KEY" ]] && ! cmp -s "$WORK/signing.pub" "$RELEASE_PUB"; then
        die "the signing key $KEY is not the release key (installer/release-key.pub); the" \
            "published installer would reject this release (use --stamp-key for a test or mirror tree)"
    fi
fi

# --- check the package ----------------------------------------------------------------
verify_sig "$PUB" "$PKG/manifest.json" \
    || die "$PKG/manifest.json is not signed with $WHOSE; the published installer would" \
        "reject it (a test or mirror tree signed with its own key is published with --stamp-key)"
mapfile -t INFO < <(release_py check "$PKG" || echo "!failed")
[[ "${INFO[-1]}" != "!failed" ]] || exit 1
VERSION="${INFO[0]}"
CHANNEL="${INFO[1]}"
ARTEFACTS=("${INFO[@]:2}")
for name in "${ARTEFACTS[@]}"; do
    verify_sig "$PUB" "$PKG/$name" || die "$PKG/$name.sig is not a signature of it by $WHOSE"
done
if ((!STAMP)); then
    want="$(<"$RELEASE_PUB")"
    for script in "${SCRIPTS[@]}"; do
        have="$(release_py embedded "$PKG/$script")"
        if [[ -n "$have" && "$have" != "$want" ]]; then
            die "$PKG/$script embeds a public key other than installer/release-key.pub"
        fi
    done
fi

case "$CHANNEL" in
    stable) CHANNEL_DIR="releases" ;;
    nightly) CHANNEL_DIR="nightly" ;;
esac
mkdir -p "$TREE/$CHANNEL_DIR"
TREE="$(cd "$TREE" && pwd)"
CH="$TREE/$CHANNEL_DIR"
"$ROOT/ci/verify-version.sh" --builds-dir "$TREE" --channel "$CHANNEL" "$VERSION"

# --- the version directory, assembled under a temporary name ----------------------------
STAGE="$(mktemp -d "$CH/.$VERSION.tmp.XXXXXX")"
for name in "${ARTEFACTS[@]}"; do
    cp -- "$PKG/$name" "$PKG/$name.sha256" "$PKG/$name.sig" "$STAGE/"
    case "$name" in
        *.pyz) chmod 0755 "$STAGE/$name" ;;
        *) chmod 0644 "$STAGE/$name" ;; # the runtime image (docker save | gzip)
    esac
    chmod 0644 "$STAGE/$name.sha256" "$STAGE/$name.sig"
done
for script in "${SCRIPTS[@]}"; do
    cp -- "$PKG/$script" "$STAGE/"
    chmod 0755 "$STAGE/$script"
done
cp -- "$PKG/manifest.json" "$STAGE/"
if ((STAMP)); then
    release_py stamp "$STAGE" "$PUB"
    openssl pkeyutl -sign -rawin -inkey "$KEY" -in "$STAGE/manifest.json" -out "$STAGE/manifest.json.sig"
else
    cp -- "$PKG/manifest.json.sig" "$STAGE/"
fi
chmod 0644 "$STAGE/manifest.json" "$STAGE/manifest.json.sig"
chmod 0755 "$STAGE"
# What readers will fetch must check out before it gets its name.
verify_sig "$PUB" "$STAGE/manifest.json" || die "the staged manifest.json does not verify"
release_py check "$STAGE" >/dev/null

mv -T -- "$STAGE" "$CH/$VERSION" || die "could not move the staged $VERSION into $CH"
STAGE=""

# put SRC DEST MODE: copy SRC to a temporary name next to DEST, then rename it to DEST.
put() {
    local tmp
    tmp="$(mktemp "$(dirname "$2")/.$(basename "$2").tmp.XXXXXX")"
    PENDING+=("$tmp")
    cp -- "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f -- "$tmp" "$2"
}

if [[ "$CHANNEL" == stable || ! -e "$TREE/install.sh" ]]; then
    served="$CH/$VERSION/install.sh"
    if [[ -n "$BASE_URL" ]]; then
        grep -q '^DEFAULT_RELEASES_URL=""$' "$served" \
            || die "install.sh has no empty DEFAULT_RELEASES_URL line to stamp the base URL into"
        sed "s|^DEFAULT_RELEASES_URL=\"\"\$|DEFAULT_RELEASES_URL=\"$BASE_URL\"|" "$served" >"$WORK/install.sh"
        served="$WORK/install.sh"
    fi
    put "$served" "$TREE/install.sh" 0755
fi
printf '%s\n' "$VERSION" >"$WORK/LATEST"
put "$WORK/LATEST" "$CH/LATEST" 0644

# --- prune old nightlies --------------------------------------------------------------
if [[ "$CHANNEL" == nightly ]]; then
    mapfile -t ALL < <(
        find "$CH" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
            -regex '.*/[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?' \
            -printf '%f\n' | "$ROOT/ci/verify-version.sh" --sort
    )
    for ((i = 0; i < ${#ALL[@]} - NIGHTLY_KEEP; i++)); do
        old="${ALL[$i]}"
        [[ "$old" != "$VERSION" ]] || continue
        # Out of sight first (one rename), then deleted.
        gone="$(mktemp -d "$CH/.$old.tmp.XXXXXX")"
        mv -T -- "$CH/$old" "$gone/$old"
        rm -rf -- "$gone"
        echo "publish.sh: pruned nightly $old" >&2
    done
fi

echo "publish.sh: published $VERSION ($CHANNEL) to $TREE" >&2
echo "$CH/$VERSION"
