"""The chat feature: its hooks (`hooks.py`) and the modules they register."""
