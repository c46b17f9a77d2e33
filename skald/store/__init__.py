"""Storage: every database Skald opens goes through this package."""

from skald.store.database import Database, open_encrypted, open_plain

__all__ = ["Database", "open_encrypted", "open_plain"]
