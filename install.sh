#!/bin/sh
# Skald installer: curl -fsSL <base>/install.sh | bash
#
# One script for the three lifecycle jobs, so the download, verification, unit and linger
# logic exists once: install (default), --update (what $SKALD_HOME/update.sh runs) and
# --uninstall (what $SKALD_HOME/uninstall.sh runs). Run with --help for the options.
#
# Environment: SKALD_HOME (install root, default ~/.local/share/skald), SKALD_RELEASES_URL
# (base URL of the release tree), SKALD_CHANNEL (stable|nightly), SKALD_PYTHON (the python3
# to use), SKALD_PORT (web port for a new install).
#
# Everything runs inside functions and `main` is called on the last line: under
# `curl | bash` the shell reads this script from stdin, so nothing may run (or read stdin)
# before the whole text has been read.
set -eu

# The release signing key (installer/release-key.pub; ci/publish.sh --stamp-key rewrites
# this block for mirrors and tests that sign with their own key).
RELEASE_KEY_PEM='-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEANB3lfY8XIZwMOZL0juxTxVB8jzIA5BNFEPpZkb6q4Sk=
-----END PUBLIC KEY-----'

# Where this script was published (ci/publish.sh --base-url stamps it); empty in a checkout.
DEFAULT_RELEASES_URL=""

UNIT_NAME=skald.service
KEEP_RELEASES=3
KEEP_SNAPSHOTS=3

# --- messages ---------------------------------------------------------------------------

PROG=skald-install
say() { printf '%s\n' "$*"; }
step() { printf '==> %s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    exit 1
}

# Test hook: SIGKILL ourselves on reaching a named step, to prove no step leaves the box
# without a working `current` (tests/test_installer_e2e.py).
checkpoint() {
    if [ -n "${JOURNAL:-}" ] && [ -f "$JOURNAL" ]; then
        journal_set step "$1"
    fi
    if [ "${SKALD_TEST_KILL_AT:-}" = "$1" ]; then
        kill -9 $$
    fi
}

has_tty() {
    # A terminal we can talk to even when stdin is the script itself (curl | bash).
    (: </dev/tty) 2>/dev/null
}

ask_yes() { # ask_yes QUESTION: true only on an explicit yes from a terminal
    has_tty || return 1
    printf '%s [y/N] ' "$1" >/dev/tty
    read -r answer </dev/tty || return 1
    case "$answer" in y | Y | yes | YES) return 0 ;; *) return 1 ;; esac
}

# shell_quote VALUE: VALUE as one single-quoted word.
shell_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# --- the machine ------------------------------------------------------------------------

detect_platform() {
    OS=$(uname -s | tr '[:upper:]' '[:lower:]')
    ARCH=$(uname -m)
    [ "$OS" = linux ] || die "Skald runs on Linux; this is $OS"
}

# PY: an absolute path to a python3 >= 3.11; PYABI: its ABI tag (cp311, cp313, ...).
find_python() {
    for candidate in ${SKALD_PYTHON:-} python3 python3.13 python3.12 python3.11; do
        path=$(command -v "$candidate" 2>/dev/null) || continue
        if "$path" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            PY=$path
            PYABI=$("$PY" -c 'import sys; print("cp%d%d%s" % (sys.version_info[0], sys.version_info[1], sys.abiflags))')
            PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
            return 0
        fi
    done
    die "Skald needs Python 3.11 or newer as python3 (Debian/Ubuntu: sudo apt-get install python3); set SKALD_PYTHON to use another interpreter"
}

check_docker() {
    if ! command -v docker >/dev/null 2>&1; then
        say "Docker is not installed. Skald runs without it, but the assistant then has no sandbox to run commands in."
        if command -v apt-get >/dev/null 2>&1 && ask_yes "Install the distribution's docker.io package now (uses sudo)?"; then
            # shellcheck disable=SC2024 # the terminal is for sudo's password prompt
            sudo apt-get install -y docker.io </dev/tty || warn "installing docker.io failed; Skald continues without a sandbox"
            # shellcheck disable=SC2024
            sudo usermod -aG docker "$(id -un)" </dev/tty || true
            say "Added $(id -un) to the docker group; it takes effect after you log out and in (or reboot)."
        else
            say "  To add it later (Debian/Ubuntu): sudo apt-get install docker.io && sudo usermod -aG docker $(id -un)"
        fi
        return 0
    fi
    if docker info >/dev/null 2>&1; then
        say "Docker: reachable"
        DOCKER_OK=yes
        return 0
    fi
    if [ -S /var/run/docker.sock ] && [ ! -w /var/run/docker.sock ]; then
        say "Docker is installed but $(id -un) may not use it. Add the account to the docker group:"
        say "  sudo usermod -aG docker $(id -un)   (then log out and in, or reboot)"
    elif [ -d /run/systemd/system ]; then
        say "Docker is installed but not running: sudo systemctl enable --now docker"
    else
        say "Docker is installed but not running: sudo service docker start"
    fi
}

# The sandboxes' runtime image, built now rather than at a member's first command: one
# progress line (step, time, estimate), Docker's whole output in a log file. Skipped
# without Docker or when it was loaded from the release (load_image); a failure is not
# fatal: `skald doctor` names the fix.
build_sandbox_image() {
    [ "${DOCKER_OK:-no}" = yes ] || return 0
    [ "${IMAGE_LOADED:-no}" = no ] || return 0
    build_log=$SKALD_HOME/image-build.log
    step "the sandbox image (5 to 15 minutes the first time; Docker's whole output: $build_log)"
    if ! "$SKALD_HOME/bin/skald" image build --if-missing --log "$build_log" </dev/null; then
        warn "the sandbox image could not be built (see $build_log); Skald runs, but commands wait for it. Fix: $SKALD_HOME/bin/skald image build"
    fi
}

# `skald` on the operator's PATH: a link in ~/.local/bin, made even when that folder is
# not there yet (a fresh Debian account): Debian's ~/.profile puts it on the PATH at the
# next login once it exists, so then the operator is told to log in again. A file there
# that is not our link is left alone.
link_on_path() {
    bindir=$HOME/.local/bin
    link=$bindir/skald
    PATH_HINT=
    if [ -e "$link" ] && [ ! -L "$link" ]; then
        PATH_HINT="$link exists and is not the installer's; Skald's command is $SKALD_HOME/bin/skald"
        return 0
    fi
    mkdir -p "$bindir"
    ln -sfn "$SKALD_HOME/bin/skald" "$link"
    case ":$PATH:" in
        *":$bindir:"*)
            say "linked $link -> $SKALD_HOME/bin/skald (type: skald doctor)"
            return 0
            ;;
    esac
    if grep -qs '\.local/bin' "$HOME/.profile"; then
        PATH_HINT="'skald' is in $bindir, which your ~/.profile puts on the PATH at login: log in again (or run: . ~/.profile), then type: skald doctor"
    else
        PATH_HINT="'skald' is in $bindir, which is not on your PATH: echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >>~/.profile, then log in again"
    fi
}

