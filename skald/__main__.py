"""`python -m skald` and the zipapp entry point."""

from skald.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
