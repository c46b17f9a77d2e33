#!/bin/sh
# Update this Skald installation: $SKALD_HOME/update.sh [--force] [--channel stable|nightly]
#
# The work is done by the installer of the installed release (libexec/install.sh
# --update), so the download, verification, service and linger logic exists once.
# Steps, rollback and the journal that makes an interrupted update safe:
# docs/update.md and docs/dev/installer.md.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
SKALD_HOME=${SKALD_HOME:-$here}
export SKALD_HOME
lib=$SKALD_HOME/libexec/install.sh
if [ ! -f "$lib" ]; then
    echo "skald-update: $lib is missing; repair the installation by running the installer again (curl -fsSL <base>/install.sh | bash)" >&2
    exit 1
fi
exec sh "$lib" --update "$@"
