"""Every copy of a kept key is wiped (issue 20 item 12, issue 32 item 10).

A hard link made to a sealed file before it is replaced or revoked still names the
same inode afterwards: reading it shows whether the bytes were overwritten or only
unlinked (an unlinked file keeps its bytes on the disk until they are reused).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from skald.core.kept_keys import KeptKeys
from skald.core.sealing import InstanceKey

USER = "u" + "1" * 31


@pytest.fixture
def kept(tmp_path: Path) -> KeptKeys:
    return KeptKeys(tmp_path / "kept-keys", InstanceKey.load_or_create(tmp_path / "instance.key"))


def _link(path: Path, tmp_path: Path) -> tuple[Path, bytes]:
    """A second name for the file, and its bytes now."""
    alias = tmp_path / f"alias-{secrets.token_hex(4)}"
    os.link(path, alias)
    return alias, alias.read_bytes()


def _wiped(alias: Path, before: bytes) -> bool:
    after = alias.read_bytes()
    return len(after) == len(before) and after == b"\0" * len(before)


def test_keeping_again_wipes_the_copy_it_replaces(kept: KeptKeys, tmp_path: Path) -> None:
    kept.keep(USER, secrets.token_bytes(32))
    first, before = _link(kept.path(USER), tmp_path)
    assert before and before != b"\0" * len(before)
    dek = secrets.token_bytes(32)
    kept.keep(USER, dek)
    assert _wiped(first, before)
    assert kept.open(USER) == dek  # the new copy is whole


def test_revoking_wipes_every_copy_including_one_a_crashed_keep_left(
    kept: KeptKeys, tmp_path: Path
) -> None:
    kept.keep(USER, secrets.token_bytes(32))
    kept.keep(USER, secrets.token_bytes(32))
    current, before = _link(kept.path(USER), tmp_path)
    # A keep that died between writing its temporary file and renaming it.
    crashed = kept.folder / f".{kept.path(USER).name}.deadbeef.tmp"
    crashed.write_bytes(before)
    leftover, leftover_before = _link(crashed, tmp_path)
    assert kept.forget(USER)
    assert _wiped(current, before) and _wiped(leftover, leftover_before)
    assert sorted(kept.folder.iterdir()) == []
    assert not kept.is_kept(USER) and kept.open(USER) is None
    assert not kept.forget(USER)


def test_another_members_kept_key_is_left_alone(kept: KeptKeys, tmp_path: Path) -> None:
    other = "u" + "2" * 31
    dek = secrets.token_bytes(32)
    kept.keep(other, dek)
    kept.keep(USER, secrets.token_bytes(32))
    assert kept.forget(USER)
    assert kept.open(other) == dek
