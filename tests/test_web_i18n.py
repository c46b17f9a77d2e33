"""Everything the UI shows exists in English, Italian and French, with the same
placeholders, and the UI loads nothing from outside the app."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skald.plugins.specs import WebFiles
from skald.plugins.web import collect

WEB = Path(__file__).resolve().parent.parent / "web"
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _parts() -> list[WebFiles]:
    from skald.plugins.manager import Plugins

    return Plugins.builtin().web_files()


def _strings(locale: str) -> dict[str, str]:
    # What the server serves at /i18n/<locale>.json: the shell's keys and every feature's.
    return collect(WEB, _parts(), locale)


def _web_files(pattern: str) -> list[Path]:
    return [*WEB.rglob(pattern), *(f for p in _parts() for f in (p.folder / "web").rglob(pattern))]


def test_the_three_languages_have_the_same_keys_and_placeholders() -> None:
    en, it, fr = _strings("en"), _strings("it"), _strings("fr")
    assert set(en) == set(it) == set(fr)
    # File by file too: a feature's key is in its own three files, not elsewhere.
    for folder in [WEB, *(p.folder for p in _parts())]:
        keys = [
            set(json.loads(f.read_text(encoding="utf-8")))
            for f in (folder / "i18n" / f"{loc}.json" for loc in ("en", "it", "fr"))
            if f.is_file()
        ]
        assert all(k == keys[0] for k in keys), folder
    for key, text in en.items():
        want = sorted(PLACEHOLDER.findall(text))
        for other in (it, fr):
            assert sorted(PLACEHOLDER.findall(other[key])) == want, key
            assert other[key].strip(), key


def test_every_key_used_in_the_code_exists() -> None:
    en = _strings("en")
    used: set[str] = set()
    for js in _web_files("*.js"):
        code = "\n".join(
            line
            for line in js.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("//")
        )
        used |= set(re.findall(r"\bt\(\s*'([a-z0-9_.]+)'", code))
    missing = sorted(k for k in used if k not in en)
    assert not missing, missing


def test_nothing_is_loaded_from_another_site() -> None:
    for path in [WEB / "index.html", *_web_files("*.js"), *_web_files("*.css")]:
        if "vendor" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""(src|href)=["']https?://""", text), path
        assert ("<script>" not in text and "style=" not in text) or path.suffix != ".html", path
