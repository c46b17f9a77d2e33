#!/bin/sh
# Remove Skald from this account: $SKALD_HOME/uninstall.sh [--purge [--yes]]
#
# Keeps data/ (every member's conversations, notes and files) unless --purge is given
# and confirmed. The work is done by the installed installer (libexec/install.sh
# --uninstall); see docs/uninstall.md.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
SKALD_HOME=${SKALD_HOME:-$here}
export SKALD_HOME
lib=$SKALD_HOME/libexec/install.sh
if [ ! -f "$lib" ]; then
    echo "skald-uninstall: $lib is missing; remove the service by hand: systemctl --user disable --now skald; rm ~/.config/systemd/user/skald.service; then delete $SKALD_HOME (data/ holds every member's data)" >&2
    exit 1
fi
exec sh "$lib" --uninstall "$@"
