#!/usr/bin/env bash
# Placeholder until the real update script is written.
set -euo pipefail

echo "update.sh: updating is not available yet in this development version of Skald;" \
    "to run a newer version from a checkout, pull the source and rebuild with ci/build.sh as README.md explains." >&2
exit 1
