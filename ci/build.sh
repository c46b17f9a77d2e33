#!/usr/bin/env bash
# Build the Skald zipapp: dist/skald-<version>-<platform>.pyz and its .sha256.
#
# Usage: ci/build.sh [--out DIR] [--version V] [--python-version X.Y]
#
#   --out DIR             where the pyz and its .sha256 go (default: dist/)
#   --version V           stamp V as __version__ in the built copy (the checkout is not
#                         touched); V is a normalised PEP 440 version, e.g. 0.2.0 or
#                         0.2.0.dev20261129. Default: __version__ from skald/__init__.py.
#   --python-version X.Y  cross-build for CPython X.Y (e.g. 3.13 from a 3.11 host): our own
#                         wheel is built first, then every dependency must come as a
#                         manylinux binary wheel for cpXY on this machine's architecture.
#
# The python that builds is $PYTHON, defaulting to the repo's .venv/bin/python when
# present, else python3. It needs shiv installed (it is in the `dev` extra). Without
# --python-version its own compiled wheels end up in the pyz. <platform> is
# <os>-<machine>-<abi>, e.g. linux-x86_64-cp311: the pyz only runs on a python with that
# ABI. Only the final path goes to stdout; everything else goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/dist"
STAMP_VERSION=""
TARGET_PYTHON=""

usage() {
    echo "usage: $0 [--out DIR] [--version V] [--python-version X.Y]" >&2
}

die() {
    echo "build.sh: $*" >&2
    exit 1
}

while (($#)); do
    case "$1" in
        --out)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            OUT="$2"
            shift 2
            ;;
        --out=*)
            OUT="${1#--out=}"
            shift
            ;;
        --version)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            STAMP_VERSION="$2"
            shift 2
            ;;
        --version=*)
            STAMP_VERSION="${1#--version=}"
            shift
            ;;
        --python-version)
            [[ $# -ge 2 ]] || { usage; exit 2; }
            TARGET_PYTHON="$2"
            shift 2
            ;;
        --python-version=*)
            TARGET_PYTHON="${1#--python-version=}"
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "build.sh: unknown argument: $1" >&2
            usage
            exit 2
            ;;
    esac
done

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then
        PYTHON="$ROOT/.venv/bin/python"
    else
        PYTHON="python3"
    fi
fi

# A normalised PEP 440 version (what pip writes into the wheel, unchanged): N(.N)*
# [{a|b|rc}N][.postN][.devN]. It becomes part of file and directory names.
VERSION_RE='^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$'
if [[ -n "$STAMP_VERSION" && ! "$STAMP_VERSION" =~ $VERSION_RE ]]; then
    die "--version $STAMP_VERSION is not a normalised PEP 440 version (e.g. 0.2.0, 0.2.0rc1, 0.2.0.dev20261129)"
fi
if [[ -n "$TARGET_PYTHON" && ! "$TARGET_PYTHON" =~ ^3\.[0-9]+$ ]]; then
    die "--python-version $TARGET_PYTHON is not a CPython 3 minor version like 3.13"
fi

if ! "$PYTHON" -c 'import shiv' 2>/dev/null; then
    echo "build.sh: shiv is not importable by $PYTHON; install the dev extra" \
        "(pip install -e '.[dev]') or set PYTHON" >&2
    exit 1
fi

# Version straight from the source, without importing the package.
if [[ -n "$STAMP_VERSION" ]]; then
    VERSION="$STAMP_VERSION"
else
    VERSION="$("$PYTHON" - "$ROOT/skald/__init__.py" <<'EOF'
import ast
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    tree = ast.parse(f.read())
for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
    ):
        print(ast.literal_eval(node.value))
        break
else:
    sys.exit("build.sh: no __version__ in skald/__init__.py")
EOF
)"
fi

# <os>-<machine>-<abi>; the ABI tag is the interpreter's (cp311, cp313t, ...), or cpXY
# for a cross-build.
if [[ -n "$TARGET_PYTHON" ]]; then
    ABI="cp${TARGET_PYTHON/./}"
else
    ABI="$("$PYTHON" - <<'EOF'
import sys

impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name
flags = getattr(sys, "abiflags", "")
print(f"{impl}{sys.version_info[0]}{sys.version_info[1]}{flags}")
EOF
)"
fi
OS="$(uname -s | tr '[:upper:]' '[:lower:]')"
ARCH="$(uname -m)"
PLATFORM="$OS-$ARCH-$ABI"
NAME="skald-$VERSION-$PLATFORM.pyz"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

TMPBASE=""
TMP_PYZ=""
TMP_SHA=""
cleanup() {
    [[ -n "$TMPBASE" ]] && rm -rf "$TMPBASE"
    [[ -n "$TMP_PYZ" ]] && rm -f "$TMP_PYZ"
    [[ -n "$TMP_SHA" ]] && rm -f "$TMP_SHA"
    return 0
}
trap cleanup EXIT

TMPBASE="$(mktemp -d "${TMPDIR:-/tmp}/skald-build.XXXXXX")"
STAGE="$TMPBASE/src"
mkdir "$STAGE"

