"""Everything the UI shows exists in English, Italian and French, with the same
placeholders, and the UI loads nothing from outside the app."""

from __future__ import annotations

import json
import re
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "web"
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _strings(locale: str) -> dict[str, str]:
    data: dict[str, str] = json.loads((WEB / "i18n" / f"{locale}.json").read_text(encoding="utf-8"))
    return data


def test_the_three_languages_have_the_same_keys_and_placeholders() -> None:
    en, it, fr = _strings("en"), _strings("it"), _strings("fr")
    assert set(en) == set(it) == set(fr)
    for key, text in en.items():
        want = sorted(PLACEHOLDER.findall(text))
        for other in (it, fr):
            assert sorted(PLACEHOLDER.findall(other[key])) == want, key
            assert other[key].strip(), key


def test_every_key_used_in_the_code_exists() -> None:
    en = _strings("en")
    used: set[str] = set()
    for js in (WEB / "js").rglob("*.js"):
        code = "\n".join(
            line
            for line in js.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("//")
        )
        used |= set(re.findall(r"\bt\(\s*'([a-z0-9_.]+)'", code))
    missing = sorted(k for k in used if k not in en)
    assert not missing, missing


def test_nothing_is_loaded_from_another_site() -> None:
    for path in [WEB / "index.html", *WEB.rglob("*.js"), *WEB.rglob("*.css")]:
        if "vendor" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""(src|href)=["']https?://""", text), path
        assert ("<script>" not in text and "style=" not in text) or path.suffix != ".html", path
