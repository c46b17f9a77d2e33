"""`create_once` (skald/core/sealing.py): a key file is written once, 0600; a file that
is already there (another process won the race) is kept as it is."""

from __future__ import annotations

import stat
from pathlib import Path

from skald.core.sealing import create_once


def test_a_new_file_gets_the_data_and_an_existing_one_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "instance.key"
    create_once(path, b"first")
    assert path.read_bytes() == b"first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    create_once(path, b"second")
    assert path.read_bytes() == b"first"
