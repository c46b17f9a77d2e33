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


SEPARATOR_AT_A_BREAK = re.compile(r"^\s+[·—]\s|\s[·—]\s*$")


def test_no_separator_dot_starts_or_ends_a_template_line() -> None:
    # htm drops the whitespace around a line break inside a template, so "zone ·" at
    # the end of a line rendered as "zone ·Next run" (the Tasks and Marketplace cards).
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in _web_files("*.js")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if SEPARATOR_AT_A_BREAK.search(line) and not line.lstrip().startswith("//")
    ]
    assert not found, "\n".join(found)


def test_every_provider_kind_and_setup_check_has_words_in_every_language() -> None:
    # The server's provider list and checks speak English (the CLI shares them); the
    # page shows its own words for each, so a new provider or check needs its keys.
    from skald.ops.checks_setup import SETUP_CHECKS

    kinds = {
        p["id"]
        for p in json.loads((WEB.parent / "skald/llm/providers.json").read_text())["providers"]
    }
    kinds |= {"anthropic", "openai_compatible"}  # added by LlmService.kinds()
    checks = {c.__name__.removeprefix("check_") for c in SETUP_CHECKS}
    for locale in ("en", "it", "fr"):
        strings = _strings(locale)
        missing = sorted(k for k in kinds if f"providers.docs_{k}" not in strings)
        missing += sorted(c for c in checks if f"checklist.why_{c}" not in strings)
        assert not missing, f"{locale}: {missing}"


def test_every_seeded_rule_that_asks_a_person_has_its_reason_translated() -> None:
    from skald.approvals.rules import SEED_RULES

    js = (WEB / "js/components/approval.js").read_text()
    asked = [r.description for r in SEED_RULES if r.action == "require"]
    for reason in asked:
        if "{tool}" in reason:
            assert "using the tool (.+)" in js, reason
        else:
            assert json.dumps(reason) in js or f"'{reason}'" in js, f"no translation for {reason!r}"
