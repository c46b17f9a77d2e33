#!/usr/bin/env bash
# The end-to-end installer test box: a Debian trixie rootfs with systemd as PID 1, made
# with debootstrap and imported into Docker (no registry is reachable in CI).
# See docs/dev/installer.md, "End-to-end test box".
#
# Usage (root): tests/e2e/build-systemd-image.sh [--tag T] [--mirror URL] [--force]
#               tests/e2e/build-systemd-image.sh --print-tag
#
# The default tag carries the first 12 hex digits of this file's sha256, so an edited
# script is a new image and never mistaken for the old one; tests/systemd_support.py
# computes the same tag. Building again is a no-op when the tag exists (unless --force).
#
# Users in the box: alice (uid 1000, passwordless sudo: a self-hoster's admin account)
# and bob (uid 1001, no sudo). Both have locked passwords.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SCRIPT="$HERE/$(basename "${BASH_SOURCE[0]}")"

REPOSITORY=skald-e2e-systemd
SUITE=trixie
PACKAGES=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,sudo,python3,curl,ca-certificates,procps,openssl
INIT=/usr/local/sbin/skald-e2e-init
VERSION="$(sha256sum "$SCRIPT" | cut -c1-12)"

# Units that make no sense in a container sharing the host's network, or that would
# only slow the box down or make it "degraded". Masking an absent unit is harmless.
MASK=(
    getty.target console-getty.service container-getty@.service
    getty@.service serial-getty@.service getty-static.service
    systemd-networkd.service systemd-networkd.socket
    systemd-networkd-wait-online.service systemd-networkd-wait-online@.service
    systemd-networkd-persistent-storage.service systemd-network-generator.service
    systemd-resolved.service systemd-timesyncd.service systemd-udevd.service
    systemd-udev-trigger.service systemd-udev-settle.service
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer
    e2scrub_all.timer man-db.timer
)

usage() {
    sed -n '6,7p' "$SCRIPT" | sed 's/^# //'
}

TAG="$REPOSITORY:$SUITE-$VERSION"
MIRROR=""
FORCE=0
while (($#)); do
    case "$1" in
        --tag)
            TAG="${2:?--tag needs a value}"
            shift 2
            ;;
        --mirror)
            MIRROR="${2:?--mirror needs a value}"
            shift 2
            ;;
        --force)
            FORCE=1
            shift
            ;;
        --print-tag)
            echo "$TAG"
            exit 0
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "build-systemd-image.sh: unknown argument: $1" >&2
            usage >&2
            exit 2
            ;;
    esac
done

die() {
    echo "build-systemd-image.sh: $*" >&2
    exit 1
}

docker info >/dev/null 2>&1 || die "Docker does not answer (is dockerd running?)"
if ((!FORCE)) && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "$TAG is already built"
    exit 0
fi
[[ $EUID -eq 0 ]] || die "debootstrap needs root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (Debian: apt-get install debootstrap)"

if [[ -z "$MIRROR" ]]; then
    # The same rule as `skald image bootstrap-base`: the main archive this machine's apt uses.
    MIRROR="$(cd "$ROOT" && python3 -c 'from skald.sandbox.image import apt_mirror; print(apt_mirror() or "")')" \
        || die "could not read the apt sources; pass --mirror URL"
    [[ -n "$MIRROR" ]] || die "no Debian mirror in /etc/apt; pass --mirror URL"
fi

WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/skald-e2e-systemd.XXXXXX")"
ROOTFS="$WORK/rootfs"
cleanup() {
    # debootstrap can leave /proc or /sys mounted in the rootfs when it fails half-way.
    local mounts
    mounts="$(awk -v dir="$WORK/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts | sort -r)"
    if [[ -n "$mounts" ]]; then
        xargs -r -n1 umount -l <<<"$mounts" || true
    fi
    rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

START=$SECONDS
echo "debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || {
        tail -n 30 "$WORK/debootstrap.log" >&2
        die "debootstrap failed"
    }
echo "debootstrap: $((SECONDS - START))s"

in_root() {
    chroot "$ROOTFS" "$@"
}

# The users.
in_root useradd --create-home --uid 1000 --user-group --shell /bin/bash alice
in_root usermod --append --groups sudo alice
in_root useradd --create-home --uid 1001 --user-group --shell /bin/bash bob
printf 'alice ALL=(ALL:ALL) NOPASSWD: ALL\n' >"$ROOTFS/etc/sudoers.d/alice"
chmod 0440 "$ROOTFS/etc/sudoers.d/alice"
in_root visudo -cq

# systemd: a server's default target, no gettys, nothing touching the (host's) network.
ln -sfn /usr/lib/systemd/system/multi-user.target "$ROOTFS/etc/systemd/system/default.target"
for unit in "${MASK[@]}"; do
    ln -sfn /dev/null "$ROOTFS/etc/systemd/system/$unit"
done
echo skald-e2e >"$ROOTFS/etc/hostname"
printf 'LANG=C.UTF-8\n' >"$ROOTFS/etc/default/locale"

# PID 1 is this wrapper, which execs /sbin/init once systemd has a cgroup2 hierarchy it
# can write (docs/dev/installer.md explains why: Docker mounts the cgroup tree read-only
# or as cgroup v1, and systemd 257 wants a writable unified hierarchy).
cat >"$ROOTFS$INIT" <<'EOF'
#!/bin/sh
# skald e2e box: give systemd a writable cgroup2 hierarchy rooted at this container's
# cgroup, then become systemd.
set -eu
if ! grep -qx '0::/' /proc/self/cgroup; then
    echo "skald-e2e-init: run the box with --cgroupns=private" >&2
    exit 1
fi
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] || [ ! -w /sys/fs/cgroup/cgroup.procs ]; then
    if ! umount -R /sys/fs/cgroup || ! mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 /sys/fs/cgroup; then
        echo "skald-e2e-init: cannot mount cgroup2 (run the box with --cap-add SYS_ADMIN)" >&2
        exit 1
    fi
fi
exec /sbin/init "$@"
EOF
chmod 0755 "$ROOTFS$INIT"

# Downloaded packages would only make the image bigger.
find "$ROOTFS/var/cache/apt/archives" -name '*.deb' -delete

echo "importing as $TAG"
tar -C "$ROOTFS" --numeric-owner -c . \
    | docker import \
        --change "CMD [\"$INIT\"]" \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL skald.e2e.systemd=$VERSION" \
        --message "skald e2e systemd box ($SUITE, script $VERSION)" \
        - "$TAG" >/dev/null
docker image inspect "$TAG" >/dev/null
echo "$TAG built in $((SECONDS - START))s"