# --- stage the source tree ------------------------------------------------------------
cp "$ROOT/pyproject.toml" "$STAGE/"
if [[ -f "$ROOT/README.md" ]]; then
    cp "$ROOT/README.md" "$STAGE/"
else
    : >"$STAGE/README.md"
fi

# The package, without bytecode caches and without any stale local skald/assets.
tar -C "$ROOT" \
    --exclude=__pycache__ --exclude='*.pyc' \
    --anchored --exclude=skald/assets \
    -cf - skald | tar -C "$STAGE" -xf -

# Top-level asset trees ship as package data under skald/assets/<name>/.
# docs/dev is developer-only and stays out.
mkdir -p "$STAGE/skald/assets"
ASSET_DIRS=()
for d in web agents docs installer; do
    [[ -d "$ROOT/$d" ]] && ASSET_DIRS+=("$d")
done
if ((${#ASSET_DIRS[@]})); then
    tar -C "$ROOT" \
        --exclude=__pycache__ --exclude='*.pyc' --exclude=node_modules \
        --anchored --exclude=docs/dev \
        -cf - "${ASSET_DIRS[@]}" | tar -C "$STAGE/skald/assets" -xf -
fi

# The stamped version replaces the one assignment of __version__ in the staged copy.
if [[ -n "$STAMP_VERSION" ]]; then
    "$PYTHON" - "$STAGE/skald/__init__.py" "$STAMP_VERSION" <<'EOF'
import re
import sys

path, version = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as f:
    text = f.read()
text, n = re.subn(
    r'^__version__ = "[^"\n]*"$', lambda _: f'__version__ = "{version}"', text, flags=re.M
)
if n != 1:
    sys.exit(f"build.sh: expected one __version__ = \"...\" line in skald/__init__.py, found {n}")
with open(path, "w", encoding="utf-8") as f:
    f.write(text)
EOF
fi

# --- build ----------------------------------------------------------------------------
SHIV_OPTS=(
    --entry-point skald.cli:main
    --python '/usr/bin/env python3'
    --compressed
)
if "$PYTHON" -m shiv --help 2>/dev/null | grep -q -- '--reproducible'; then
    SHIV_OPTS+=(--reproducible)
fi

# shiv passes trailing arguments to `pip install --target ...`; -q keeps pip quiet while
# errors still reach the terminal (shiv echoes pip's merged output and fails on error).
# Everything but the final path goes to stderr, so callers can capture stdout.
PIP_ARGS=(-q --no-warn-script-location)
if [[ -n "$TARGET_PYTHON" ]]; then
    # pip cannot build an sdist for another interpreter, and installs for a foreign
    # target only from wheels: build our own (pure-python) wheel here, then let pip
    # pick binary wheels for the target ABI for everything else.
    WHEELS="$TMPBASE/wheels"
    mkdir "$WHEELS"
    "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$WHEELS" "$STAGE" >&2
    WHEEL=("$WHEELS"/skald-*.whl)
    [[ ${#WHEEL[@]} -eq 1 && -f "${WHEEL[0]}" ]] || die "pip wheel did not produce one skald wheel in $WHEELS"
    # A pure-python dependency published only as an sdist (http_ece) has no wheel for
    # --only-binary to find: build the host's wheels of every dependency and offer the
    # pure (`-none-any`) ones, which fit any interpreter; binary ones still come for the target.
    PURE="$TMPBASE/pure"
    mkdir "$PURE"
    "$PYTHON" -m pip wheel -q --wheel-dir "$TMPBASE/deps" "${WHEEL[0]}" >&2
    find "$TMPBASE/deps" -name '*-none-any.whl' ! -name 'skald-*' -exec cp {} "$PURE/" \;
    PIP_ARGS+=(
        --find-links "$PURE"
        --only-binary=:all:
        --python-version "$TARGET_PYTHON"
        --implementation cp
        --abi "$ABI"
        --platform "manylinux_2_17_$ARCH"
        --platform "manylinux2014_$ARCH"
        --platform "manylinux_2_28_$ARCH"
        --platform "manylinux_2_36_$ARCH"
        "${WHEEL[0]}"
    )
else
    PIP_ARGS+=("$STAGE")
fi

TMP_PYZ="$(mktemp "$OUT/.$NAME.XXXXXX")"
"$PYTHON" -m shiv "${SHIV_OPTS[@]}" --output-file "$TMP_PYZ" "${PIP_ARGS[@]}" >&2
chmod 0755 "$TMP_PYZ"

# sha256sum format with the bare file name, so `cd dist && sha256sum -c <name>.sha256` works.
TMP_SHA="$(mktemp "$OUT/.$NAME.sha256.XXXXXX")"
HASH="$(sha256sum "$TMP_PYZ" | cut -d' ' -f1)"
printf '%s  %s\n' "$HASH" "$NAME" >"$TMP_SHA"
chmod 0644 "$TMP_SHA"

mv -f "$TMP_PYZ" "$OUT/$NAME"
TMP_PYZ=""
mv -f "$TMP_SHA" "$OUT/$NAME.sha256"
TMP_SHA=""

echo "$OUT/$NAME"
