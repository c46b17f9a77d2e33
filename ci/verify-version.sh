#!/usr/bin/env bash
# Check that VERSION may be published to a release tree (docs/dev/installer.md): it is not
# there yet (a published version is never overwritten) and it is newer than the channel's
# LATEST. Exits 0 quietly when it may be published, non-zero with one line on stderr when
# it may not.
#
# Usage: ci/verify-version.sh --builds-dir DIR [--channel stable|nightly] VERSION
#        ci/verify-version.sh --sort          version names on stdin, printed oldest first
#
#   --builds-dir DIR   the release tree (what `ci/publish.sh --to DIR` writes)
#   --channel C        stable (DIR/releases, the default) or nightly (DIR/nightly)
#   --sort             print the versions read from stdin (one a line) in version order,
#                      oldest first; ci/publish.sh uses it to prune old nightlies
#
# Versions are normalised PEP 440 versions, N(.N)*[{a|b|rc}N][.postN][.devN], ordered the
# PEP 440 way without the `packaging` library: 0.2.0.dev1 < 0.2.0a1 < 0.2.0rc1 < 0.2.0
# < 0.2.0.post1 < 0.2.1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    echo "usage: $0 --builds-dir DIR [--channel stable|nightly] VERSION" >&2
    echo "       $0 --sort    (versions on stdin, printed oldest first)" >&2
}

die() {
    echo "verify-version.sh: $*" >&2
    exit 1
}

# The version order (ci/release.py, stdlib only), shared by both modes: `version_tool
# sort-versions` (versions on stdin) or `version_tool newer CANDIDATE LATEST` (exit 0 when
# CANDIDATE > LATEST, 1 when not, 2 when either is not a version).
version_tool() {
    python3 "$ROOT/ci/release.py" "$@"
}

VERSION_RE='^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$'
BUILDS=""
CHANNEL="stable"
VERSION=""
SORT=0

while (($#)); do
    case "$1" in
        --builds-dir)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            BUILDS="$2"
            shift 2
            ;;
        --builds-dir=*)
            BUILDS="${1#--builds-dir=}"
            shift
            ;;
        --channel)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            CHANNEL="$2"
            shift 2
            ;;
        --channel=*)
            CHANNEL="${1#--channel=}"
            shift
            ;;
        --sort)
            SORT=1
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        -*)
            echo "verify-version.sh: unknown argument: $1" >&2
            usage
            exit 2
            ;;
        *)
            [[ -z "$VERSION" ]] || { echo "verify-version.sh: more than one VERSION" >&2; usage; exit 2; }
            VERSION="$1"
            shift
            ;;
    esac
done

if ((SORT)); then
    [[ -z "$BUILDS" && -z "$VERSION" ]] || { usage; exit 2; }
    version_tool sort-versions
    exit 0
fi

[[ -n "$BUILDS" && -n "$VERSION" ]] || { usage; exit 2; }
case "$CHANNEL" in
    stable) CHANNEL_DIR="releases" ;;
    nightly) CHANNEL_DIR="nightly" ;;
    *) die "--channel must be stable or nightly, not '$CHANNEL'" ;;
esac
[[ "$VERSION" =~ $VERSION_RE ]] \
    || die "'$VERSION' is not a normalised PEP 440 version (e.g. 0.2.0, 0.2.0rc1, 0.2.0.dev20261129)"
[[ -d "$BUILDS" ]] || die "--builds-dir $BUILDS is not a directory"

TARGET="$BUILDS/$CHANNEL_DIR/$VERSION"
if [[ -e "$TARGET" || -L "$TARGET" ]]; then
    die "$VERSION is already published ($TARGET exists); a published version is never overwritten"
fi

LATEST_FILE="$BUILDS/$CHANNEL_DIR/LATEST"
if [[ -f "$LATEST_FILE" ]]; then
    LATEST="$(head -n 1 "$LATEST_FILE" | tr -d '[:space:]')"
    [[ -n "$LATEST" ]] || die "$LATEST_FILE is empty"
    rc=0
    version_tool newer "$VERSION" "$LATEST" || rc=$?
    case "$rc" in
        0) ;;
        1) die "$VERSION is not newer than the $CHANNEL channel's LATEST $LATEST ($LATEST_FILE)" ;;
        *) die "cannot compare $VERSION with LATEST '$LATEST' in $LATEST_FILE" ;;
    esac
fi
