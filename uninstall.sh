#!/usr/bin/env bash
# Placeholder until the real uninstall script is written.
set -euo pipefail

echo "uninstall.sh: uninstalling is not available yet in this development version of Skald;" \
    "a copy run from a checkout (README.md) is removed by deleting the checkout and its data directory." >&2
exit 1
