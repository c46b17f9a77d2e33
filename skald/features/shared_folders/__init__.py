"""Shared folders: places several members reach, managed by an administrator (#26)."""
