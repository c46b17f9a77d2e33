#!/usr/bin/env bash
# Build the Skald zipapp: dist/skald-<version>-<platform>.pyz and its .sha256.
#
# Usage: ci/build.sh [--out DIR]
#
# The python that builds (and whose compiled wheels end up in the pyz) is $PYTHON,
# defaulting to the repo's .venv/bin/python when present, else python3. It needs shiv
# installed (it is in the `dev` extra). <platform> is <os>-<machine>-<abi>, e.g.
# linux-x86_64-cp311: the pyz only runs on a python with that ABI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/dist"

usage() {
    echo "usage: $0 [--out DIR]" >&2
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

if ! "$PYTHON" -c 'import shiv' 2>/dev/null; then
    echo "build.sh: shiv is not importable by $PYTHON; install the dev extra" \
        "(pip install -e '.[dev]') or set PYTHON" >&2
    exit 1
fi

# Version straight from the source, without importing the package.
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

# <os>-<machine>-<abi>; the ABI tag is the interpreter's (cp311, cp313t, ...).
ABI="$("$PYTHON" - <<'EOF'
import sys

impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name
flags = getattr(sys, "abiflags", "")
print(f"{impl}{sys.version_info[0]}{sys.version_info[1]}{flags}")
EOF
)"
OS="$(uname -s | tr '[:upper:]' '[:lower:]')"
PLATFORM="$OS-$(uname -m)-$ABI"
NAME="skald-$VERSION-$PLATFORM.pyz"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

STAGE=""
TMP_PYZ=""
TMP_SHA=""
cleanup() {
    [[ -n "$STAGE" ]] && rm -rf "$STAGE"
    [[ -n "$TMP_PYZ" ]] && rm -f "$TMP_PYZ"
    [[ -n "$TMP_SHA" ]] && rm -f "$TMP_SHA"
    return 0
}
trap cleanup EXIT

STAGE="$(mktemp -d "${TMPDIR:-/tmp}/skald-build.XXXXXX")"

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

# --- build ----------------------------------------------------------------------------
SHIV_OPTS=(
    --entry-point skald.cli:main
    --python '/usr/bin/env python3'
    --compressed
)
if "$PYTHON" -m shiv --help 2>/dev/null | grep -q -- '--reproducible'; then
    SHIV_OPTS+=(--reproducible)
fi

TMP_PYZ="$(mktemp "$OUT/.$NAME.XXXXXX")"
# shiv passes trailing arguments to `pip install --target ...`; -q keeps pip quiet while
# errors still reach the terminal (shiv echoes pip's merged output and fails on error).
# Everything but the final path goes to stderr, so callers can capture stdout.
"$PYTHON" -m shiv "${SHIV_OPTS[@]}" --output-file "$TMP_PYZ" \
    -q --no-warn-script-location "$STAGE" >&2
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
