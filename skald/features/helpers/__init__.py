"""The helpers feature: its hooks (`hooks.py`) and the modules they register."""
