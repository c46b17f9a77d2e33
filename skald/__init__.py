"""Skald: a private AI assistant for a household."""

__version__ = "0.1.0"