unlink_from_path() {
    link=$HOME/.local/bin/skald
    if [ -L "$link" ] && [ "$(readlink "$link")" = "$SKALD_HOME/bin/skald" ]; then
        rm -f "$link"
    fi
}

# --- the install root -------------------------------------------------------------------

set_paths() {
    SKALD_HOME=${SKALD_HOME:-$HOME/.local/share/skald}
    case "$SKALD_HOME" in /*) ;; *) SKALD_HOME=$(pwd)/$SKALD_HOME ;; esac
    export SKALD_HOME
    DATA=$SKALD_HOME/data
    SHIV_ROOT=$DATA/cache/shiv
    export SHIV_ROOT
    STAGING=$SKALD_HOME/staging
    JOURNAL=$SKALD_HOME/.update-journal
    ENV_FILE=$SKALD_HOME/installer.env
    UNIT_DIR=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user
    UNIT_FILE=$UNIT_DIR/$UNIT_NAME
}

# installer.env holds what later runs must repeat: where releases come from, which
# channel, which python, and whether we turned linger on (only then may uninstall turn it off).
load_env_file() {
    [ -f "$ENV_FILE" ] || return 0
    while IFS='=' read -r key value; do
        case "$key" in
            SKALD_RELEASES_URL) SAVED_URL=$value ;;
            SKALD_CHANNEL) SAVED_CHANNEL=$value ;;
            SKALD_PYTHON) SAVED_PYTHON=$value ;;
            SKALD_LINGER_BY_INSTALLER) LINGER_BY_INSTALLER=$value ;;
            SKALD_SOURCE) SAVED_SOURCE=$value ;;
        esac
    done <"$ENV_FILE"
}

write_env_file() {
    tmp=$ENV_FILE.tmp.$$
    {
        printf 'SKALD_RELEASES_URL=%s\n' "${RELEASES_URL:-}"
        printf 'SKALD_CHANNEL=%s\n' "$CHANNEL"
        printf 'SKALD_PYTHON=%s\n' "$PY"
        printf 'SKALD_LINGER_BY_INSTALLER=%s\n' "${LINGER_BY_INSTALLER:-no}"
        # The checkout an --from-source install was built from: `skald doctor` points its
        # repairs there (update.sh needs a release server, which such an install lacks).
        printf 'SKALD_SOURCE=%s\n' "${SOURCE_DIR:-${SAVED_SOURCE:-}}"
    } >"$tmp"
    mv -f "$tmp" "$ENV_FILE"
}

make_dirs() {
    mkdir -p "$SKALD_HOME/releases" "$SKALD_HOME/bin" "$SKALD_HOME/libexec"
    # The data directory is private to this account (skald tightens it again at start).
    (umask 077 && mkdir -p "$DATA/cache/shiv" "$DATA/backups")
    chmod 700 "$DATA"
    rm -rf "$STAGING"
    mkdir -p "$STAGING"
}

current_version() {
    target=$(readlink "$SKALD_HOME/current" 2>/dev/null) || return 1
    basename "$target"
}

# Atomic symlink switch: a reader sees the old link or the new one, never none.
switch_current() {
    "$PY" -c 'import os, sys
link, target = sys.argv[1], sys.argv[2]
tmp = link + ".tmp"
if os.path.lexists(tmp):
    os.unlink(tmp)
os.symlink(target, tmp)
os.replace(tmp, link)' "$SKALD_HOME/current" "releases/$1"
}

# replace_file SRC DEST MODE: copy to a temp name beside DEST, then rename (a running
# shell keeps reading the old inode, so even a script that is executing can be replaced).
replace_file() {
    tmp=$(dirname "$2")/.$(basename "$2").tmp.$$
    cp "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

write_wrapper() {
    tmp=$SKALD_HOME/bin/.skald.tmp.$$
    cat >"$tmp" <<EOF
#!/bin/sh
# Written by the Skald installer: runs the current release with this install's settings.
SKALD_HOME=$(shell_quote "$SKALD_HOME")
export SKALD_HOME
SHIV_ROOT=\${SHIV_ROOT:-\$SKALD_HOME/data/cache/shiv}
export SHIV_ROOT
exec $(shell_quote "$PY") "\$SKALD_HOME/current/skald.pyz" "\$@"
EOF
    chmod 755 "$tmp"
    mv -f "$tmp" "$SKALD_HOME/bin/skald"
}

# Copy the lifecycle scripts of the installed release into the install root.
install_scripts() { # install_scripts DIR (holding install.sh, update.sh, uninstall.sh)
    replace_file "$1/install.sh" "$SKALD_HOME/libexec/install.sh" 755
    replace_file "$1/update.sh" "$SKALD_HOME/update.sh" 755
    replace_file "$1/uninstall.sh" "$SKALD_HOME/uninstall.sh" 755
}

# --- downloading and verifying ------------------------------------------------------------

fetch() { # fetch URL DEST
    curl -fsSL --retry 3 --connect-timeout 15 -o "$2" "$1" || die "download failed: $1"
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        "$PY" -c 'import hashlib, sys; print(hashlib.file_digest(open(sys.argv[1], "rb"), "sha256").hexdigest())' "$1"
    fi
}

# verify_signature FILE SIG: Ed25519 over the file's bytes with the release key.
verify_signature() {
    key=$STAGING/release-key.pem
    printf '%s\n' "$RELEASE_KEY_PEM" >"$key"
    if command -v openssl >/dev/null 2>&1 && openssl version 2>/dev/null | grep -q '^OpenSSL [3-9]'; then
        if openssl pkeyutl -verify -pubin -inkey "$key" -rawin -in "$1" -sigfile "$2" >/dev/null 2>&1; then
            return 0
        fi
        die "the signature of $(basename "$1") does not match the Skald release key: refusing it (the download was altered or corrupted)"
    fi
    if "$PY" -c 'import cryptography' 2>/dev/null; then
        if "$PY" - "$key" "$1" "$2" <<'EOF'; then
import sys
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

key = load_pem_public_key(open(sys.argv[1], "rb").read())
try:
    key.verify(open(sys.argv[3], "rb").read(), open(sys.argv[2], "rb").read())
except InvalidSignature:
    sys.exit(1)
EOF
            return 0
        fi
        die "the signature of $(basename "$1") does not match the Skald release key: refusing it (the download was altered or corrupted)"
    fi
    if [ "$SKIP_SIGNATURE" = yes ]; then
        warn "not checking the signature of $(basename "$1") (--insecure-skip-signature)"
        return 0
    fi
    die "cannot check signatures: install OpenSSL 3 (Debian/Ubuntu: sudo apt-get install openssl) or python3-cryptography, or pass --insecure-skip-signature"
}

channel_dir() {
    case "$CHANNEL" in
        stable) echo releases ;;
        nightly) echo nightly ;;
        *) die "unknown channel '$CHANNEL' (stable or nightly)" ;;
    esac
}

# resolve_release: sets NEW_VERSION, RELEASE_BASE and ARTEFACT (+ ARTEFACT_SHA) from the
# channel's signed manifest, picking the build for this OS, machine and python.
resolve_release() {
    [ -n "$RELEASES_URL" ] || die "no release server: set SKALD_RELEASES_URL to the base URL of a Skald release tree"
    dir=$(channel_dir)
    fetch "$RELEASES_URL/$dir/LATEST" "$STAGING/LATEST"
    NEW_VERSION=$(tr -d ' \r\n' <"$STAGING/LATEST")
    case "$NEW_VERSION" in
        '' | *[!A-Za-z0-9.+_-]*) die "the release server's $dir/LATEST is not a version: '$NEW_VERSION'" ;;
    esac
    RELEASE_BASE=$RELEASES_URL/$dir/$NEW_VERSION
    fetch "$RELEASE_BASE/manifest.json" "$STAGING/manifest.json"
    fetch "$RELEASE_BASE/manifest.json.sig" "$STAGING/manifest.json.sig"
    verify_signature "$STAGING/manifest.json" "$STAGING/manifest.json.sig"
    picked=$("$PY" - "$STAGING/manifest.json" "$NEW_VERSION" "$OS" "$ARCH" "$PYABI" "$PYVER" <<'EOF'
import json, sys

path, version, os_name, arch, abi, pyver = sys.argv[1:]
m = json.load(open(path, encoding="utf-8"))
if m.get("version") != version:
    sys.exit(f"the manifest is for {m.get('version')!r}, not {version!r}")
need = tuple(int(x) for x in str(m.get("min_python", "3.11")).split("."))
if tuple(int(x) for x in pyver.split(".")) < need:
    sys.exit(f"Skald {version} needs Python {m['min_python']} or newer; this is {pyver}")
builds = m.get("artefacts", [])
for a in builds:
    if (a["os"], a["arch"], a["pyabi"]) == (os_name, arch, abi):
        print(a["file"], a["sha256"])
        break
else:
    have = ", ".join(sorted(f"{a['os']}-{a['arch']}-{a['pyabi']}" for a in builds)) or "none"
    sys.exit(
        f"Skald {version} has no build for {os_name}-{arch} with Python {pyver} ({abi}); "
        f"builds: {have}. Install one of those Pythons (set SKALD_PYTHON) or use --from-source"
    )
for s in m.get("scripts", []):
    print(s["file"], s["sha256"])
# The sandboxes' runtime image for this machine, when the release carries it.
for i in m.get("images", []):
    if i.get("arch") == arch:
        print("@image", i["file"], i["sha256"], i["tag"])
        break
EOF
) || die "cannot use this release"
    ARTEFACT=$(printf '%s\n' "$picked" | sed -n 1p | cut -d' ' -f1)
    ARTEFACT_SHA=$(printf '%s\n' "$picked" | sed -n 1p | cut -d' ' -f2)
    printf '%s\n' "$picked" | sed 1d | grep -v '^@image ' >"$STAGING/scripts.sha256" || true
    image=$(printf '%s\n' "$picked" | sed -n 's/^@image //p')
    IMAGE_FILE=$(printf '%s\n' "$image" | cut -d' ' -f1)
    IMAGE_SHA=$(printf '%s\n' "$image" | cut -d' ' -f2)
    IMAGE_TAG=$(printf '%s\n' "$image" | cut -d' ' -f3)
    case "$IMAGE_FILE" in
        '' | skald-runtime-*.tar.gz) ;;
        *) die "the release's image file name is not one the installer takes: '$IMAGE_FILE'" ;;
    esac
}

# Download the picked build and the release's scripts into staging and verify them all.
download_release() {
    download_artefact
    download_scripts
}

download_artefact() {
    fetch "$RELEASE_BASE/$ARTEFACT" "$STAGING/$ARTEFACT"
    fetch "$RELEASE_BASE/$ARTEFACT.sig" "$STAGING/$ARTEFACT.sig"
    fetch "$RELEASE_BASE/$ARTEFACT.sha256" "$STAGING/$ARTEFACT.sha256"
    checkpoint verify
    got=$(sha256_of "$STAGING/$ARTEFACT")
    listed=$(cut -d' ' -f1 <"$STAGING/$ARTEFACT.sha256")
    if [ "$got" != "$ARTEFACT_SHA" ] || [ "$got" != "$listed" ]; then
        die "$ARTEFACT is corrupted or was altered (sha256 $got, release says $ARTEFACT_SHA): refusing it"
    fi
    verify_signature "$STAGING/$ARTEFACT" "$STAGING/$ARTEFACT.sig"
    say "verified $ARTEFACT (sha256 and signature)"
}

# The runtime image from the release (docker save | gzip), fetched only when Docker is
# reachable and the image is not here yet, and verified like the pyz before anything
# installs or loads it; a tampered one is refused and deleted at once.
download_image() {
    IMAGE_STAGED=no
    [ -n "${IMAGE_FILE:-}" ] || return 0
    [ "${DOCKER_OK:-no}" = yes ] || return 0
    if docker image inspect "$IMAGE_TAG" >/dev/null 2>&1; then
        return 0
    fi
    step "downloading the sandbox image $IMAGE_TAG ($IMAGE_FILE)"
    fetch "$RELEASE_BASE/$IMAGE_FILE" "$STAGING/$IMAGE_FILE"
    fetch "$RELEASE_BASE/$IMAGE_FILE.sig" "$STAGING/$IMAGE_FILE.sig"
    fetch "$RELEASE_BASE/$IMAGE_FILE.sha256" "$STAGING/$IMAGE_FILE.sha256"
    got=$(sha256_of "$STAGING/$IMAGE_FILE")
    listed=$(cut -d' ' -f1 <"$STAGING/$IMAGE_FILE.sha256")
    if [ "$got" != "$IMAGE_SHA" ] || [ "$got" != "$listed" ]; then
        drop_staged_image
        die "$IMAGE_FILE is corrupted or was altered (sha256 $got, release says $IMAGE_SHA): refusing it"
    fi
    if ! (verify_signature "$STAGING/$IMAGE_FILE" "$STAGING/$IMAGE_FILE.sig"); then
        drop_staged_image
        exit 1
    fi
    say "verified $IMAGE_FILE (sha256 and signature)"
    IMAGE_STAGED=yes
}

# docker load of the verified image; its output goes to image-load.log. A failure is a
# warning: the image step then builds it, as a from-source install does.
load_image() {
    [ "${IMAGE_STAGED:-no}" = yes ] || return 0
    load_log=$SKALD_HOME/image-load.log
    step "loading the sandbox image $IMAGE_TAG (docker load; its output: $load_log)"
    if docker load -i "$STAGING/$IMAGE_FILE" >"$load_log" 2>&1 </dev/null \
        && docker image inspect "$IMAGE_TAG" >/dev/null 2>&1; then
        say "loaded $IMAGE_TAG from the release"
        IMAGE_LOADED=yes
    else
        warn "docker load of $IMAGE_FILE failed (see $load_log)"
    fi
    drop_staged_image
    IMAGE_STAGED=no
}

drop_staged_image() {
    rm -f "$STAGING/$IMAGE_FILE" "$STAGING/$IMAGE_FILE.sig" "$STAGING/$IMAGE_FILE.sha256"
}

download_scripts() {
    mkdir -p "$STAGING/scripts"
    while read -r file sum; do
        case "$file" in install.sh | update.sh | uninstall.sh) ;; *) continue ;; esac
        fetch "$RELEASE_BASE/$file" "$STAGING/scripts/$file"
        [ "$(sha256_of "$STAGING/scripts/$file")" = "$sum" ] || die "$file of release $NEW_VERSION is corrupted or was altered: refusing it"
    done <"$STAGING/scripts.sha256"
    for file in install.sh update.sh uninstall.sh; do
        [ -f "$STAGING/scripts/$file" ] || die "release $NEW_VERSION lacks $file"
    done
}

# True when the installed copy of NEW_VERSION is byte-identical to the release's.
installed_intact() {
    [ "$(current_version || true)" = "$NEW_VERSION" ] || return 1
    [ -f "$SKALD_HOME/releases/$NEW_VERSION/$ARTEFACT" ] || return 1
    [ "$(sha256_of "$SKALD_HOME/releases/$NEW_VERSION/$ARTEFACT")" = "$ARTEFACT_SHA" ]
}

# The new build must work on this machine before anything is stopped or switched.
selftest_staged() {
    if ! "$PY" "$STAGING/$ARTEFACT" selftest >"$STAGING/selftest.log" 2>&1; then
        cat "$STAGING/selftest.log" >&2
        die "the selftest of $ARTEFACT failed on this machine; nothing was changed"
    fi
    tail -n 1 "$STAGING/selftest.log"
}

# Move the verified build into releases/<version>/ (complete before it is visible).
lay_out_release() {
    target=$SKALD_HOME/releases/$NEW_VERSION
    tmp=$SKALD_HOME/releases/.$NEW_VERSION.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp"
    mv "$STAGING/$ARTEFACT" "$STAGING/$ARTEFACT.sha256" "$tmp/"
    [ -f "$STAGING/$ARTEFACT.sig" ] && mv "$STAGING/$ARTEFACT.sig" "$tmp/"
    [ -f "$STAGING/manifest.json" ] && cp "$STAGING/manifest.json" "$tmp/"
    ln -s "$ARTEFACT" "$tmp/skald.pyz"
    if [ -e "$target" ]; then
        if [ "$(current_version || true)" = "$NEW_VERSION" ]; then
            # Reinstalling the running version: swap the directory's contents in place
            # of the old one by rename, keeping `current` valid throughout.
            rm -rf "$target.old.$$"
            mv "$target" "$target.old.$$"
            mv "$tmp" "$target"
            rm -rf "$target.old.$$"
            return 0
        fi
        rm -rf "$target"
    fi
    mv "$tmp" "$target"
}

# --- configuration and health -----------------------------------------------------------

# The port the server listens on: SKALD_SERVER_PORT, else config.toml, else 9000.
server_port() {
    "$PY" - "$DATA/config.toml" <<'EOF'
import os, sys, tomllib

port = os.environ.get("SKALD_SERVER_PORT")
if not port:
    try:
        with open(sys.argv[1], "rb") as f:
            port = tomllib.load(f).get("server", {}).get("port", 9000)
    except FileNotFoundError:
        port = 9000
print(int(port))
EOF
}

write_initial_config() {
    [ -f "$DATA/config.toml" ] && return 0
    [ -n "${SKALD_PORT:-}" ] || return 0
    case "$SKALD_PORT" in '' | *[!0-9]*) die "SKALD_PORT / --port must be a number, got '$SKALD_PORT'" ;; esac
    (umask 077 && printf '[server]\nport = %s\n' "$SKALD_PORT" >"$DATA/config.toml")
}

# health_version PORT: the version /api/health reports, or nothing.
health_version() {
    curl -fsS --max-time 3 "http://127.0.0.1:$1/api/health" 2>/dev/null \
        | "$PY" -c 'import json, sys; print(json.load(sys.stdin).get("version", ""))' 2>/dev/null || true
}

# port_owner PORT: "free", "skald" or "other".
port_owner() {
    "$PY" - "$1" <<'EOF'
import socket, sys

s = socket.socket()
# As the server binds (skald.ops.channel.bind_error): TIME_WAIT leftovers of the
# previous server's connections do not make the port busy.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("0.0.0.0", int(sys.argv[1])))
    print("free")
except OSError:
    print("busy")
finally:
    s.close()
EOF
}

# wait_healthy VERSION SECONDS: the service answers /api/health with VERSION. Gives up
# early when systemd had to restart the process (a build that exits is not going to
# become healthy by waiting).
wait_healthy() {
    port=$(server_port)
    waited=0
    restarts_before=$(unit_restarts)
    while [ "$waited" -lt "$2" ]; do
        if [ "$(health_version "$port")" = "$1" ]; then
            return 0
        fi
        if [ "$HAVE_SYSTEMD" = yes ] && start_failed "$restarts_before"; then
            HEALTH_FAILURE="the server exited during start"
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    HEALTH_FAILURE="no healthy answer from version $1 on port $port within $2 s"
    return 1
}

# --- systemd ----------------------------------------------------------------------------

uid() { id -u; }

# A user manager we can talk to. ssh and desktop sessions set XDG_RUNTIME_DIR; `su`,
# `docker exec` and cron do not, so find it (linger may have just started the manager).
user_systemd_ready() {
    command -v systemctl >/dev/null 2>&1 || return 1
    runtime=${XDG_RUNTIME_DIR:-/run/user/$(uid)}
    # No manager now and no linger to start one: nothing to wait for.
    [ -d "$runtime" ] || linger_on || return 1
    tries=0
    while [ "$tries" -lt 40 ]; do
        if [ -S "$runtime/bus" ]; then
            XDG_RUNTIME_DIR=$runtime
            export XDG_RUNTIME_DIR
            systemctl --user show-environment >/dev/null 2>&1 && return 0
        fi
        sleep 0.5
        tries=$((tries + 1))
    done
    return 1
}

detect_systemd() {
    HAVE_SYSTEMD=no
    [ -d /run/systemd/system ] || return 0
    user_systemd_ready && HAVE_SYSTEMD=yes
    return 0
}

sctl() { systemctl --user "$@"; }

# start_failed RESTARTS_BEFORE: the main process exited since the start (systemd is
# waiting to restart it, gave up, or already restarted it).
start_failed() {
    state=$(sctl show -p ActiveState -p SubState --value "$UNIT_NAME" 2>/dev/null | tr '\n' ' ')
    case "$state" in *failed* | *auto-restart*) return 0 ;; esac
    [ "$(unit_restarts)" != "$1" ]
}

unit_restarts() {
    [ "$HAVE_SYSTEMD" = yes ] || { echo 0; return 0; }
    sctl show -p NRestarts --value "$UNIT_NAME" 2>/dev/null || echo 0
}

# The unit is ours and rewritten on every install and update; operators' changes belong
# in drop-ins (systemctl --user edit skald), which we never touch.
write_unit() {
    mkdir -p "$UNIT_DIR"
    tmp=$UNIT_DIR/.$UNIT_NAME.tmp.$$
    cat >"$tmp" <<EOF
# Written by the Skald installer and rewritten by updates. Put your changes in a
# drop-in instead (systemctl --user edit skald); they are kept.
[Unit]
Description=Skald, the household's private assistant
Documentation=file://$SKALD_HOME/current/skald.pyz
# Never give up restarting (a boot race with Docker or the network settles by itself).
StartLimitIntervalSec=0

[Service]
Type=simple
Environment="SKALD_HOME=$SKALD_HOME"
Environment="SHIV_ROOT=$SHIV_ROOT"
ExecStart="$PY" "$SKALD_HOME/current/skald.pyz" serve
Restart=always
RestartSec=5
# 78 = bad configuration: restarting cannot fix it; skald printed the reason.
RestartPreventExitStatus=78
LimitNOFILE=65536
TimeoutStopSec=30

[Install]
WantedBy=default.target
EOF
    if [ -f "$UNIT_FILE" ] && cmp -s "$tmp" "$UNIT_FILE"; then
        rm -f "$tmp"
        return 0
    fi
    mv -f "$tmp" "$UNIT_FILE"
    [ "$HAVE_SYSTEMD" = yes ] && sctl daemon-reload
    return 0
}

# sudo with the terminal as stdin, for its password prompt under curl | bash.
sudo_tty() {
    # shellcheck disable=SC2024 # the redirect is for sudo itself, not the command
    sudo "$@" </dev/tty
}

linger_on() {
    [ -e "/var/lib/systemd/linger/$(id -un)" ] && return 0
    loginctl show-user "$(id -un)" -p Linger --value 2>/dev/null | grep -qx yes
}

# Linger keeps the user manager (and so Skald) running after logout and starts it at
# boot. Unprivileged first (polkit allows it in many local sessions), then sudo without
# a password, then sudo with one, only if someone is at a terminal. Never fatal.
enable_linger() {
    # Linger is a systemd thing: without systemd there is nothing to enable or advise.
    [ -d /run/systemd/system ] || return 0
    command -v loginctl >/dev/null 2>&1 || return 0
    if linger_on; then
        return 0
    fi
    me=$(id -un)
    if loginctl enable-linger "$me" </dev/null >/dev/null 2>&1 && linger_on; then
        :
    elif command -v sudo >/dev/null 2>&1 && sudo -n loginctl enable-linger "$me" </dev/null >/dev/null 2>&1 && linger_on; then
        :
    elif command -v sudo >/dev/null 2>&1 && has_tty && say "Enabling linger needs your sudo password:" \
        && sudo_tty loginctl enable-linger "$me" && linger_on; then
        :
    else
        warn "could not enable linger, so Skald stops when you log out and does not start at boot. Fix: sudo loginctl enable-linger $me"
        return 0
    fi
    LINGER_BY_INSTALLER=yes
    say "linger enabled for $me (Skald starts at boot and keeps running after logout)"
}

# --- update: journal, snapshot, rollback --------------------------------------------------

journal_set() { # journal_set KEY VALUE: rewrite one key of the journal atomically
    tmp=$JOURNAL.tmp.$$
    { grep -v "^$1=" "$JOURNAL" 2>/dev/null || true; printf '%s=%s\n' "$1" "$2"; } >"$tmp"
    mv -f "$tmp" "$JOURNAL"
}

journal_get() {
    sed -n "s/^$1=//p" "$JOURNAL" 2>/dev/null | tail -n 1
}

stop_service() {
    [ "$HAVE_SYSTEMD" = yes ] || return 0
    sctl stop "$UNIT_NAME" 2>/dev/null || true
}

start_service() {
    [ "$HAVE_SYSTEMD" = yes ] || return 0
    sctl reset-failed "$UNIT_NAME" 2>/dev/null || true
    sctl start "$UNIT_NAME"
}

# The databases, keys and configuration, copied while the server is stopped, so the copy
# is exact; marked complete last.
take_snapshot() { # take_snapshot DIR
    tmp=$1.tmp
    rm -rf "$tmp"
    (umask 077 && mkdir -p "$tmp")
    [ -d "$DATA/database" ] && cp -a "$DATA/database" "$tmp/database"
    for f in instance.key config.toml providers.json; do
        [ -f "$DATA/$f" ] && cp -a "$DATA/$f" "$tmp/$f"
    done
    : >"$tmp/.complete"
    mv "$tmp" "$1"
}

restore_snapshot() { # restore_snapshot DIR: put the data back exactly as it was
    [ -f "$1/.complete" ] || return 1
    failed=$DATA/backups/failed-update-$(date -u +%Y%m%dT%H%M%SZ)
    (umask 077 && mkdir -p "$failed")
    [ -d "$DATA/database" ] && mv "$DATA/database" "$failed/database"
    [ -d "$1/database" ] && cp -a "$1/database" "$DATA/database"
    for f in instance.key config.toml providers.json; do
        [ -f "$1/$f" ] && cp -a "$1/$f" "$DATA/$f"
    done
    say "data restored from $1 (what the failed version left is in $failed)"
}

# Put `from` back: stop, restore the data it had, switch, start, confirm.
roll_back() { # roll_back FROM SNAPSHOT
    step "rolling back to $1"
    stop_service
    if [ "$(current_version || true)" != "$1" ]; then
        restore_snapshot "$2" || warn "no complete snapshot at $2; data left as the failed version left it"
        switch_current "$1"
    fi
    start_service || true
    if [ "$HAVE_SYSTEMD" = yes ]; then
        if wait_healthy "$1" "${SKALD_HEALTH_TIMEOUT:-60}"; then
            say "Skald $1 is serving again"
        else
            warn "Skald $1 does not answer either ($HEALTH_FAILURE); see: journalctl --user -u skald"
        fi
    fi
}

# A previous update was killed part-way: finish it or undo it before anything else.
recover_interrupted() {
    [ -f "$JOURNAL" ] || return 0
    from=$(journal_get from)
    to=$(journal_get to)
    snap=$(journal_get snapshot)
    at=$(journal_get step)
    step "a previous update from $from to $to was interrupted at '$at'; recovering"
    # Killed after starting the new version: give it the time a start takes.
    if [ "$(current_version || true)" = "$to" ] && [ "$HAVE_SYSTEMD" = yes ] \
        && sctl is-active --quiet "$UNIT_NAME" && wait_healthy "$to" 30; then
        say "$to is current and healthy; finishing"
    elif [ -n "$from" ] && [ -d "$SKALD_HOME/releases/$from" ]; then
        roll_back "$from" "$snap"
    else
        start_service || true
    fi
    rm -rf "$snap.tmp"
    rm -f "$JOURNAL"
}

# Keep the newest releases (and always the current one), their shiv extractions, and the
# newest pre-update snapshots; everything else we own goes.
prune() {
    keep=$(for d in "$SKALD_HOME"/releases/*/; do basename "$d"; done | grep -v '\.old\.' | sort -V | tail -n "$KEEP_RELEASES")
    cur=$(current_version || true)
    for d in "$SKALD_HOME"/releases/* "$SKALD_HOME"/releases/.*.tmp.*; do
        [ -e "$d" ] || continue
        v=$(basename "$d")
        case "$v" in .*.tmp.* | *.old.*)
            rm -rf "$d"
            continue
            ;;
        esac
        if [ "$v" = "$cur" ] || printf '%s\n' "$keep" | grep -qx "$v"; then
            continue
        fi
        rm -rf "$d"
        say "pruned release $v"
    done
    # Shiv extracts to <pyz name>_<build id>; keep only those of releases still here.
    names=$(for d in "$SKALD_HOME"/releases/*/; do readlink "$d/skald.pyz" 2>/dev/null || true; done)
    if [ -d "$SHIV_ROOT" ]; then
        for entry in "$SHIV_ROOT"/* "$SHIV_ROOT"/.*_lock; do
            [ -e "$entry" ] || continue
            base=$(basename "$entry")
            used=no
            for n in $names; do
                case "$base" in "$n"_* | ."$n"_*) used=yes ;; esac
            done
            [ "$used" = yes ] || rm -rf "$entry"
        done
    fi
    for d in "$DATA"/backups/pre-update-*; do
        case "$d" in *.tmp) ;; *) [ -d "$d" ] && printf '%s\n' "$d" ;; esac
    done | sort | head -n -"$KEEP_SNAPSHOTS" | while read -r old; do rm -rf "$old"; done
    return 0
}

# --- the three jobs ---------------------------------------------------------------------

usage() {
    cat <<'EOF'
Skald installer.

  curl -fsSL <base>/install.sh | bash            install (or repair) Skald for this account
  curl -fsSL <base>/install.sh | bash -s -- OPTS
  ./install.sh --from-source                     install from this checkout

Install options:
  --channel stable|nightly     release channel (default stable, or $SKALD_CHANNEL)
  --port N                     web port for a new install (default 9000, or $SKALD_PORT)
  --from-source                build the zipapp from the checkout this script is in
  --insecure-skip-signature    install even when no tool can check the signature

Update ($SKALD_HOME/update.sh, or skald update): --force reinstalls the same version.
Uninstall ($SKALD_HOME/uninstall.sh): --purge removes data/ too (asks, or --yes).

Environment: SKALD_HOME (default ~/.local/share/skald), SKALD_RELEASES_URL, SKALD_CHANNEL,
SKALD_PYTHON, SKALD_PORT.
EOF
}

MODE=install
FORCE=no
FROM_SOURCE=no
SKIP_SIGNATURE=no
PURGE=no
ASSUME_YES=no

parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --update) MODE=update ;;
            --uninstall) MODE=uninstall ;;
            --force) FORCE=yes ;;
            --from-source) FROM_SOURCE=yes ;;
            --insecure-skip-signature) SKIP_SIGNATURE=yes ;;
            --purge) PURGE=yes ;;
            --yes | -y) ASSUME_YES=yes ;;
            --channel)
                [ $# -ge 2 ] || die "--channel needs a value"
                SKALD_CHANNEL=$2
                shift
                ;;
            --channel=*) SKALD_CHANNEL=${1#--channel=} ;;
            --port)
                [ $# -ge 2 ] || die "--port needs a value"
                SKALD_PORT=$2
                shift
                ;;
            --port=*) SKALD_PORT=${1#--port=} ;;
            -h | --help)
                usage
                exit 0
                ;;
            *) die "unknown option: $1 (see --help)" ;;
        esac
        shift
    done
}

# Build the zipapp from the checkout holding this script (needs the dev tools: it makes
# a venv in the checkout, like ci/test.sh does).
build_from_source() {
    src=$(cd "$(dirname "$0")" && pwd)
    [ -f "$src/ci/build.sh" ] || die "--from-source must be run as ./install.sh from a Skald checkout"
    SOURCE_DIR=$src
    step "building from $src"
    if [ ! -x "$src/.venv/bin/python" ]; then
        "$PY" -m venv "$src/.venv" || die "cannot create $src/.venv (Debian: sudo apt-get install python3-venv)"
    fi
    if ! "$src/.venv/bin/python" -c 'import shiv' 2>/dev/null; then
        "$src/.venv/bin/pip" install -q -e "${src}[dev]" </dev/null || die "installing the build tools failed"
    fi
    built=$(PYTHON=$src/.venv/bin/python "$src/ci/build.sh" --out "$STAGING/build" </dev/null) || die "the build failed"
    ARTEFACT=$(basename "$built")
    case "$ARTEFACT" in
        *-"$OS-$ARCH-$PYABI".pyz) ;;
        *) die "the checkout's .venv built $ARTEFACT, which does not run on $PY ($PYABI); recreate $src/.venv with that python" ;;
    esac
    mv "$built" "$built.sha256" "$STAGING/"
    NEW_VERSION=$("$PY" "$STAGING/$ARTEFACT" version | cut -d' ' -f2)
    mkdir -p "$STAGING/scripts"
    cp "$src/install.sh" "$src/update.sh" "$src/uninstall.sh" "$STAGING/scripts/"
}

# With someone at a terminal, `skald setup` asks for the first administrator there.
first_admin_at_terminal() {
    has_tty || return 1
    step "creating the first administrator"
    if "$SKALD_HOME/bin/skald" setup </dev/tty; then
        return 0
    fi
    warn "setup did not finish; you can create the administrator in the browser instead"
    return 1
}

# The address to open from another device in the home (the LAN address, else 127.0.0.1).
home_url() {
    lan=$("$PY" -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("192.0.2.1", 9))  # no packet is sent; this only picks the LAN address
    print(s.getsockname()[0])
except OSError:
    print("127.0.0.1")' 2>/dev/null || echo 127.0.0.1)
    printf 'http://%s:%s/\n' "$lan" "$(server_port)"
}

print_welcome() {
    url=$(home_url)
    token_file=$DATA/setup-token
    if [ -s "$token_file" ]; then
        if first_admin_at_terminal; then
            token_file=
        fi
        if [ -n "$token_file" ] && [ -s "$token_file" ]; then
            say ""
            say "Create the first administrator in your browser:"
            say "  ${url}#/setup?token=$(cat "$token_file")"
        fi
    fi
    say ""
    say "Skald $NEW_VERSION is installed. Open $url on any device in your home."
    say "Update: $SKALD_HOME/update.sh    Check: $SKALD_HOME/bin/skald doctor    Remove: $SKALD_HOME/uninstall.sh"
    [ -z "${PATH_HINT:-}" ] || say "$PATH_HINT"
}

do_install() {
    detect_platform
    find_python
    set_paths
    SAVED_URL='' SAVED_CHANNEL='' SAVED_PYTHON='' LINGER_BY_INSTALLER=no
    load_env_file
    RELEASES_URL=${SKALD_RELEASES_URL:-${SAVED_URL:-$DEFAULT_RELEASES_URL}}
    CHANNEL=${SKALD_CHANNEL:-${SAVED_CHANNEL:-stable}}
    step "Skald installer: $SKALD_HOME ($OS-$ARCH, Python $PYVER at $PY)"
    if current=$(current_version); then
        say "Skald $current is already installed here; re-running the installer is safe: it checks the files, the service and linger."
    fi
    check_docker
    make_dirs
    if [ "$FROM_SOURCE" = yes ]; then
        build_from_source
    else
        step "fetching the $CHANNEL release from $RELEASES_URL"
        resolve_release
        if [ -n "${current:-}" ] && [ "$current" != "$NEW_VERSION" ]; then
            say "the server has $NEW_VERSION and $current is installed: updating"
            SKALD_RELEASES_URL=$RELEASES_URL
            export SKALD_RELEASES_URL
            exec sh "$SKALD_HOME/libexec/install.sh" --update --channel "$CHANNEL"
        fi
        if installed_intact; then
            say "the installed files of $NEW_VERSION are intact"
            INTACT=yes
        else
            download_artefact
        fi
        download_scripts
        download_image
    fi
    if [ "${INTACT:-no}" = no ]; then
        step "selftest of Skald $NEW_VERSION"
        selftest_staged
        lay_out_release
    fi
    install_scripts "$STAGING/scripts"
    switch_current "$NEW_VERSION"
    write_wrapper
    link_on_path
    write_initial_config
    load_image
    build_sandbox_image
    step "service"
    enable_linger
    detect_systemd
    write_env_file
    if [ "$HAVE_SYSTEMD" = yes ]; then
        write_unit
        sctl enable "$UNIT_NAME" >/dev/null 2>&1
        port=$(server_port)
        if [ "$(health_version "$port")" = "$NEW_VERSION" ] && [ "$FROM_SOURCE" = no ]; then
            say "Skald $NEW_VERSION is already running"
        else
            if [ "$(port_owner "$port")" = busy ] && [ -z "$(health_version "$port")" ]; then
                die "port $port is used by another program; choose another with --port N (or [server] port in $DATA/config.toml)"
            fi
            sctl restart "$UNIT_NAME"
        fi
        wait_healthy "$NEW_VERSION" "${SKALD_HEALTH_TIMEOUT:-60}" \
            || die "Skald did not start ($HEALTH_FAILURE); see: journalctl --user -u skald"
        say "service $UNIT_NAME is enabled and running"
        print_welcome
    else
        say "No systemd user manager here, so Skald is not installed as a service."
        url=$(home_url)
        if [ ! -f "$DATA/database/system.db" ] && first_admin_at_terminal; then
            say "Start it by hand: $SKALD_HOME/bin/skald serve"
            say "then open $url on any device in your home."
        else
            say "Start it by hand: $SKALD_HOME/bin/skald serve"
            say "then open $url on any device in your home; while there is no administrator,"
            say "skald serve prints the setup link for the first one (${url}#/setup?token=...)."
        fi
        [ -z "${PATH_HINT:-}" ] || say "$PATH_HINT"
    fi
    rm -rf "$STAGING"
}

do_update() {
    detect_platform
    set_paths
    [ -L "$SKALD_HOME/current" ] || die "Skald is not installed in $SKALD_HOME (install it with install.sh)"
    SAVED_URL='' SAVED_CHANNEL='' SAVED_PYTHON='' SAVED_SOURCE='' LINGER_BY_INSTALLER=no
    load_env_file
    SKALD_PYTHON=${SKALD_PYTHON:-$SAVED_PYTHON}
    find_python
    RELEASES_URL=${SKALD_RELEASES_URL:-${SAVED_URL:-$DEFAULT_RELEASES_URL}}
    CHANNEL=${SKALD_CHANNEL:-${SAVED_CHANNEL:-stable}}
    # Built from a checkout, with no release server to update from: the checkout is
    # where the new version is, so say how to install it from there.
    if [ -z "$RELEASES_URL" ] && [ -n "$SAVED_SOURCE" ]; then
        die "this Skald was installed from the source checkout $SAVED_SOURCE, not from a release server. To update: bring that checkout up to date (for example: cd $SAVED_SOURCE && git pull), then run ./install.sh --from-source again from it. Your data stays as it is."
    fi
    exec 9>"$SKALD_HOME/.update.lock"
    if command -v flock >/dev/null 2>&1; then
        flock -n 9 || die "another update is running in $SKALD_HOME"
    fi
    # Linger first: when it was lost, turning it on again is what starts the user manager.
    enable_linger
    detect_systemd
    recover_interrupted
    make_dirs
    from=$(current_version)
    step "checking the $CHANNEL channel at $RELEASES_URL (installed: $from)"
    checkpoint fetch
    resolve_release
    write_env_file
    write_unit
    if [ "$NEW_VERSION" = "$from" ] && [ "$FORCE" = no ]; then
        say "Skald $from is up to date (--force reinstalls it)"
        rm -rf "$STAGING"
        return 0
    fi
    step "downloading Skald $NEW_VERSION"
    download_release
    if docker info >/dev/null 2>&1 </dev/null; then
        DOCKER_OK=yes
    fi
    download_image
    step "selftest of Skald $NEW_VERSION (nothing is stopped yet)"
    checkpoint selftest
    selftest_staged
    if [ "$NEW_VERSION" = "$from" ]; then
        # --force of the running version: its directory cannot be swapped under it;
        # re-verify what is installed and restart.
        lay_out_release
        load_image
        install_scripts "$STAGING/scripts"
        start_service_fresh
        return 0
    fi
    lay_out_release
    # The new version's image, before anything stops (the running version keeps its own).
    load_image
    snap=$DATA/backups/pre-update-$from-to-$NEW_VERSION-$(date -u +%Y%m%dT%H%M%SZ)
    : >"$JOURNAL"
    journal_set from "$from"
    journal_set to "$NEW_VERSION"
    journal_set snapshot "$snap"
    checkpoint journal
    started=$(date +%s)
    step "stopping Skald $from"
    checkpoint stop
    stop_service
    step "snapshot of the databases: $snap"
    checkpoint snapshot
    take_snapshot "$snap"
    step "switching to $NEW_VERSION"
    checkpoint switch
    switch_current "$NEW_VERSION"
    step "starting Skald $NEW_VERSION"
    checkpoint start
    if ! start_service; then
        HEALTH_FAILURE="systemd could not start it"
    fi
    checkpoint health
    if [ "$HAVE_SYSTEMD" = yes ] && ! wait_healthy "$NEW_VERSION" "${SKALD_HEALTH_TIMEOUT:-60}"; then
        reason=$HEALTH_FAILURE
        roll_back "$from" "$snap"
        rm -f "$JOURNAL"
        die "the update to $NEW_VERSION failed at the health check: $reason. Rolled back to $from; the snapshot is in $snap. The new version's log: journalctl --user -u skald"
    fi
    down=$(($(date +%s) - started))
    install_scripts "$STAGING/scripts"
    checkpoint prune
    prune
    rm -f "$JOURNAL"
    rm -rf "$STAGING"
    checkpoint "done"
    say "Skald updated from $from to $NEW_VERSION (service down for ${down} s)"
    if [ "$HAVE_SYSTEMD" = no ]; then
        say "No systemd user manager here: restart Skald by hand ($SKALD_HOME/bin/skald serve)"
    fi
}

start_service_fresh() {
    if [ "$HAVE_SYSTEMD" = yes ]; then
        sctl restart "$UNIT_NAME"
        wait_healthy "$NEW_VERSION" "${SKALD_HEALTH_TIMEOUT:-60}" \
            || die "Skald $NEW_VERSION did not come back ($HEALTH_FAILURE); see: journalctl --user -u skald"
    fi
    rm -rf "$STAGING"
    say "Skald $NEW_VERSION reinstalled"
}

instance_id() {
    [ -f "$DATA/database/system.db" ] || return 0
    "$PY" - "$DATA/database/system.db" <<'EOF' 2>/dev/null || true
import json, sqlite3, sys

con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
row = con.execute("SELECT value FROM config WHERE key='instance_id'").fetchone()
print(json.loads(row[0]) if row else "")
EOF
}

remove_containers() {
    id=$1
    [ -n "$id" ] || return 0
    if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
        say "Docker is not reachable: no sandbox containers removed (their label is skald.instance=$id)"
        return 0
    fi
    containers=$(docker ps -aq --filter "label=skald.instance=$id")
    if [ -n "$containers" ]; then
        # shellcheck disable=SC2086 # one id per word
        docker rm -f $containers >/dev/null
        say "removed $(printf '%s\n' "$containers" | wc -l) sandbox container(s)"
    fi
    networks=$(docker network ls -q --filter "label=skald.instance=$id")
    if [ -n "$networks" ]; then
        # shellcheck disable=SC2086
        docker network rm $networks >/dev/null || true
    fi
    images=$(docker images -q --filter "label=skald.instance=$id")
    if [ -n "$images" ]; then
        # shellcheck disable=SC2086
        docker rmi -f $images >/dev/null || true
    fi
    if [ "$PURGE" = yes ]; then
        # The runtime image is shared by every Skald on this machine: only unused copies go.
        for image in $(docker images -q --filter label=skald.runtime=1); do
            docker rmi "$image" >/dev/null 2>&1 || true
        done
    fi
}

disable_linger_if_ours() {
    me=$(id -un)
    if [ "${LINGER_BY_INSTALLER:-no}" != yes ]; then
        linger_on && say "kept linger for $me (the installer did not turn it on)"
        return 0
    fi
    if loginctl disable-linger "$me" </dev/null >/dev/null 2>&1 \
        || sudo -n loginctl disable-linger "$me" </dev/null >/dev/null 2>&1; then
        say "linger turned off for $me (the installer had turned it on)"
    else
        warn "could not turn linger off; to do it: sudo loginctl disable-linger $me"
    fi
}

do_uninstall() {
    set_paths
    [ -d "$SKALD_HOME" ] || die "nothing to uninstall: $SKALD_HOME does not exist"
    SAVED_URL='' SAVED_CHANNEL='' SAVED_PYTHON='' LINGER_BY_INSTALLER=no
    load_env_file
    SKALD_PYTHON=${SKALD_PYTHON:-$SAVED_PYTHON}
    find_python
    if [ "$PURGE" = yes ] && [ "$ASSUME_YES" = no ]; then
        has_tty || die "--purge deletes every member's data; without a terminal to confirm, add --yes"
        printf 'This deletes %s: every conversation, note and file. Type "delete" to confirm: ' "$DATA" >/dev/tty
        read -r answer </dev/tty || answer=
        [ "$answer" = delete ] || die "not confirmed; nothing was removed"
    fi
    detect_systemd
    step "removing the service"
    if [ "$HAVE_SYSTEMD" = yes ]; then
        sctl disable --now "$UNIT_NAME" >/dev/null 2>&1 || true
    fi
    rm -f "$UNIT_FILE"
    [ "$HAVE_SYSTEMD" = yes ] && { sctl daemon-reload || true; sctl reset-failed "$UNIT_NAME" 2>/dev/null || true; }
    step "removing sandbox containers of this instance"
    remove_containers "$(instance_id)"
    step "removing the program"
    home=${SKALD_HOME:?}
    rm -rf "${home:?}/releases" "${home:?}/current" "${home:?}/bin" "${home:?}/libexec" "${home:?}/staging" \
        "$home/update.sh" "$home/.update.lock" "$JOURNAL" "$DATA/cache"
    disable_linger_if_ours
    unlink_from_path
    rm -f "$ENV_FILE" "$SKALD_HOME/uninstall.sh" "$SKALD_HOME/image-build.log" "$SKALD_HOME/image-load.log"
    if [ "$PURGE" = yes ]; then
        rm -rf "$DATA"
        rmdir "$SKALD_HOME" 2>/dev/null || true
        say "Skald and all its data are removed."
    else
        say "Skald is removed. Kept: $DATA (every member's data; delete it with uninstall.sh --purge, or by hand)"
    fi
    if [ -d "$UNIT_DIR/$UNIT_NAME.d" ]; then
        say "Kept your service drop-ins in $UNIT_DIR/$UNIT_NAME.d"
    fi
}

main() {
    parse_args "$@"
    case "$MODE" in
        install) do_install ;;
        update) do_update ;;
        uninstall) do_uninstall ;;
    esac
}

main "$@"
