"""The app's translations, collected from the shell and every feature's and plugin's files.

Rule: `/i18n/<locale>.json` is one flat catalogue: the app shell's own file
(`web/i18n/<locale>.json`: keys several features share, and keys a branch still adds
there) first, then `i18n/<locale>.json` of every `WebFiles` folder in registration order
(built-in features first). A key is defined once: the same key in two files, a file
that is not a flat object of strings, or a missing shell file stops the start with a
`ConfigError` naming the files, as a plugin that fails to import does.

Trap: the catalogue is read once, when the app is built (before it serves anything),
so a translation edited on disk shows after a restart; `tests/test_translations.py`
reads the same collection (`collect`) for its checks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

from skald.errors import ConfigError
from skald.plugins.specs import WebFiles

LOCALES = ("en", "it", "fr")
NAME = re.compile(r"[a-z0-9_-]+")


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"translations {path}: unreadable ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError(f'translations {path}: not a flat object of "key": "text"')
    return data


def collect(shell: Path, parts: Sequence[WebFiles], locale: str) -> dict[str, str]:
    """The merged catalogue of `locale` (`shell`: the web root holding `i18n/`)."""
    merged = _read(shell / "i18n" / f"{locale}.json")
    where = dict.fromkeys(merged, f"web/i18n/{locale}.json")
    for part in parts:
        path = part.folder / "i18n" / f"{locale}.json"
        if not path.is_file():
            continue
        for key, text in _read(path).items():
            if key in where:
                raise ConfigError(f"translation {key!r} is defined twice: {where[key]} and {path}")
            where[key] = str(path)
            merged[key] = text
    return merged


class Catalogues:
    """Every locale's merged catalogue as the JSON bytes served, with an ETag."""

    def __init__(self, shell: Path, parts: Sequence[WebFiles]) -> None:
        self._body: dict[str, bytes] = {}
        for locale in LOCALES:
            body = json.dumps(collect(shell, parts, locale), ensure_ascii=False)
            self._body[locale] = body.encode("utf-8")

    def body(self, locale: str) -> bytes | None:
        return self._body.get(locale)

    def etag(self, locale: str) -> str:
        return '"' + hashlib.sha256(self._body[locale]).hexdigest()[:32] + '"'


def check_names(parts: Sequence[WebFiles]) -> list[WebFiles]:
    """The folders, refused up front when a name is not a URL segment or is taken twice."""
    seen: set[str] = set()
    for part in parts:
        if not NAME.fullmatch(part.name):
            raise ConfigError(f"web files {part.name!r}: a name is [a-z0-9_-]+")
        if part.name in seen:
            raise ConfigError(f"two plugins ship web files named {part.name!r}")
        seen.add(part.name)
    return list(parts)
