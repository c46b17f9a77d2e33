#!/usr/bin/env bash
# Placeholder until the real install script is written.
set -euo pipefail

echo "install.sh: installing is not available yet in this development version of Skald;" \
    "to try it, build it from a checkout with ci/build.sh and run the pyz as README.md explains." >&2
exit 1
