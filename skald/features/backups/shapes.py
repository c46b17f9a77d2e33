"""What a backup answers, apart from the code that makes it.

`/api/ops/backup` names `BackupResult` in its handler's signature, which Litestar reads
when the app is built: it lives here so that building the app does not import
`backup.py` (tarfile, the archive code), which loads when a backup runs
(docs/dev/web.md, "What loads at first use")."""

from __future__ import annotations

import msgspec


class BackupResult(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    bytes: int
    files: int
    skipped: int = 0  # entries left out (listed in the manifest)
