"""The `skald` command line (placeholder until the full CLI lands)."""

import sys

from skald import __version__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["version"]:
        print(f"skald {__version__}")
        return 0
    print("skald: usage: skald version", file=sys.stderr)
    return 2
